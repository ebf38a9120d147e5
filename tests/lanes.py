"""`make test`: the lab tests and the rest, run side by side as two pytest processes ("lanes").

The lab tests mostly wait (for deploys on the lab's hosts, scrapes, alerts, Slurm jobs) while the
unit and integration tests need the CPU, so running them at the same time takes about as long as
the lab alone. Each lane is a pytest session of its own, with its own ``--basetemp`` under the run
directory, a JUnit XML file and a log; both share one release, built once (tests/helpers/shared.py,
through ``VIGIL_TEST_SHARED``). The lane of the rest runs at a lower CPU priority (``nice``): the lab
lane is the longer one, and its deploys and alert deadlines should not queue behind unit tests.

While they run, a line every minute says how far each lane is. At the end, in one place: each
lane's own output (its failures, its figures, its summary), the slowest tests of both, the
failures of both, and last a line in pytest's own form (``N passed, N failed, … in S s``). The exit
status is 0 only when both lanes pass; a lane that collects no test fails the run too.

    python -m tests.lanes [--run-dir DIR] [--slowest 30] [-- PYTEST ARGS...]

PYTEST ARGS go to both lanes (e.g. ``-x``, or ``-k upgrade``). The soak tests (marker ``soak``,
``make test-soak``) are in neither lane.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: (name, marker expression, nice increment): the lab first, the rest beside it at lower priority
LANES: tuple[tuple[str, str, int], ...] = (
    ("lab", "lab and not soak", 0),
    ("rest", "not lab and not soak", 10),
)
#: how often the runner says how far the lanes are
HEARTBEAT_S = 60.0
#: after an interrupt, how long a lane gets for its teardown before SIGTERM (and as long again
#: before SIGKILL): the lab lane's teardown takes the lab down
STOP_GRACE_S = 90.0
_PERCENT = re.compile(rb"\[\s*(\d+)%\]")
#: a line of pytest -q's progress: one character per test, then `[ NN%]` once the line is full
_DOTS = re.compile(rb"([.sFExX]+)(?:\s+\[\s*\d+%\])?")


@dataclass
class Outcome:
    """One lane's result, read from its JUnit XML."""

    counts: dict[str, int] = field(default_factory=dict)
    #: (seconds, node id) of every test, setup and teardown included
    times: list[tuple[float, str]] = field(default_factory=list)
    #: node ids of the tests that failed or errored, with pytest's word for it
    failures: list[tuple[str, str]] = field(default_factory=list)


def _nodeid(case: ET.Element) -> str:
    """pytest's node id back from a JUnit test case: ``file`` (xunit1), and the class (if any) that
    ``classname`` names after the module's dotted path."""
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname[len(module) + 1 :].split(".") if classname.startswith(module + ".") else []
    return "::".join([file or classname, *inner, name])


def read_junit(path: Path) -> Outcome:
    """The counts, times and failures in pytest's JUnit XML at PATH."""
    out = Outcome()
    root = ET.parse(path).getroot()  # noqa: S314 - our own lane's file
    counts = dict.fromkeys(("passed", "failed", "error", "skipped", "xfailed", "xpassed"), 0)
    for case in root.iter("testcase"):
        nodeid = _nodeid(case)
        out.times.append((float(case.get("time") or 0.0), nodeid))
        kinds = {child.tag for child in case}
        skipped = case.find("skipped")
        if "failure" in kinds:
            counts["failed"] += 1
            out.failures.append(("FAILED", nodeid))
        elif "error" in kinds:
            counts["error"] += 1
            out.failures.append(("ERROR", nodeid))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            counts["xfailed"] += 1
        elif skipped is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    # xpassed (strict=False) shows as a pass with a property; strict ones are failures already
    out.counts = counts
    return out


def summary_line(counts: dict[str, int], seconds: float) -> str:
    """pytest's closing line for COUNTS: `=== 3 passed, 1 failed in 12.34s (0:00:12) ===`."""
    order = ("failed", "passed", "skipped", "xfailed", "xpassed", "error")
    words = {"error": "errors"}
    parts = [f"{counts[k]} {words.get(k, k) if counts[k] != 1 else k}" for k in order if counts.get(k)] or [
        "no tests ran"
    ]
    hms = f" ({int(seconds // 3600)}:{time.strftime('%M:%S', time.gmtime(seconds))})" if seconds >= 60 else ""
    text = f" {', '.join(parts)} in {seconds:.2f}s{hms} "
    return text.center(100, "=")


