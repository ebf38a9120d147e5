"""Parsers for the output of the format strings in :mod:`vigil.exporters.slurm.commands`.

Records are split on the scrape's :class:`~vigil.exporters.slurm.commands.Marks`, never on a newline
or ``|``: an account name may hold either, and is kept as Slurm printed it (not even stripped).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from vigil.exporters.slurm.commands import SINFO_FIELDS, SQUEUE_FIELDS, Marks

_GRES_ITEM = re.compile(r"^gpu(?::([^:(]+))?:(\d+)")


def gpu_count(gres: str) -> int:
    """GPUs in a Gres/GresUsed string: ``gpu:4``, ``gpu:a100:2(S:0-1)``, ``gpu:2(IDX:0-1),shard:0``."""
    total = 0
    for item in _split_gres(gres):
        m = _GRES_ITEM.match(item)
        if m:
            total += int(m.group(2))
    return total


def _split_gres(gres: str) -> list[str]:
    """Split on commas outside parentheses (``gpu:2(IDX:0,2)`` is one item)."""
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in gres:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip() and i.strip() != "(null)"]


def tres_gpus(tres: str) -> int:
    """GPUs per node asked for in squeue's ``%b``: ``gres:gpu:2``, ``gres/gpu:2``, ``gpu:a100:1``, ``N/A``."""
    total = 0
    for item in tres.split(","):
        item = item.strip()
        for prefix in ("gres:", "gres/"):
            item = item.removeprefix(prefix)
        m = _GRES_ITEM.match(item)
        if m:
            total += int(m.group(2))
        elif item == "gpu":
            total += 1
    return total


class Jobs(NamedTuple):
    #: (state, account, partition) -> jobs (array tasks counted one by one)
    by_state: dict[tuple[str, str, str], int]
    #: (reason, partition) -> pending jobs
    pending_reasons: dict[tuple[str, str], int]
    #: account -> CPUs / GPUs held by its running jobs
    account_cpus: dict[str, int]
    account_gpus: dict[str, int]
    lines: int
    bad_lines: int


def records(text: str, marks: Marks, fields: int) -> Counter[tuple[str, ...]]:
    """The records in TEXT, each split into its FIELDS fields, with how often each occurs; anything
    that is not such a record (a wrong field count, text after the last record) is counted under ``()``.
    Identical records (array tasks, mostly) are counted first and split once each."""
    chunks = text.split(marks.end + "\n")
    out: Counter[tuple[str, ...]] = Counter()
    if chunks[-1].strip():
        out[()] += 1
    for chunk, n in Counter(chunks[:-1]).items():
        parts = tuple(chunk.split(marks.field))
        out[parts if len(parts) == fields else ()] += n
    return out


def parse_squeue(text: str, marks: Marks) -> Jobs:
    """Count jobs, which keeps a scrape of tens of thousands of queued tasks close to the cost of
    squeue itself (see :func:`records`)."""
    by_state: Counter[tuple[str, str, str]] = Counter()
    reasons: Counter[tuple[str, str]] = Counter()
    cpus: Counter[str] = Counter()
    gpus: Counter[str] = Counter()
    lines = bad = 0
    for parts, n in records(text, marks, len(SQUEUE_FIELDS)).items():
        lines += n
        if not parts:
            bad += n
            continue
        state, account, partition, _user, nodes, ncpus, tres, reason = parts
        state = state.strip().lower()
        partition = partition.strip()
        by_state[(state, account, partition)] += n
        if state == "pending":
            reasons[(reason.strip() or "None", partition)] += n
        elif state in ("running", "completing"):
            try:
                cpus[account] += int(ncpus) * n
                gpus[account] += tres_gpus(tres) * int(nodes) * n
            except ValueError:
                bad += n
    return Jobs(dict(by_state), dict(reasons), dict(cpus), dict(gpus), lines, bad)


