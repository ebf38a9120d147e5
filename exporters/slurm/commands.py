"""The Slurm commands one scrape runs, in parallel, each with a timeout.

Compact ``-o``/``-O`` format strings, never ``--json`` (which is far slower on a busy controller,
and on Slurm 22.05 needs the openapi plugins that ship with slurmrestd).
A command that fails, times out or cannot be started gives a :class:`Result` with ``ok`` false and
a one-line ``error``; nothing here raises for a Slurm problem.

Fields are separated by :class:`Marks` made fresh for each scrape, never by a fixed character:
Slurm takes any account name up to 1024 bytes when associations are not enforced (``|``, a
newline, anything but NUL), and prints it as it is. A job's owner cannot know the marks of a
scrape before its account is printed, and the marks hold upper-case letters, which Slurm never
leaves in an account name (slurmctld lower-cases it when a job is submitted or updated).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple


class Marks(NamedTuple):
    """What separates the fields of one record (``field``) and ends a record (``end``, then a newline)."""

    field: str
    end: str


def new_marks() -> Marks:
    """Marks for one scrape: 64 random bits, upper case (never in an account name, see above)."""
    token = "V" + secrets.token_hex(8).upper()
    return Marks(f"|{token}|", f"|{token}.")


#: squeue: one record per job and per array task (-r), all partitions (-a), no header (-h):
#: state, account, partition, user, nodes, cpus, tres-per-node, reason
SQUEUE_FIELDS = ("%T", "%a", "%P", "%u", "%D", "%C", "%b", "%r")
#: sinfo: one record per node and partition (-N):  node, state, cpus A/I/O/T, gres, gres used, partition
SINFO_FIELDS = ("NodeList", "StateLong", "CPUsState", "Gres", "GresUsed", "Partition")


def squeue_format(marks: Marks) -> str:
    return marks.field.join(SQUEUE_FIELDS) + marks.end


def sinfo_format(marks: Marks) -> str:
    """sinfo -O: ``Type:width`` then the suffix (``:0``: no padding, no truncation); ``,`` between."""
    return (
        ",".join(f"{name}:0{marks.field}" for name in SINFO_FIELDS[:-1]) + f",{SINFO_FIELDS[-1]}:0{marks.end}"
    )


def commands(marks: Marks) -> dict[str, list[str]]:
    """The argv of each command, with these marks in the format strings."""
    return {
        "squeue": ["squeue", "-h", "-a", "-r", "-o", squeue_format(marks)],
        "sinfo": ["sinfo", "-h", "-N", "-O", sinfo_format(marks)],
        "sdiag": ["sdiag"],
    }


#: the names of the commands one scrape runs, in order
COMMAND_NAMES = tuple(commands(Marks("|", "")))


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
