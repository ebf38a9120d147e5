"""Booting a host with systemd-nspawn and stopping it again, by its own recorded PID only.

A container is never addressed by machine name (it is not registered with machined); `lab down`
signals the systemd-nspawn process the lab started, through a pidfd opened on the PID and only
after checking that it still is that process (same start time), so a reused PID is never signalled.
`lab down` returns once that process has exited, every thread of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from vigil.installer.lab.errors import LabError
from vigil.installer.lab.hosts import BRIDGE, Host

#: how long `stop` waits for the container's orderly shutdown after SIGTERM, and then for the end
#: after SIGKILL, before it gives up on the host
TERM_GRACE = 30.0
KILL_WAIT = 10.0


@dataclass(frozen=True)
class Proc:
    pid: int
    #: start time in clock ticks since boot (/proc/PID/stat field 22): tells a reused PID apart
    starttime: int


def _stat(pid: int | str) -> tuple[str, int] | None:
    """(state, starttime) of PID (or of "PID/task/TID"), or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _threads_running(pid: int) -> bool:
    """Whether a thread of PID has not exited yet: a process whose main thread ends first shows as a
    zombie (Z) in /proc/PID/stat while its other threads still run."""
    try:
        tids = [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return False
    return any((st := _stat(f"{pid}/task/{tid}")) is not None and st[0] not in ("Z", "X") for tid in tids)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def alive(proc: Proc) -> bool:
    """Whether the process the lab started still runs: its PID has the recorded start time and a
    thread of it has not exited. A zombie is reaped when it is ours; one whose parent is another
    process (the `lab up` that started it) holds nothing but its PID and counts as gone."""
    st = _stat(proc.pid)
    if st is None or st[1] != proc.starttime:
        return False
    if st[0] in ("Z", "X"):
        if _threads_running(proc.pid):
            return True
        _reap(proc.pid)
        return False
    return True


def _send(proc: Proc, sig: signal.Signals) -> None:
    """Send SIG to PROC if it is still the process the lab started: the pidfd holds on to the
    process, then its start time is checked, so a PID reused meanwhile is never signalled."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    try:
        if alive(proc):
            signal.pidfd_send_signal(fd, sig)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


def _wait_gone(proc: Proc, seconds: float, step: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True


def start(host: Host, rootfs: Path, log: Path, *, cgroup_dirs: list[str]) -> Proc:
    argv = [
        "systemd-nspawn",
        "--quiet",
        "-D",
        str(rootfs),
        "-M",
        host.name,
        "--boot",
        f"--network-bridge={BRIDGE}",
        "--register=no",
        "--keep-unit",
        "--link-journal=no",
        "--resolv-conf=off",
        "--timezone=off",
        "--console=read-only",
    ]
    # the shell moves itself into the container's own cgroups, then becomes systemd-nspawn (same PID)
    moves = "".join(f'echo 0 > "{d}/cgroup.procs" && ' for d in cgroup_dirs)
    wrapper = ["sh", "-c", f'{moves}exec "$@"', "sh", *argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        p = subprocess.Popen(
            wrapper,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    # the Popen object is dropped: the container outlives this process; alive() reaps it if it is ours
    st = None
    for _ in range(50):
        st = _stat(p.pid)
        if st is not None:
            break
        time.sleep(0.01)
    if st is None or p.poll() is not None:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise LabError(host.name, f"systemd-nspawn exited at once: {' | '.join(tail)}")
    return Proc(p.pid, st[1])


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids


def stop(
    proc: Proc, *, name: str | None = None, grace: float | None = None, kill_wait: float | None = None
) -> str:
    """Stop the container and return once its systemd-nspawn process has exited: SIGTERM (an orderly
    shutdown), up to GRACE seconds (TERM_GRACE), then SIGKILL to the container's init and to
    systemd-nspawn, up to KILL_WAIT seconds. Returns how it ended ("not running", "stopped",
    "killed"); raises LabError about NAME (the host) when the process is still there after both."""
    grace = TERM_GRACE if grace is None else grace
    kill_wait = KILL_WAIT if kill_wait is None else kill_wait
    if not alive(proc):
        return "not running"
    # the container's PID 1, for the fallback
    leaders = [Proc(k, st[1]) for k in _children(proc.pid) if (st := _stat(k)) is not None]
    _send(proc, signal.SIGTERM)
    if _wait_gone(proc, grace, 0.2):
        return "stopped"
    # the container's init first (this ends its whole PID namespace), then nspawn itself
    for leader in leaders:
        _send(leader, signal.SIGKILL)
    _send(proc, signal.SIGKILL)
    if _wait_gone(proc, kill_wait, 0.1):
        return "killed"
    raise LabError(
        name or f"pid {proc.pid}",
        f"systemd-nspawn (pid {proc.pid}) did not exit within {grace:g} s of SIGTERM and {kill_wait:g} s "
        "of SIGKILL; end it by hand, then run `vigil lab down` again",
    )


def kill(proc: Proc, *, name: str | None = None, kill_wait: float | None = None) -> str:
    """Stop the container hard, as a power cut would: SIGKILL to its init and to systemd-nspawn, no
    shutdown. Returns "not running" or "killed"; raises LabError about NAME when it is still there."""
    kill_wait = KILL_WAIT if kill_wait is None else kill_wait
    if not alive(proc):
        return "not running"
    for leader in [Proc(k, st[1]) for k in _children(proc.pid) if (st := _stat(k)) is not None]:
        _send(leader, signal.SIGKILL)
    _send(proc, signal.SIGKILL)
    if _wait_gone(proc, kill_wait, 0.1):
        return "killed"
    raise LabError(name or f"pid {proc.pid}", f"systemd-nspawn (pid {proc.pid}) did not exit after SIGKILL")


def our_strays(lab_dir: Path, known: set[int]) -> list[int]:
    """systemd-nspawn processes booting a root under LAB_DIR that the state file does not record."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in known:
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and argv[0].endswith(b"systemd-nspawn")
            and any(a.startswith(str(lab_dir).encode() + b"/") for a in argv)
        ):
            found.append(int(d.name))
    return sorted(found)
