"""Build our own Python project into a wheel, offline and reproducibly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
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
    If this environment cannot build the project itself (its setuptools older than the project's
    ``[build-system] requires``, as in a plain ``python3 -m venv``, or < 70.1 without ``wheel``),
    the build is retried with build isolation from the public index, which needs a connected host;
    if that fails too, the error names what to install.
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
        unmet = unmet_build_requirements(project) if res.returncode != 0 else []
        if res.returncode != 0 and (unmet or "bdist_wheel" in (res.stdout + res.stderr)):
            # This environment's own build tools are too old for the project (a plain `python3 -m
            # venv` brings an old setuptools): build with isolation, which needs the index.
            res = subprocess.run(
                [*base, "--index-url", DEFAULT_INDEX, str(src)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if res.returncode != 0:
                need = " ".join(f"'{r}'" for r, _ in unmet) or "'setuptools>=70.1' wheel"
                have = "; ".join(f"{r.split('>=')[0].strip()} {v or 'not'} installed" for r, v in unmet)
                have = f" ({have})" if have else ""
                raise FetchError(
                    str(project),
                    f"this environment cannot build the wheel offline{have}: run "
                    f"`{sys.executable} -m pip install {need}`; the isolated build from the index "
                    f"failed too: {_reason(res)}",
                )
        if res.returncode != 0:
            raise FetchError(str(project), f"wheel build failed: {_reason(res)}")
        built = sorted(wheels.glob("*.whl"))
        if len(built) != 1:
            raise FetchError(str(project), f"expected one wheel, the build made {len(built)}")
        final = out_dir / built[0].name
        copy_file_atomic(built[0], final)
    return final


_SIMPLE_REQ = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:>=\s*([0-9]+(?:\.[0-9]+)*))?")
# Run by the interpreter that builds: the installed version of each distribution named in argv.
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "def v(n):\n"
    "    try:\n"
    "        return m.version(n)\n"
    "    except m.PackageNotFoundError:\n"
    "        return None\n"
    "print(json.dumps({n: v(n) for n in sys.argv[1:]}))\n"
)


def _release(version: str) -> tuple[int, ...]:
    m = re.match(r"[0-9]+(?:\.[0-9]+)*", version)
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def unmet_build_requirements(project: Path, python: str | None = None) -> list[tuple[str, str | None]]:
    """The project's ``[build-system] requires`` entries that ``python`` (default: this interpreter,
    which runs the build) does not meet, each with the version it has (None: not installed).

    Only the plain forms build requirements use (``name`` and ``name>=X.Y``) are judged; any other
    form is taken as met, so this never blocks a build it cannot judge.
    """
    try:
        doc = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    requires = doc.get("build-system", {}).get("requires", [])
    judged = []
    for req in requires if isinstance(requires, list) else []:
        m = _SIMPLE_REQ.fullmatch(req.strip()) if isinstance(req, str) else None
        if m is not None:
            judged.append((req.strip(), m.group(1), m.group(2)))
    if not judged:
        return []
    res = subprocess.run(
        [python or sys.executable, "-c", _VERSIONS, *(name for _, name, _ in judged)],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        have = json.loads(res.stdout) if res.returncode == 0 else {}
    except json.JSONDecodeError:
        have = {}
    if not isinstance(have, dict):
        return []
    unmet: list[tuple[str, str | None]] = []
    for req, name, minimum in judged:
        if name not in have:
            continue
        version = have[name]
        if version is None or (minimum and _release(str(version)) < _release(minimum)):
            unmet.append((req, None if version is None else str(version)))
    return unmet


def _reason(res: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
    # pip's own verdict (its ERROR: lines, of the inner build first), not the lines about where an
    # error came from
    errs = [ln for ln in lines if ln.startswith("ERROR:")] or [
        ln for ln in lines if "error" in ln.lower() and not ln.lower().startswith(("note:", "hint:"))
    ]
    return (errs or lines or ["no output"])[-1]
