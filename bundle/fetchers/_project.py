"""Build our own Python project into a wheel, offline and reproducibly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vigil.basics.atomic import copy_file_atomic
from vigil.bundle.errors import FetchError
from vigil.bundle.fetchers._pip import DEFAULT_INDEX, clean_pip_env

_SKIP = {
    ".git",
    ".venv",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".cache",
}
DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest time a zip file can hold


def _source_files(project: Path) -> list[Path]:
    """Files that make up the project: git's view (tracked + untracked, not ignored), else a walk."""
    if (project / ".git").exists() and shutil.which("git"):
        res = subprocess.run(
            ["git", "-C", str(project), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=False,
        )
        if res.returncode == 0:
            names = sorted({n for n in res.stdout.decode().split("\0") if n})
            return [Path(n) for n in names if (project / n).is_file()]
    out = []
    for root, dirs, files in os.walk(project):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.endswith(".egg-info"))
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                out.append((Path(root) / f).relative_to(project))
    return out


def _epoch(project: Path) -> str:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value:
        return value
    if (project / ".git").exists() and shutil.which("git"):
        res = subprocess.run(
            ["git", "-C", str(project), "log", "-1", "--format=%ct"],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode == 0 and res.stdout.strip().isdigit():
            return str(max(int(res.stdout.strip()), DEFAULT_EPOCH))
    return str(DEFAULT_EPOCH)


def build_project_wheel(project_dir: Path, out_dir: Path) -> Path:
    """Build the Python project at ``project_dir`` into a wheel in ``out_dir``; returns its path.

    The project is copied first (git's view of its files, so stale ``build/`` trees and ignored
    files never reach the wheel) and built with the running interpreter's own setuptools
    (``pip wheel --no-deps --no-build-isolation --no-index``): no index is needed. Timestamps come
    from ``SOURCE_DATE_EPOCH``, else from the last commit, so two builds of one tree are identical.
    If this environment cannot build wheels itself (setuptools < 70.1 without the ``wheel``
    package), the build is retried with build isolation from the public index, which needs a
    connected host.
    """
    project = Path(project_dir).resolve()
    out_dir = Path(out_dir)
    if not (project / "pyproject.toml").is_file() and not (project / "setup.py").is_file():
        raise FetchError(str(project), "not a Python project (no pyproject.toml or setup.py)")
    out_dir.mkdir(parents=True, exist_ok=True)
    env = clean_pip_env()
    env["SOURCE_DATE_EPOCH"] = _epoch(project)
    env["PYTHONHASHSEED"] = "0"
    with tempfile.TemporaryDirectory(prefix="vigil-wheel-") as tmp:
        src = Path(tmp) / "src"
        for rel in _source_files(project):
            dest = src / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(project / rel, dest)
            os.chmod(dest, 0o755 if os.access(project / rel, os.X_OK) else 0o644)
        wheels = Path(tmp) / "wheels"
        base = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--no-cache-dir",
            "-w",
            str(wheels),
        ]
        res = subprocess.run(
            [*base, "--no-build-isolation", "--no-index", str(src)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0 and "bdist_wheel" in (res.stdout + res.stderr):
            res = subprocess.run(
                [*base, "--index-url", DEFAULT_INDEX, str(src)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if res.returncode != 0:
                raise FetchError(
                    str(project),
                    "this environment cannot build wheels offline "
                    "(install setuptools>=70.1 or wheel into it) and the isolated "
                    f"build failed: {_reason(res)}",
                )
        if res.returncode != 0:
            raise FetchError(str(project), f"wheel build failed: {_reason(res)}")
        built = sorted(wheels.glob("*.whl"))
        if len(built) != 1:
            raise FetchError(str(project), f"expected one wheel, the build made {len(built)}")
        final = out_dir / built[0].name
        copy_file_atomic(built[0], final)
    return final


def _reason(res: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs or lines or ["no output"])[-1]