class Node(NamedTuple):
    name: str
    state: str
    flags: str
    cpus_alloc: int
    cpus_idle: int
    cpus_other: int
    cpus_total: int
    gpus_total: int
    gpus_alloc: int
    partitions: tuple[str, ...]


#: sinfo's state suffixes: * not responding, ~ powered off, # powering up, % powering down,
#: ! pending power down, $ maintenance reservation, @ pending reboot, ^ reboot issued, - planned
_STATE_FLAGS = "*~#%!$@^-"


def split_state(raw: str) -> tuple[str, str]:
    """``idle*`` -> (``idle``, ``*``); ``mixed+drain`` -> (``mixed+drain``, ``""``)."""
    s = raw.strip().lower()
    flags = ""
    while s and s[-1] in _STATE_FLAGS:
        flags = s[-1] + flags
        s = s[:-1]
    return s or "unknown", flags


def parse_sinfo(text: str, marks: Marks) -> tuple[dict[str, Node], int]:
    """Nodes by name (a node listed under several partitions is counted once) and the bad record count."""
    nodes: dict[str, Node] = {}
    bad = 0
    for record, count in records(text, marks, len(SINFO_FIELDS)).items():
        if not record:
            bad += count
            continue
        name, state, cpus, gres, gres_used, partition = (p.strip() for p in record)
        try:
            a, i, o, t = (int(x) for x in cpus.split("/"))
        except ValueError:
            bad += count
            continue
        partition = partition.rstrip("*")
        if name in nodes:
            n = nodes[name]
            if partition and partition not in n.partitions:
                nodes[name] = n._replace(partitions=n.partitions + (partition,))
            continue
        st, flags = split_state(state)
        nodes[name] = Node(
            name,
            st,
            flags,
            a,
            i,
            o,
            t,
            gpu_count(gres),
            gpu_count(gres_used),
            (partition,) if partition else (),
        )
    return nodes, bad


class Sdiag(NamedTuple):
    values: dict[str, float]


#: sdiag line prefix (within a section) -> our key; times there are in microseconds
_SDIAG_TOP = {
    "Server thread count": "server_threads",
    "Agent queue size": "agent_queue_size",
    "Agent count": "agent_count",
    "DBD Agent queue size": "dbd_agent_queue_size",
    "Jobs submitted": "jobs_submitted",
    "Jobs started": "jobs_started",
    "Jobs completed": "jobs_completed",
    "Jobs canceled": "jobs_canceled",
    "Jobs failed": "jobs_failed",
}
_SDIAG_MAIN = {
    "Last cycle": "main_last_cycle_us",
    "Max cycle": "main_max_cycle_us",
    "Total cycles": "main_cycles",
    "Mean cycle": "main_mean_cycle_us",
    "Mean depth cycle": "main_mean_depth",
    "Cycles per minute": "main_cycles_per_minute",
    "Last queue length": "main_last_queue_length",
}
_SDIAG_BACKFILL = {
    "Total backfilled jobs (since last slurm start)": "backfill_jobs_since_start",
    "Total cycles": "backfill_cycles",
    "Last cycle": "backfill_last_cycle_us",
    "Max cycle": "backfill_max_cycle_us",
    "Mean cycle": "backfill_mean_cycle_us",
    "Last depth cycle": "backfill_last_depth",
    "Last queue length": "backfill_last_queue_length",
}


def parse_sdiag(text: str) -> dict[str, float]:
    """The scheduler figures sdiag prints, keyed as in the tables above (absent when not printed)."""
    out: dict[str, float] = {}
    section = _SDIAG_TOP
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Main schedule statistics"):
            section = _SDIAG_MAIN
            continue
        if line.startswith("Backfilling stats"):
            section = _SDIAG_BACKFILL
            continue
        if line.startswith(("Latency for", "Remote Procedure Call", "Pending RPC")):
            section = {}
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        name = section.get(key.strip())
        if name is None:
            continue
        try:
            out[name] = float(value.split()[0]) if value.split() else 0.0
        except ValueError:
            continue
    return out
