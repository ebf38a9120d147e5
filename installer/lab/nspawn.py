"""Booting a host with systemd-nspawn and stopping it again, by its own recorded PID only.

A container is never addressed by machine name (it is not registered with machined); `lab down`
signals the systemd-nspawn process the lab started, after checking that the PID still is that
process (same start time), so a reused PID is never signalled.
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


@dataclass(frozen=True)
class Proc:
    pid: int
    #: start time in clock ticks since boot (/proc/PID/stat field 22): tells a reused PID apart
    starttime: int


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, starttime) of PID, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def alive(proc: Proc) -> bool:
    st = _stat(proc.pid)
    if st is None or st[1] != proc.starttime:
        return False
    if st[0] in ("Z", "X"):
        _reap(proc.pid)
        return False
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


def stop(proc: Proc, *, grace: float = 30.0) -> str:
    """Stop the container: SIGTERM (an orderly shutdown), wait, then SIGKILL. Returns how it ended."""
    if not alive(proc):
        return "not running"
    leaders = _children(proc.pid)  # the container's PID 1, for the fallback
    os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(proc):
            return "stopped"
        time.sleep(0.2)
    # the container's init first (this ends its whole PID namespace), then nspawn itself
    for child in leaders:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    if alive(proc):
        os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not alive(proc):
            return "killed"
        time.sleep(0.1)
    raise LabError(f"pid {proc.pid}", "systemd-nspawn did not exit after SIGKILL")


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
