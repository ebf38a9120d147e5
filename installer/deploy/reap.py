"""A cancelled run ends every process it started on the admin host.

ansible-runner cancels a run with SIGKILL to ansible-playbook's process group. Ansible's workers are
not in it: each calls ``setsid()`` when it starts (ansible-core, ``WorkerProcess._detach``), so they
outlive the kill, sleeping in their tasks, and so do the programs a task started and the SSH
connection masters (``ControlPersist``), which leave their parent on purpose. Once ansible-playbook
is gone no parent link leads to any of them.

The environment does. Each run's environment names its run directory (:data:`MARKER`), and every
process Ansible starts inherits it: the workers (forked), a local task's programs and ssh (started
with the inherited environment), a connection master (ssh's own fork). On cancel, vigil sends
SIGTERM to every process whose environment carries the run's marker (ansible-playbook's own handler
then stops its workers in order), gives them :data:`GRACE` seconds, and sends SIGKILL to the rest.
Each signal goes through a pidfd opened before the environment is read again, so a pid that ended
and was given to another process in between is never signalled.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: the environment variable that names a run's directory in every process of the run
MARKER = "VIGIL_RUN_DIR"
#: seconds between SIGTERM and SIGKILL
GRACE = 10.0
#: /proc/PID/environ is at most the kernel's ARG_MAX-bounded area; read no more than this of it
_ENVIRON_MAX = 4 << 20


def marker(run_dir: Path) -> dict[str, str]:
    """The environment entry that marks RUN_DIR's processes."""
    return {MARKER: str(run_dir)}


def _needle(run_dir: Path) -> bytes:
    return b"\0" + f"{MARKER}={run_dir}".encode() + b"\0"


def _carries(pid: int, needle: bytes) -> bool:
    """Whether process PID's environment has the exact entry in NEEDLE (False if it is gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(_ENVIRON_MAX)
    except OSError:  # gone, a kernel thread, or another user's process this user may not read
        return False
    return needle in b"\0" + data + (b"" if data.endswith(b"\0") else b"\0")


def run_processes(run_dir: Path) -> list[int]:
    """The processes (other than this one) whose environment names RUN_DIR as their run."""
    needle = _needle(run_dir)
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me and _carries(int(entry.name), needle):
            found.append(int(entry.name))
    return sorted(found)


def _signal(pid: int, sig: signal.Signals, needle: bytes) -> bool:
    """Send SIG to PID if it still carries NEEDLE, through a pidfd so that the pid cannot be reused
    between the check and the signal. True when the signal was sent."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if not _carries(pid, needle):
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def end_run_processes(run_dir: Path, *, grace: float = GRACE) -> int:
    """SIGTERM every process of RUN_DIR's run, SIGKILL what is left after GRACE seconds; return how
    many processes were found. Returns once none is left, or after a further 5 s."""
    needle = _needle(run_dir)
    pids = run_processes(run_dir)
    for pid in pids:
        _signal(pid, signal.SIGTERM, needle)
    deadline = time.monotonic() + grace
    while run_processes(run_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    seen = set(pids)
    deadline = time.monotonic() + 5
    while (left := run_processes(run_dir)) and time.monotonic() < deadline:
        seen.update(left)  # SIGKILL again each round: a process started after the first scan too
        for pid in left:
            _signal(pid, signal.SIGKILL, needle)
        time.sleep(0.05)
    return len(seen)
