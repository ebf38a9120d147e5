"""The Slurm commands one scrape runs, in parallel, each with a timeout.

Compact ``-o``/``-O`` format strings, never ``--json`` (which is far slower on a busy controller).
A command that fails, times out or cannot be started gives a :class:`Result` with ``ok`` false and
a one-line ``error``; nothing here raises for a Slurm problem.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

#: squeue: one line per job and per array task (-r), all partitions (-a), no header (-h):
#: state|account|partition|user|nodes|cpus|tres-per-node|reason  (reason last: it may hold anything)
SQUEUE_FORMAT = "%T|%a|%P|%u|%D|%C|%b|%r"
#: sinfo: one line per node and partition (-N):  node|state|cpus A/I/O/T|gres|gres used|partition
SINFO_FORMAT = "NodeList:0|,StateLong:0|,CPUsState:0|,Gres:0|,GresUsed:0|,Partition:0"

COMMANDS: dict[str, list[str]] = {
    "squeue": ["squeue", "-h", "-a", "-r", "-o", SQUEUE_FORMAT],
    "sinfo": ["sinfo", "-h", "-N", "-O", SINFO_FORMAT],
    "sdiag": ["sdiag"],
}


class Result(NamedTuple):
    command: str
    ok: bool
    stdout: str
    error: str
    seconds: float


def run(name: str, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> Result:
    """Run ARGV; on timeout its whole process group is killed."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    except OSError as e:
        return Result(name, False, "", f"cannot run {argv[0]}: {e.strerror or e}", time.monotonic() - start)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Result(name, False, "", f"timed out after {timeout:g}s", time.monotonic() - start)
    secs = time.monotonic() - start
    if proc.returncode != 0:
        lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = lines[-1] if lines else "no message"
        return Result(name, False, "", f"exit status {proc.returncode}: {why}", secs)
    return Result(name, True, out.decode("utf-8", "replace"), "", secs)


def run_all(
    commands: Mapping[str, Sequence[str]], *, timeout: float, env: Mapping[str, str] | None = None
) -> dict[str, Result]:
    """Run every command at once (one thread each) and wait for all: one snapshot."""
    results: dict[str, Result] = {}
    lock = threading.Lock()

    def one(name: str, argv: Sequence[str]) -> None:
        r = run(name, argv, timeout=timeout, env=env)
        with lock:
            results[name] = r

    threads = [
        threading.Thread(target=one, args=(n, a), name=f"slurm-{n}", daemon=True) for n, a in commands.items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {n: results[n] for n in commands}
