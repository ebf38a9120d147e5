"""The wheel install's script (roles/_common/files/unpack_wheel.py) run for real: unpack, rerun
unchanged, wrong sha256 refused with nothing written, a changed wheel swapped in, old versions pruned.

The script runs on the hosts' python3 (3.9 or newer): tests/integration/test_host_python39.py runs these
tests under Python 3.9 too, with a wheel the admin side built ($VIGIL_EXPORTERS_WHEEL).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.roles.rendering import REPO, ROLES


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exporters' wheel as the bundle builds it ($VIGIL_EXPORTERS_WHEEL: one built already)."""
    given = os.environ.get("VIGIL_EXPORTERS_WHEEL")
    if given:
        return Path(given)
    from vigil.bundle.fetchers._project import build_project_wheel

    return build_project_wheel(REPO / "exporters", tmp_path_factory.mktemp("wheel"))


def unpack(
    wheel: Path, home: Path, version: str, sha: str, keep: int = 2
) -> subprocess.CompletedProcess[str]:
    script = (ROLES / "_common" / "files" / "unpack_wheel.py").read_text()
    return subprocess.run(
        [sys.executable, "-", str(wheel), str(home), version, sha, str(keep)],
        input=script,
        capture_output=True,
        text=True,
        check=False,
    )


def test_unpack_wheel_installs_once_then_changes_nothing(tmp_path: Path, wheel: Path) -> None:
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    first = unpack(wheel, tmp_path, "0.1.0", sha)
    assert (first.returncode, first.stdout) == (0, "unpacked\n"), first.stderr
    tree = tmp_path / "0.1.0"
    assert (tree / "vigil" / "exporters" / "gpusim" / "__main__.py").is_file()
    assert list(
        (tree / "vigil" / "exporters" / "gpusim").glob("__pycache__/*.pyc")
    )  # the unit cannot write them
    assert (tree / ".vigil-wheel-sha256").read_text().strip() == sha
    assert oct((tree / "vigil" / "exporters" / "slurm" / "collector.py").stat().st_mode & 0o777) == "0o644"
    again = unpack(wheel, tmp_path, "0.1.0", sha)
    assert (again.returncode, again.stdout) == (0, "unchanged\n")
    # the unpacked tree alone, as a unit runs it; LD_LIBRARY_PATH stays for an interpreter that finds
    # its libraries through it (Debian 11's python3.9 in tests/integration/test_host_python39.py)
    env = {"PYTHONPATH": str(tree)}
    if "LD_LIBRARY_PATH" in os.environ:
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    run = subprocess.run(
        [sys.executable, "-m", "vigil.exporters.gpusim", "--version"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0 and "0.1.0" in run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.1.0"]  # no stage or old trees left


def test_unpack_wheel_refuses_a_wrong_sha256_and_writes_nothing(tmp_path: Path, wheel: Path) -> None:
    res = unpack(wheel, tmp_path, "0.1.0", "f" * 64)
    assert res.returncode == 2 and f"the bundle says {'f' * 64}" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_unpack_wheel_swaps_in_a_changed_wheel_and_prunes(tmp_path: Path, wheel: Path) -> None:
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    for version in ("0.0.1", "0.0.2"):
        assert unpack(wheel, tmp_path, version, sha).returncode == 0
    (tmp_path / "0.1.0").mkdir()
    (tmp_path / "0.1.0" / ".vigil-wheel-sha256").write_text("0" * 64 + "\n")  # same version, other build
    res = unpack(wheel, tmp_path, "0.1.0", sha, keep=2)
    assert res.stdout.splitlines() == ["unpacked", "pruned 0.0.1"], res.stdout
    assert (tmp_path / "0.1.0" / "vigil" / "exporters").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.0.2", "0.1.0"]
