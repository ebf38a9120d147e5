"""Which processes a cancelled run ends (installer/deploy/reap.py): exactly those whose environment
carries the run's marker, whatever else they carry, and none other."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vigil.installer.deploy import reap


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(5)


def spawn(procs: list[subprocess.Popen[bytes]], env: dict[str, str], script: str = "sleep 300") -> int:
    p = subprocess.Popen(
        ["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin", **env}, start_new_session=True
    )
    procs.append(p)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until it is exec'd with its environment (or already gone)
        try:
            if b"\0PATH=/usr/bin:/bin\0" in b"\0" + Path(f"/proc/{p.pid}/environ").read_bytes():
                break
        except OSError:
            break
        time.sleep(0.01)
    return p.pid


def alive(pid: int, procs: list[subprocess.Popen[bytes]]) -> bool:
    return next(p for p in procs if p.pid == pid).poll() is None


def test_only_the_exact_marker_is_ended(procs: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    run = tmp_path / "runs" / "run1"
    ours = spawn(procs, reap.marker(run))
    # in a session of its own and among other variables, as an Ansible worker is
    ours_too = spawn(procs, {"A": "1", **reap.marker(run), "Z": "2"})
    others = [
        spawn(procs, reap.marker(tmp_path / "runs" / "run10")),  # a longer run directory
        spawn(procs, reap.marker(tmp_path / "runs")),  # a shorter one
        spawn(procs, {"FOO": f"{reap.MARKER}={run}"}),  # the marker's text inside another value
        spawn(procs, {"X" + reap.MARKER: str(run)}),  # a longer name
        spawn(procs, {reap.MARKER: f"{run}\n"}),  # a trailing newline
        spawn(procs, {}),
    ]
    assert set(reap.run_processes(run)) >= {ours, ours_too}
    assert not set(reap.run_processes(run)) & set(others)
    assert reap.end_run_processes(run, grace=5) >= 2
    assert not alive(ours, procs) and not alive(ours_too, procs)
    assert all(alive(pid, procs) for pid in others)


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(
    procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    ready = tmp_path / "ready"
    stubborn = spawn(procs, reap.marker(run), f"trap '' TERM; : > {ready}; while :; do sleep 1; done")
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:  # SIGTERM before the trap would end it
        time.sleep(0.01)
    started = time.monotonic()
    reap.end_run_processes(run, grace=0.5)
    p = next(p for p in procs if p.pid == stubborn)
    assert p.wait(5) == -signal.SIGKILL
    assert time.monotonic() - started < 10


def test_this_process_is_never_signalled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    monkeypatch.setattr(reap, "_carries", lambda pid, needle: True)  # as if every process carried it
    assert os.getpid() not in reap.run_processes(run)


def test_a_pid_that_no_longer_carries_the_marker_is_not_signalled(
    procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """The pid is pinned by a pidfd and the environment read again before the signal: a pid found
    for the run and reused by another process in between is left alone."""
    other = spawn(procs, {})
    assert reap._signal(other, signal.SIGKILL, reap._needle(tmp_path / "run")) is False
    assert alive(other, procs)
    gone = spawn(procs, reap.marker(tmp_path / "run"), "exit 0")
    next(p for p in procs if p.pid == gone).wait(5)
    assert reap._signal(gone, signal.SIGKILL, reap._needle(tmp_path / "run")) is False


def test_an_unreadable_or_odd_environ_is_no_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needle = reap._needle(tmp_path / "run")
    assert reap._carries(0, needle) is False  # no such process
    assert reap._carries(2**22 + 7, needle) is False
    # an environment whose last entry has no NUL (a process may rewrite its own) still matches whole
    real_open = open

    def fake_open(path: str, mode: str = "r", *a: object, **k: object) -> object:
        if path == "/proc/4242/environ":
            import io

            return io.BytesIO(f"{reap.MARKER}={tmp_path / 'run'}".encode())
        return real_open(path, mode, *a, **k)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", fake_open)
    assert reap._carries(4242, needle) is True
