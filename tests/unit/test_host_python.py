"""`make lint-host-python`: vermin, with the Makefile's flags, on the code that runs on the hosts.

It must refuse what a host's python3 3.9 cannot run, accept what it can (annotations are strings
there: `X | None` in one is fine), and pass on the real host-side files. The lane of
tests/helpers/host_python.py must hold a test for every host-side file of the roles.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.host_python import HOST_SIDE_TESTS, REPO, host_side_files

VERMIN = Path(sys.executable).parent / "vermin"


def vermin_flags() -> list[str]:
    """The flags `make lint-host-python` runs vermin with."""
    found = re.search(r"^VERMIN_FLAGS\s*:?=\s*(.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert found, "Makefile: no VERMIN_FLAGS"
    return shlex.split(found.group(1))


def vermin(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VERMIN), *vermin_flags(), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


#: what a 3.9 host cannot run, and what vermin says about it
NEWER = {
    "zip_strict.py": ("pairs = list(zip([1], [2], strict=True))\n", "'zip(strict)' requires !2, 3.10"),
    "utc.py": (
        "import datetime\nnow = datetime.datetime.now(datetime.UTC)\n",
        "'datetime.UTC' member requires",
    ),
    "utc_from.py": ("from datetime import UTC\n", "'datetime.UTC' member requires"),
    "match.py": (
        "def f(x):\n    match x:\n        case 1:\n            return 1\n",
        "pattern matching requires",
    ),
    "slots.py": (
        "import dataclasses\n\n@dataclasses.dataclass(slots=True)\nclass A:\n    x: int = 0\n",
        "'dataclasses.dataclass(slots)' requires",
    ),
    "tomllib.py": ("import tomllib\n", "'tomllib' module requires !2, 3.11"),
}


def test_each_newer_construct_fails_the_lint(tmp_path: Path) -> None:
    for name, (code, _) in NEWER.items():
        (tmp_path / name).write_text(code)
    res = vermin(sorted(tmp_path.iterdir()))
    assert res.returncode != 0, res.stdout
    for name, (_, says) in NEWER.items():
        block = res.stdout.split(str(tmp_path / name), 1)[1].split("\n\n", 1)[0]
        assert says in block, f"{name}: {block!r}"


def test_annotations_that_3_9_never_evaluates_pass(tmp_path: Path) -> None:
    ok = tmp_path / "ok.py"
    ok.write_text(
        "from __future__ import annotations\n\n"
        "def f(x: int | None, y: list[dict[str, int]] | None = None) -> tuple[int, ...] | None:\n"
        "    z: set[str] | None = None\n"
        "    return None if z is None else (x or 0,)\n"
    )
    res = vermin([ok])
    assert res.returncode == 0, res.stdout


def test_the_host_side_files_pass() -> None:
    files = host_side_files()
    assert {p.name for p in files} >= {"vigil_files.py", "vigil_deployed.py", "vigil_tls_expiry.py", "sim.py"}
    res = vermin(files)
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize(
    "path",
    [p for p in host_side_files() if p.is_relative_to(REPO / "roles")],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_each_role_file_has_a_test_in_the_3_9_lane(path: Path) -> None:
    lane = [REPO / t for t in HOST_SIDE_TESTS]
    sources = [p for t in lane for p in ([t] if t.is_file() else sorted(t.rglob("*.py")))]
    assert any(path.name in s.read_text() for s in sources), f"no test of {HOST_SIDE_TESTS} names {path.name}"
