"""`make test`'s lanes (tests/lanes.py), run for real on a small tree of tests in tmp_path: two pytest
sessions at once, one report, an exit status that fails when either lane fails."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import lanes

CONFTEST = """
import json, os
from pathlib import Path

def pytest_configure(config):
    config.addinivalue_line("markers", "lab: the slow lane")

def pytest_sessionfinish(session):
    # as tests/helpers/measured.py does: the session's figures to $VIGIL_TEST_FIGURES
    path = Path(os.environ["VIGIL_TEST_FIGURES"])
    path.write_text(json.dumps({f"figure of {path.name}": {"seconds": 1.0}}))
"""

PASSING = """
import pytest, time

@pytest.mark.lab
def test_lab_one():
    time.sleep(0.3)

@pytest.mark.lab
class TestGroup:
    def test_in_a_class(self):
        pass

def test_rest_one():
    pass

@pytest.mark.skip(reason="not here")
def test_rest_skipped():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_rest_xfail():
    assert False
"""

BROKEN = """
import pytest

@pytest.mark.lab
def test_lab_broken():
    assert 1 + 1 == 3, "arithmetic in the lab"

@pytest.fixture
def bad():
    raise RuntimeError("fixture exploded")

def test_rest_error(bad):
    pass
"""

SPEC = (("lab", "lab", 0), ("rest", "not lab", 10))


def _tree(tmp_path: Path, *modules: tuple[str, str]) -> Path:
    tree = tmp_path / "tree"
    (tree / "t").mkdir(parents=True)
    (tree / "t" / "conftest.py").write_text(CONFTEST)
    (tree / "pytest.ini").write_text("[pytest]\n")
    for name, text in modules:
        (tree / "t" / name).write_text(text)
    return tree


def _run(tmp_path: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = lanes.run(tmp_path / "run", [], 5, lanes_spec=SPEC, cwd=tree, target="t")
    return rc, capsys.readouterr().out


def test_two_passing_lanes_pass_and_close_with_pytests_own_summary_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path, ("test_ok.py", PASSING))
    monkeypatch.setenv("VIGIL_TEST_FIGURES", str(tmp_path / "figures.json"))
    rc, out = _run(tmp_path, tree, capsys)
    assert rc == 0, out
    # each lane wrote its own figures, and the run put both in the one file asked for
    assert json.loads((tmp_path / "figures.json").read_text()) == {
        "figure of lab-figures.json": {"seconds": 1.0},
        "figure of rest-figures.json": {"seconds": 1.0},
    }
    last = out.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"=+ 3 passed, 1 skipped, 1 xfailed in \d+\.\d\ds =+", last), last
    # both lanes' own output is there, each under its own heading
    assert re.search(r"= lane lab \(-m 'lab'\): exit 0, ", out)
    assert re.search(r"= lane rest \(-m 'not lab'\): exit 0, ", out)
    # the slowest of both, the lab's sleeping test first, with pytest's node ids (classes too)
    slow = out.split("slowest tests of both lanes")[1].splitlines()[1:4]
    assert slow[0].split()[1:] == ["lab", "t/test_ok.py::test_lab_one"], slow
    lab = lanes.read_junit(tmp_path / "run" / "lab.xml")
    assert sorted(nodeid for _, nodeid in lab.times) == [
        "t/test_ok.py::TestGroup::test_in_a_class",
        "t/test_ok.py::test_lab_one",
    ]
    assert lab.counts["passed"] == 2 and lab.failures == []
    assert "failures of both lanes" not in out


def test_a_failure_in_either_lane_fails_the_run_and_is_named_in_one_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path, ("test_ok.py", PASSING), ("test_broken.py", BROKEN))
    rc, out = _run(tmp_path, tree, capsys)
    assert rc == 1
    failures = out.split(" failures of both lanes ")[1].splitlines()[1:3]
    assert failures == [
        "FAILED t/test_broken.py::test_lab_broken (lane lab)",
        "ERROR t/test_broken.py::test_rest_error (lane rest)",
    ], out
    # each lane's own traceback is printed too, as pytest printed it
    assert "arithmetic in the lab" in out and "fixture exploded" in out
    last = out.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"=+ 1 failed, 3 passed, 1 skipped, 1 xfailed, 1 error in \S+ =+", last), last


def test_a_lane_that_collects_nothing_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path, ("test_ok.py", PASSING.replace("@pytest.mark.lab\n", "")))
    rc, out = _run(tmp_path, tree, capsys)
    assert rc == 1
    assert "ERROR lane lab: pytest exited 5" in out, out


def test_the_runner_refuses_a_second_run_in_the_same_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with lanes._exclusive(run_dir):
        res = subprocess.run(
            [sys.executable, "-m", "tests.lanes", "--run-dir", str(run_dir)],
            capture_output=True,
            text=True,
            cwd=lanes.REPO,
            timeout=60,
            check=False,
        )
    assert res.returncode == 1
    assert res.stderr.strip() == f"FAIL: {run_dir}: another `make test` is running with it"


STUBBORN = """
import time

def test_swallows_the_interrupt():
    for _ in range(600):
        try:
            time.sleep(0.1)
        except KeyboardInterrupt:
            pass
"""

RUNNER = """
import sys
from pathlib import Path
from tests import lanes
sys.exit(lanes.run(Path(sys.argv[1]), [], 5, lanes_spec=(("lab", "lab", 0), ("rest", "not lab", 10)),
                   cwd=Path(sys.argv[2]), target="t", stop_grace=2.0))
"""


def test_an_interrupt_stops_both_lanes_even_one_that_swallows_it_and_reports_them(tmp_path: Path) -> None:
    tree = _tree(
        tmp_path,
        ("test_stubborn.py", STUBBORN),
        ("test_lab.py", "import pytest, time\n\n@pytest.mark.lab\ndef test_waits():\n    time.sleep(60)\n"),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path / "run"), str(tree)],
        cwd=lanes.REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(4)  # both lanes inside their test
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 15, out  # SIGINT, then SIGTERM 2 s later for the stubborn one
    assert proc.returncode == 1, out
    assert re.search(r"lab +exit 2 ", out), out  # pytest's own "interrupted"
    assert "ERROR lane rest:" in out, out


def test_the_last_runs_append_only_audit_files_do_not_stop_the_next_run(tmp_path: Path) -> None:
    """vigil makes its audit log append-only (chattr +a); the shared release's build home has one."""
    audit = tmp_path / "run" / "shared" / "release" / "build-home" / "audit"
    audit.mkdir(parents=True)
    (audit / "log.jsonl").write_text("{}\n")
    res = subprocess.run(
        ["chattr", "+a", str(audit / "log.jsonl")], capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        pytest.fail(f"chattr +a refused here ({res.stderr.strip()}); the lanes need it to test this")
    lanes._clear(tmp_path / "run")
    assert not (tmp_path / "run").exists()