def _progress(log: Path) -> str:
    """How many tests pytest -q has reported in LOG (its progress characters), and the last `[ NN%]`."""
    try:
        text = log.read_bytes()
    except OSError:
        return "starting"
    lines = [ln for ln in text.splitlines() if _DOTS.fullmatch(ln)]
    if not lines:
        return "collecting or first test"
    done = sum(len(_DOTS.fullmatch(ln).group(1)) for ln in lines)  # type: ignore[union-attr]
    found = _PERCENT.findall(lines[-1])
    return f"{done} done" + (f" ({int(found[-1])}%)" if found else "")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


@contextlib.contextmanager
def _exclusive(run_dir: Path) -> Iterator[None]:
    """One lanes run per run directory (the lab is one set of hosts anyway)."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{run_dir}.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"FAIL: {run_dir}: another `make test` is running with it") from None
        yield


def _clear(run_dir: Path) -> None:
    """Remove the last run's directory. Tests of the audit trail leave append-only files (chattr +a)
    behind when a run was interrupted before their teardown: those lose the flag first."""
    if not run_dir.exists():
        return
    try:
        shutil.rmtree(run_dir)
    except PermissionError:
        subprocess.run(["chattr", "-R", "-a", str(run_dir)], capture_output=True, check=False)
        shutil.rmtree(run_dir)


@dataclass
class Lane:
    name: str
    expr: str
    nice: int
    log: Path
    xml: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float | None = None

    def argv(self, run_dir: Path, extra: Sequence[str], target: str) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",  # two sessions must not write one .pytest_cache
            "-m",
            self.expr,
            f"--basetemp={run_dir / self.name}",
            f"--junitxml={self.xml}",
            "-o",
            "junit_family=xunit1",  # the test's file in each case
            *extra,
            target,
        ]
        return ["nice", "-n", str(self.nice), *cmd] if self.nice else cmd


def run(
    run_dir: Path,
    extra: Sequence[str],
    slowest: int,
    *,
    lanes_spec: Sequence[tuple[str, str, int]] = LANES,
    cwd: Path = REPO,
    target: str = "tests",
    stop_grace: float = STOP_GRACE_S,
) -> int:
    """Run the lanes of LANES_SPEC on TARGET (from CWD) at once; their report; 0 when all passed."""
    _clear(run_dir)
    (run_dir / "shared").mkdir(parents=True)
    env = {**os.environ, "VIGIL_TEST_SHARED": str(run_dir / "shared")}
    figures = os.environ.get("VIGIL_TEST_FIGURES")
    lanes = [Lane(n, e, nice, run_dir / f"{n}.log", run_dir / f"{n}.xml") for n, e, nice in lanes_spec]
    t0 = time.monotonic()
    for lane in lanes:
        lane.started = time.monotonic()
        with open(lane.log, "wb") as out:
            # a session of its own: an interrupt is passed on by this runner, once, to each lane
            lane.proc = subprocess.Popen(
                lane.argv(run_dir, extra, target),
                cwd=cwd,
                env={**env, "VIGIL_TEST_FIGURES": str(run_dir / f"{lane.name}-figures.json")},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    print(f"lanes: {', '.join(f'{ln.name} (-m {ln.expr!r})' for ln in lanes)}; logs in {run_dir}", flush=True)

    stopping: list[float] = []  # when an interrupt came

    def signal_lanes(sig: int) -> None:
        for lane in lanes:
            if lane.proc is not None and lane.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(lane.proc.pid, sig)

    def stop(signum: int, _frame: object) -> None:
        if not stopping:
            stopping.append(time.monotonic())
            signal_lanes(signal.SIGINT)  # pytest's own teardown runs: the lab lane takes the lab down

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    next_beat = time.monotonic() + HEARTBEAT_S
    escalated: set[int] = set()
    while any(ln.proc is not None and ln.proc.poll() is None for ln in lanes):
        for lane in lanes:
            if lane.ended is None and lane.proc is not None and lane.proc.poll() is not None:
                lane.ended = time.monotonic()
                print(
                    f"[{_minutes(lane.ended - t0)}] {lane.name}: done, exit {lane.proc.returncode}",
                    flush=True,
                )
        if time.monotonic() >= next_beat:
            state = " · ".join(
                f"{ln.name} {_progress(ln.log) if ln.ended is None else 'done'}" for ln in lanes
            )
            print(f"[{_minutes(time.monotonic() - t0)}] {state}", flush=True)
            next_beat += HEARTBEAT_S
        # a lane that outlives the interrupt (a test that swallowed it) is ended harder, in steps
        for after, sig in ((stop_grace, signal.SIGTERM), (2 * stop_grace, signal.SIGKILL)):
            if stopping and sig not in escalated and time.monotonic() - stopping[0] > after:
                escalated.add(sig)
                signal_lanes(sig)
        time.sleep(1.0)
    wall = time.monotonic() - t0
    for lane in lanes:
        if lane.ended is None:
            lane.ended = time.monotonic()
    if figures:  # the measured figures of both lanes, in the one file asked for
        merged: dict[str, object] = {}
        for lane in lanes:
            path = run_dir / f"{lane.name}-figures.json"
            if path.is_file():
                merged.update(json.loads(path.read_text()))
        Path(figures).write_text(json.dumps(merged, indent=1) + "\n")
    return report(lanes, wall, slowest)


def report(lanes: Sequence[Lane], wall: float, slowest: int) -> int:
    total: dict[str, int] = {}
    times: list[tuple[float, str, str]] = []
    failures: list[str] = []
    status = 0
    for lane in lanes:
        assert lane.proc is not None and lane.ended is not None
        rc = lane.proc.returncode
        head = f" lane {lane.name} (-m {lane.expr!r}): exit {rc}, {_minutes(lane.ended - lane.started)} "
        print(f"\n{head:=^100}")
        sys.stdout.write(lane.log.read_text(errors="replace"))
        outcome = read_junit(lane.xml) if lane.xml.is_file() else Outcome()
        if not lane.xml.is_file():
            failures.append(f"ERROR lane {lane.name}: no JUnit file, the lane did not finish (exit {rc})")
        for key, n in outcome.counts.items():
            total[key] = total.get(key, 0) + n
        times += [(secs, lane.name, nodeid) for secs, nodeid in outcome.times]
        failures += [f"{word} {nodeid} (lane {lane.name})" for word, nodeid in outcome.failures]
        if rc != 0:
            status = 1
            if not outcome.failures:
                failures.append(f"ERROR lane {lane.name}: pytest exited {rc} (see its output above)")
    print(f"\n{f' the {slowest} slowest tests of both lanes (setup and teardown included) ':=^100}")
    for secs, lane_name, nodeid in sorted(times, reverse=True)[:slowest]:
        print(f"{secs:9.2f}s  {lane_name:<4}  {nodeid}")
    print(f"\n{' lanes ':=^100}")
    for lane in lanes:
        assert lane.proc is not None and lane.ended is not None
        print(
            f"{lane.name:<4}  exit {lane.proc.returncode}  {_minutes(lane.ended - lane.started)}  {lane.log}"
        )
    print(f"wall  {_minutes(wall)}")
    if failures:
        print(f"\n{' failures of both lanes ':=^100}")
        for line in failures:
            print(line)
    print(summary_line(total, wall), flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lanes", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / f"vigil-test-lanes-{os.getuid()}",
        help="where the lanes' temporary files, logs and JUnit files go (emptied first)",
    )
    parser.add_argument("--slowest", type=int, default=30, help="how many of the slowest tests to list")
    parser.add_argument("pytest_args", nargs="*", help="passed to both lanes' pytest (after --)")
    args = parser.parse_args(argv)
    with _exclusive(args.run_dir):
        return run(args.run_dir, args.pytest_args, args.slowest)


if __name__ == "__main__":
    sys.exit(main())
