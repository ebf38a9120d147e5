"""`lab down` returns only when each host's systemd-nspawn process has exited, and gives up on a host
after a bounded wait, naming it.

No container is booted: a host's recorded process is a small Python child of this test, recorded in
a lab state under tmp_path by PID and start time as `lab up` records systemd-nspawn. The bridge is
never touched (network.remove_bridge is replaced).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vigil.installer.lab import control, nspawn
from vigil.installer.lab import state as lab_state
from vigil.installer.lab.errors import LabError
from vigil.installer.lab.paths import LabPaths

#: how long the child takes to exit once it has SIGTERM
DELAY = 2.0

# Each child prints "ready" once its SIGTERM handling is in place.
SLOW_HANDLER = f"""
import os, signal, sys, time
def on_term(*_):
    time.sleep({DELAY})  # an orderly shutdown that takes a while
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(60)
"""
# The main thread ends at once (the process shows as a zombie in /proc/PID/stat) while another
# thread finishes the work and exits DELAY seconds later: the process is still exiting.
MAIN_THREAD_FIRST = f"""
import ctypes, os, signal, sys, threading, time
SYS_EXIT = {{"x86_64": 60, "aarch64": 93}}[os.uname().machine]
def finish():
    time.sleep({DELAY})
    os._exit(0)
def on_term(*_):
    threading.Thread(target=finish).start()
    ctypes.CDLL(None).syscall(SYS_EXIT, 0)  # exit(2): ends this thread only
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(60)
"""
IGNORES_TERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


class FakeLab:
    """A lab state under tmp_path whose hosts are child processes of this test."""

    def __init__(self, tmp_path: Path) -> None:
        self.paths = LabPaths(lab_dir=tmp_path / "lab", cache_dir=tmp_path / "cache")
        self.children: dict[str, subprocess.Popen[str]] = {}
        self.state = lab_state.LabState()
        #: one entry per call of network.remove_bridge
        self.bridge_removed: list[bool] = []

    def host(self, name: str, script: str) -> nspawn.Proc:
        child = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        st = nspawn._stat(child.pid)
        assert st is not None
        self.children[name] = child
        rootfs = self.paths.rootfs(name)
        rootfs.mkdir(parents=True)
        self.state.hosts[name] = lab_state.HostState(
            name=name,
            ip="198.18.0.21",  # recorded only; nothing is sent to it
            pid=child.pid,
            starttime=st[1],
            rootfs=str(rootfs),
            mode="copy",
            console_log=str(self.paths.console_log(name)),
        )
        lab_state.save(self.paths.state_file, self.state)
        return nspawn.Proc(child.pid, st[1])

    def kill_all(self) -> None:
        for child in self.children.values():
            if nspawn._stat(child.pid) is not None:
                child.kill()
            child.wait(timeout=10)
            if child.stdout is not None:
                child.stdout.close()


@pytest.fixture
def fake_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLab]:
    lab = FakeLab(tmp_path)
    monkeypatch.setattr(control, "_require_root", lambda: None)
    monkeypatch.setattr(control.network, "remove_bridge", lambda hosts: lab.bridge_removed.append(True))
    yield lab
    lab.kill_all()


def gone(proc: nspawn.Proc) -> bool:
    """No thread of the recorded process runs: read from /proc here, not with nspawn.alive."""
    st = nspawn._stat(proc.pid)
    if st is None or st[1] != proc.starttime:
        return True
    states = []
    for task in Path(f"/proc/{proc.pid}/task").glob("*"):
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue  # that thread has just gone
    return all(s in ("Z", "X") for s in states)


@pytest.mark.parametrize(
    "script", [SLOW_HANDLER, MAIN_THREAD_FIRST], ids=["slow-handler", "main-thread-first"]
)
def test_down_returns_when_the_process_has_exited(fake_lab: FakeLab, script: str) -> None:
    procs = [fake_lab.host("gpu01", script), fake_lab.host("gpu02", script)]
    steps: list[str] = []
    t0 = time.monotonic()
    outcome = control.down(fake_lab.paths, log=steps.append)
    took = time.monotonic() - t0
    assert outcome == {"gpu01": "stopped", "gpu02": "stopped"}
    assert steps == ["gpu01: stopped", "gpu02: stopped"]
    # the children took DELAY seconds to exit after SIGTERM, and down waited for them
    assert took >= DELAY * 0.9, took
    assert [p.pid for p in procs if not gone(p)] == []
    # ours: reaped by down, nothing of them is left in /proc
    assert [p.pid for p in procs if nspawn._stat(p.pid) is not None] == []
    assert not fake_lab.paths.state_file.exists()
    assert fake_lab.bridge_removed == [True]


def test_down_kills_a_host_that_ignores_sigterm(fake_lab: FakeLab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nspawn, "TERM_GRACE", 1.0)
    proc = fake_lab.host("gpu01", IGNORES_TERM)
    t0 = time.monotonic()
    assert control.down(fake_lab.paths) == {"gpu01": "killed"}
    assert time.monotonic() - t0 >= 1.0
    assert gone(proc)


def test_the_wait_is_bounded_and_the_error_names_the_host(
    fake_lab: FakeLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host whose process outlives SIGTERM and SIGKILL (here: SIGKILL is not sent, as if the process
    were stuck in the kernel) fails `down` after TERM_GRACE + KILL_WAIT, by name; the other host
    stops, and what `down` removes after the containers is left for the next `down`."""
    monkeypatch.setattr(nspawn, "TERM_GRACE", 1.0)
    monkeypatch.setattr(nspawn, "KILL_WAIT", 1.0)
    send = nspawn._send
    monkeypatch.setattr(nspawn, "_send", lambda p, sig: None if sig == signal.SIGKILL else send(p, sig))
    stuck = fake_lab.host("gpu01", IGNORES_TERM)
    other = fake_lab.host("gpu02", SLOW_HANDLER)
    t0 = time.monotonic()
    with pytest.raises(LabError) as err:
        control.down(fake_lab.paths)
    took = time.monotonic() - t0
    assert str(err.value) == (
        f"gpu01: systemd-nspawn (pid {stuck.pid}) did not exit within 1 s of SIGTERM and 1 s of SIGKILL; "
        "end it by hand, then run `vigil lab down` again"
    )
    assert 2.0 <= took < 2.0 + DELAY + 5, took
    assert not gone(stuck) and gone(other)
    assert lab_state.load(fake_lab.paths.state_file).hosts.keys() == {"gpu01", "gpu02"}
    assert fake_lab.paths.rootfs("gpu01").is_dir()
    assert fake_lab.bridge_removed == []
    # ended by hand, `down` runs again and finishes
    fake_lab.children["gpu01"].kill()
    fake_lab.children["gpu01"].wait(timeout=10)
    assert control.down(fake_lab.paths) == {"gpu01": "not running", "gpu02": "not running"}
    assert not fake_lab.paths.state_file.exists()
