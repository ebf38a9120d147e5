"""Slurm's own accounting, read from ``sacct``, as a second source beside the meters (issue 35).

The reconciliation puts, per account, the GPU-hours Slurm's accounting gives (AllocTRES' GPUs times
the time the allocation held them, cut at the period's edges) beside the GPU-hours the usage report
metered, and lists the jobs whose two figures differ. It reads the output of, on the controller::

    SLURM_TIME_FORMAT=%s sacct --allusers --allocations --parsable2 \\
        --delimiter="$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \\n')" \\
        --starttime S --endtime E \\
        --format=JobIDRaw,Account,User,Partition,AllocTRES,Start,End,State,NodeList

A delimiter made fresh for the run, and the header sacct prints with it, because an account is
whatever a user gave ``sbatch --account`` where associations are not enforced: Slurm takes ``|`` and
a line break in it, so with sacct's default ``|`` an account can hold a whole forged line. With the
header the delimiter is read from the file; one of at least :data:`MIN_FRESH_DELIMITER` characters
cannot be in an account, so every delimiter in the file is sacct's and a line break in an account
only continues its line. Without a header, or with a shorter delimiter, the fields are between
``|`` and a line whose fields are not the nine is refused (docs/security.md).

What the fields hold, from sacct's manual and source (Slurm 25.11):

* ``--allocations``: one line per job allocation, no steps, so ``JobIDRaw`` is the job's number
  (``123``; a step would be ``123.batch``, an array task and a heterogeneous component have their own
  numbers). Without ``--duplicates`` sacct prints each job number once: the most recent run of a
  requeued job.
* ``--parsable2``: fields between ``|`` (or ``--delimiter``'s), none after the last.
* ``Start``, ``End``: with ``SLURM_TIME_FORMAT=%s`` seconds since the epoch; ``Unknown`` for a time
  never set (a pending job's start, a running or pending job's end), ``None`` for the start of a job
  cancelled before it ran. Without ``--truncate`` they are the job's own times, not cut at the window:
  this module cuts them (:func:`gpu_hours`).
* ``AllocTRES``: ``billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1``, blank while pending;
  a GRES configured ``no_consume`` prints 0.
* ``State``: ``COMPLETED``, ``RUNNING``, ``CANCELLED by 1000`` (the uid that cancelled it), …
* ``NodeList``: a Slurm hostlist (``gpu[01-03,07],ctl01``), ``None assigned`` for a job that never ran.

Everything in the file is data: a refusal is one :class:`ReportInputError` naming the file, the line
and the reason; nothing in it is run or looked up. The bounds are at the top of the module and in
docs/security.md ("Slurm's accounting file").
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from vigil.basics.bounded import shown
from vigil.installer.reports.errors import ReportInputError
from vigil.installer.reports.numbers import fixed
from vigil.installer.reports.period import HOUR, iso

#: the fields, in the order the ``--format`` above asks for them
FIELDS = ("JobIDRaw", "Account", "User", "Partition", "AllocTRES", "Start", "End", "State", "NodeList")
#: the shortest delimiter taken as made fresh for the run (24 hex digits in the command above)
MIN_FRESH_DELIMITER = 16
#: the most lines one job's line may continue over (an account holding line breaks)
MAX_CONTINUED_LINES = 16
#: the most bytes read of one sacct output (a year of a large centre is well below it), checked
#: before a byte is decoded
MAX_BYTES = 512 << 20
#: the most lines (jobs) in one output
MAX_LINES = 2_000_000
#: the most characters in one field (Slurm's own limit for an account name is 1024 bytes)
MAX_FIELD_CHARS = 1024
#: the most GPUs one allocation may hold
MAX_GPUS = 100_000
#: the most node names one NodeList may expand to
MAX_HOSTS = 100_000
#: the longest node name (a DNS name's limit)
MAX_NAME_CHARS = 255
#: the most node names, and characters of them, made for one file (a NodeList seen before is not
#: made again): 2,000,000 lines of distinct 100,000-name NodeLists (``r1n[1-100000]``, ``r2n[…]``)
#: would otherwise be 2e11 names from 50 MB; at these bounds about 0.5 GB at most
MAX_FILE_HOSTS = 5_000_000
MAX_FILE_HOST_CHARS = 100_000_000
#: times from 1970-01-01 up to the end of 9999 (the years a report period may have)
MAX_TIME = 253_402_300_800
#: the GPU-hours per GPU of a job that the meters' minute resolution can gain or lose at its two ends
FLOOR_H_PER_GPU = 2 / 60

#: what sacct prints for a time never set (0 or INFINITE: "Unknown"; NO_VAL: "None")
_NO_TIME = frozenset({"Unknown", "None"})
_DIGITS = re.compile(r"[0-9]+")
#: C0 and C1 controls, DEL, and the line and paragraph separators (which split lines elsewhere)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_GPU = "gres/gpu"


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job allocation as Slurm's accounting has it."""

    job: str
    account: str
    user: str
    partition: str
    #: GPUs allocated (AllocTRES ``gres/gpu``, or the sum of its typed entries); 0 when none
    gpus: int
    #: seconds since the epoch; None while the job has not started (or never did)
    start: int | None
    #: seconds since the epoch; None while the job runs (or has not started)
    end: int | None
    #: the state's first word: ``COMPLETED``, ``RUNNING``, ``CANCELLED``, …
    state: str
    nodes: tuple[str, ...]


# -- the hostlist ----------------------------------------------------------------------------------


def _split_names(text: str) -> list[str]:
    """``text`` cut at the commas outside brackets; nested and unbalanced brackets refused."""
    names: list[str] = []
    depth = 0
    begin = 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise ValueError(f"nested brackets at character {i + 1} of {shown(text)}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise ValueError(f"a ] without its [ at character {i + 1} of {shown(text)}")
            depth = 0
        elif ch == "," and not depth:
            names.append(text[begin:i])
            begin = i + 1
    if depth:
        raise ValueError(f"a [ without its ] in {shown(text)}")
    names.append(text[begin:])
    return names


def _ranges(body: str, name: str) -> list[tuple[int, int, int]]:
    """The ``lo-hi`` and single numbers of one bracket group, each with its width (the digits of
    ``lo``, as Slurm pads: ``08-11`` gives 08 … 11)."""
    out: list[tuple[int, int, int]] = []
    for part in body.split(","):
        lo_text, dash, hi_text = part.partition("-")
        if not part or (dash and not hi_text):
            raise ValueError(f"an empty part in the brackets of {shown(name)}")
        if not _DIGITS.fullmatch(lo_text) or not _DIGITS.fullmatch(hi_text or lo_text):
            raise ValueError(f"{shown(part)} in {shown(name)} is not a number or a range of numbers")
        lo, hi = int(lo_text), int(hi_text or lo_text)
        if hi < lo:
            raise ValueError(f"the range {shown(part)} in {shown(name)} runs backwards")
        out.append((lo, hi, len(lo_text)))
    return out


#: one name: its literal texts and, between them, its bracket groups' ranges
_Plan = tuple[list[str], list[list[tuple[int, int, int]]]]


def _plan(text: str) -> tuple[list[_Plan], int, int]:
    """What ``text`` would expand to, without making a name: each name's plan, how many names in
    all, and an upper bound of their characters. Refusals as :func:`expand_hostlist` says."""
    if text in ("None assigned", ""):
        return [], 0, 0
    plans: list[_Plan] = []
    total = chars = 0
    for name in _split_names(text):
        if not name:
            raise ValueError(f"an empty node name in {shown(text)} (two commas, or one at an end)")
        if any(ch.isspace() for ch in name):
            raise ValueError(f"white space in the node name {shown(name)}")
        pieces = re.split(r"\[([^\]]*)\]", name)  # text, group, text, group, …, text
        texts, groups = pieces[0::2], [_ranges(body, name) for body in pieces[1::2]]
        count, longest = 1, sum(map(len, texts))
        for group in groups:
            count *= sum(hi - lo + 1 for lo, hi, _ in group)
            longest += max(max(w, len(str(hi))) for _, hi, w in group)
            if count > MAX_HOSTS:
                break
        if longest > MAX_NAME_CHARS:
            raise ValueError(
                f"the node name {shown(name)} gives names of up to {longest:,} characters "
                f"(the most is {MAX_NAME_CHARS})"
            )
        total += count
        chars += count * longest
        if total > MAX_HOSTS:
            raise ValueError(f"expands to more than {MAX_HOSTS:,} node names; refused")
        plans.append((texts, groups))
    return plans, total, chars


def _expand(plans: list[_Plan]) -> tuple[str, ...]:
    out: list[str] = []
    for texts, groups in plans:
        numbers = [[f"{n:0{w}d}" for lo, hi, w in group for n in range(lo, hi + 1)] for group in groups]
        for combo in itertools.product(*numbers):
            out.append(texts[0] + "".join(num + txt for num, txt in zip(combo, texts[1:], strict=True)))
    return tuple(out)


def expand_hostlist(text: str) -> tuple[str, ...]:
    """The node names of a Slurm hostlist as sacct prints it, in its order.

    ``gpu[01-03,07],ctl01`` is gpu01, gpu02, gpu03, gpu07, ctl01; a number keeps the width of the
    range's first number (``gpu[08-11]``: gpu08 … gpu11; ``node[8-10]``: node8 … node10); text may
    follow the brackets (``n[1-2]-ib``), and several groups in one name give every combination, the
    last group varying fastest (``r[1-2]n[1-2]``: r1n1, r1n2, r2n1, r2n2), as Slurm reads them.
    ``None assigned`` (a job that never ran) and an empty field are no nodes.

    Raises ValueError, saying why, for nested or unbalanced brackets, an empty name or range part, a
    range that runs backwards, a name holding white space, names longer than
    :data:`MAX_NAME_CHARS`, and more than :data:`MAX_HOSTS` names in all (counted before any is
    made: ``n[0-99999999]`` is refused at once)."""
    return _expand(_plan(text)[0])


# -- the file --------------------------------------------------------------------------------------


def _count(text: str, key: str) -> int:
    """A GPU count from AllocTRES: a whole number from 0 to :data:`MAX_GPUS`."""
    if text.startswith("-") and _DIGITS.fullmatch(text[1:]):
        raise ValueError(f"{key}={shown(text)} is negative")
    if not _DIGITS.fullmatch(text):
        raise ValueError(f"{key}={shown(text)} is not a whole number of GPUs")
    n = int(text)
    if n > MAX_GPUS:
        raise ValueError(f"{key}={shown(text)} is more than {MAX_GPUS:,} GPUs")
    return n


def _gpus(tres: str) -> int:
    """GPUs in AllocTRES: ``gres/gpu=N``; where only typed entries (``gres/gpu:a100=2``) are
    printed, their sum; 0 when there is none (a CPU job, a pending one)."""
    if not tres:
        return 0
    total: int | None = None
    typed: dict[str, int] = {}
    for entry in tres.split(","):
        key, eq, value = entry.partition("=")
        if not key or not eq:
            raise ValueError(f"the entry {shown(entry)} is not name=count")
        if key == _GPU:
            if total is not None:
                raise ValueError(f"{_GPU} appears twice")
            total = _count(value, key)
        elif key.startswith(_GPU + ":"):
            if key in typed:
                raise ValueError(f"{shown(key)} appears twice")
            typed[key] = _count(value, key)
    if total is not None:
        return total
    gpus = sum(typed.values())
    if gpus > MAX_GPUS:
        raise ValueError(f"its typed {_GPU} entries add up to more than {MAX_GPUS:,} GPUs")
    return gpus


def _time(text: str, name: str) -> int | None:
    if text in _NO_TIME:
        return None
    if not _DIGITS.fullmatch(text):
        if text.startswith("-") and _DIGITS.fullmatch(text[1:]):
            raise ValueError(f"{name} {shown(text)} is before 1970")
        raise ValueError(
            f"{name} {shown(text)} is not seconds since the epoch (run sacct with SLURM_TIME_FORMAT=%s)"
        )
    value = int(text)
    if value >= MAX_TIME:
        raise ValueError(f"{name} {shown(text)} is after the year 9999")
    return value


def _decode(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = line[exc.start : exc.start + 3]
        if len(bad) == 3 and bad[0] == 0xED and 0xA0 <= bad[1] <= 0xBF:
            code = ((bad[1] & 0x3F) << 6 | (bad[2] & 0x3F)) | 0xD000
            raise ValueError(f"a lone surrogate (U+{code:04X}) at byte {exc.start + 1}; not text") from None
        raise ValueError(f"the byte 0x{line[exc.start]:02x} at byte {exc.start + 1} is not UTF-8") from None


class _Reader:
    """One file's lines into jobs. Repeated text is kept once (an account, a partition, a node name on
    thousands of lines), a NodeList seen before is not expanded again, and the node names made for
    the file are counted against :data:`MAX_FILE_HOSTS` and :data:`MAX_FILE_HOST_CHARS`."""

    def __init__(self) -> None:
        self.strings: dict[str, str] = {}
        self.hostlists: dict[str, tuple[str, ...]] = {}
        self.names = 0
        self.chars = 0

    def text(self, value: str) -> str:
        return self.strings.setdefault(value, value)

    def nodes(self, nodelist: str) -> tuple[str, ...]:
        if (known := self.hostlists.get(nodelist)) is not None:
            return known
        try:
            plans, names, chars = _plan(nodelist)
        except ValueError as exc:
            raise ValueError(f"NodeList: {exc}") from None
        self.names += names
        self.chars += chars
        if self.names > MAX_FILE_HOSTS or self.chars > MAX_FILE_HOST_CHARS:
            raise ValueError(
                f"NodeList: the file's NodeLists expand to more than {MAX_FILE_HOSTS:,} node names "
                f"or {MAX_FILE_HOST_CHARS:,} characters of them; refused"
            )
        nodes = tuple(map(self.text, _expand(plans)))
        self.hostlists[self.text(nodelist)] = nodes
        return nodes

    def job(self, line: str, delimiter: str = "|") -> SlurmJob:
        fields = line.split(delimiter)
        if len(fields) != len(FIELDS):
            raise ValueError(
                f"{len(fields)} fields, not {len(FIELDS)} ({','.join(FIELDS)}, between {shown(delimiter)}; "
                "a | or a line break inside a field moves them: run sacct with a --delimiter of its own "
                "and its header, docs/reports.md)"
            )
        for name, value in zip(FIELDS, fields, strict=True):
            if len(value) > MAX_FIELD_CHARS:
                raise ValueError(
                    f"{name} is {len(value):,} characters long (the most is {MAX_FIELD_CHARS:,})"
                )
            # an account's line breaks are its own where the delimiter is fresh (parse joins them)
            seen = value.replace("\n", "") if name == "Account" and delimiter != "|" else value
            if m := _CONTROL.search(seen):
                raise ValueError(f"{name} holds the control character U+{ord(m.group()):04X}")
        job, account, user, partition, tres, start_text, end_text, state, nodelist = fields
        if not _DIGITS.fullmatch(job):
            raise ValueError(
                f"JobIDRaw {shown(job)} is not a job allocation's number "
                "(a job step? run sacct with --allocations)"
            )
        gpus = _gpus(tres)
        start, end = _time(start_text, "Start"), _time(end_text, "End")
        if start is not None and end is not None and end < start:
            raise ValueError(f"End {end} is before Start {start}")
        words = state.split()
        if not words:
            raise ValueError("State is empty")
        t = self.text
        return SlurmJob(
            job,
            t(account),
            t(user),
            t(partition),
            gpus,
            start,
            end,
            t(words[0].rstrip("+")),
            self.nodes(nodelist),
        )


def _lines(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` one at a time (a last line may lack its newline)."""
    begin = 0
    while begin < len(data):
        end = data.find(b"\n", begin)
        if end < 0:
            end = len(data)
        yield data[begin:end]
        begin = end + 1


def _header_delimiter(line: str) -> str | None:
    """The delimiter of sacct's header line (the field names between it), or None for a line that is
    not the header (a file without one: fields between ``|``)."""
    first = FIELDS[0]
    if not line.startswith(first):
        return None
    at = line.find(FIELDS[1], len(first))
    delimiter = line[len(first) : at] if at > len(first) else ""
    if not delimiter or line != delimiter.join(FIELDS):
        raise ValueError(f"the header is not {','.join(FIELDS)} between one delimiter, in that order")
    if "\n" in delimiter or _CONTROL.search(delimiter):
        raise ValueError("the header's delimiter holds a control character")
    return delimiter


def _records(data: bytes, where: str) -> Iterator[tuple[int, str, str]]:
    """(line number, text, delimiter) of each job's line. With a header whose delimiter is fresh (at
    least MIN_FRESH_DELIMITER characters), a line with fewer fields than FIELDS goes on over the
    next lines (an account holding line breaks), joined by a line break, up to MAX_CONTINUED_LINES."""
    delimiter = "|"
    fresh = False
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(_lines(data), 1):
        try:
            text = _decode(raw)
            if number == 1 and (found := _header_delimiter(text)) is not None:
                delimiter, fresh = found, len(found) >= MIN_FRESH_DELIMITER
                continue
        except ValueError as exc:
            raise ReportInputError(f"{where}: line {number}", str(exc)) from None
        if not fresh:
            yield number, text, delimiter
            continue
        start, text = (pending[0], pending[1] + "\n" + text) if pending is not None else (number, text)
        if text.count(delimiter) < len(FIELDS) - 1:
            if number - start + 1 >= MAX_CONTINUED_LINES:
                raise ReportInputError(
                    f"{where}: line {start}",
                    f"a job's line goes on over more than {MAX_CONTINUED_LINES} lines; refused",
                )
            pending = (start, text)
            continue
        pending = None
        yield start, text, delimiter
    if pending is not None:
        yield pending[0], pending[1], delimiter


def parse(data: bytes, *, where: str) -> list[SlurmJob]:
    """The job allocations in ``data``, sacct's output as the module's docstring asks for it, in the
    file's order. Pending jobs (no start) and jobs without GPUs are kept: the caller filters.

    Refused, in one :class:`ReportInputError` naming ``where``, the line and the reason: more than
    :data:`MAX_BYTES` (before decoding; no line is named), more than :data:`MAX_LINES` lines, a
    byte that is not UTF-8 or a lone surrogate, a control character, a line whose fields are not the
    nine, a field longer than :data:`MAX_FIELD_CHARS`, a JobIDRaw that is not a number or is on an
    earlier line too, a GPU count that is not a whole number from 0 to :data:`MAX_GPUS`, a time that is
    not seconds since the epoch within 1970-9999, an end before the start, a NodeList
    :func:`expand_hostlist` refuses, and NodeLists that make more than :data:`MAX_FILE_HOSTS` names
    (or :data:`MAX_FILE_HOST_CHARS` characters of them) for the file."""
    if len(data) > MAX_BYTES:
        raise ReportInputError(
            where, f"is {len(data):,} bytes, more than {MAX_BYTES >> 20} MiB (the most read of it); refused"
        )
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if data and lines > MAX_LINES:
        raise ReportInputError(
            f"{where}: line {MAX_LINES + 1:,}", f"more than {MAX_LINES:,} lines (jobs); refused"
        )
    reader = _Reader()
    jobs: list[SlurmJob] = []
    seen: dict[str, int] = {}
    for number, text, delimiter in _records(data, where):
        try:
            job = reader.job(text, delimiter)
        except ValueError as exc:
            raise ReportInputError(f"{where}: line {number}", str(exc)) from None
        if job.job in seen:
            raise ReportInputError(
                f"{where}: line {number}",
                f"JobIDRaw {job.job} is on line {seen[job.job]} too (sacct without --duplicates "
                "prints each job once)",
            )
        seen[job.job] = number
        jobs.append(job)
    return jobs


# -- the figures -----------------------------------------------------------------------------------


def gpu_hours(job: SlurmJob, start: int, end: int, now: int) -> float:
    """GPU-hours of ``job`` in ``[start, end)``: its GPUs times the part of ``[job.start, job.end)``
    (``job.end`` is ``now`` while it runs) inside the period, in hours; 0 for a job not started."""
    if job.start is None:
        return 0.0
    held_from = max(job.start, start)
    held_to = min(now if job.end is None else job.end, end)
    if held_to <= held_from:
        return 0.0
    return job.gpus * (held_to - held_from) / HOUR


#: the state given to a job the meters charged that Slurm's accounting does not know
NOT_IN_SLURM = "not in Slurm's accounting"
RUNNING = "job still running"


@dataclass
class JobDifference:
    """A job whose Slurm and metered GPU-hours differ by more than the reconciliation allows."""

    job: str
    account: str
    user: str
    partition: str
    nodes: tuple[str, ...]
    slurm_h: float
    metered_h: float
    state: str
    #: why, where it is known: ``job still running`` is set here, the caller adds what it knows
    #: (exporter down, node down, …)
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "job": self.job,
            "account": self.account,
            "user": self.user,
            "partition": self.partition,
            "nodes": list(self.nodes),
            "state": self.state,
            "slurm_gpu_hours": fixed(self.slurm_h, "gpu_hours"),
            "metered_gpu_hours": fixed(self.metered_h, "gpu_hours"),
            "difference_gpu_hours": fixed(self.metered_h - self.slurm_h, "gpu_hours"),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class AccountFigures:
    """One account's GPU-hours in the period by Slurm's accounting and by the meters."""

    account: str
    slurm_h: float
    metered_h: float
    #: jobs with GPU-hours in the period in either source
    jobs: int

    def to_json(self) -> dict[str, object]:
        return {
            "account": self.account,
            "slurm_gpu_hours": fixed(self.slurm_h, "gpu_hours"),
            "metered_gpu_hours": fixed(self.metered_h, "gpu_hours"),
            "difference_gpu_hours": fixed(self.metered_h - self.slurm_h, "gpu_hours"),
            "jobs": self.jobs,
        }


def job_order(job: str) -> tuple[tuple[int, int, str], ...]:
    """A sort key that puts job ids in numeric order (``9`` before ``10``), text after numbers."""
    return tuple((0, int(p), p) if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", job) if p)


@dataclass
class Reconciliation:
    """Slurm's GPU-hours beside the meters', per account, and the jobs where they differ."""

    period_start: int
    period_end: int
    now: int
    threshold: float
    floor_h: float
    accounts: list[AccountFigures]
    jobs: list[JobDifference]
    #: GPU-hours the meters charged to jobs Slurm's accounting does not know
    not_in_slurm_h: float = 0.0
    #: jobs with GPU-hours in the period in either source
    compared: int = 0

    def to_json(self) -> dict[str, object]:
        """A dict that gives the same canonical JSON for the same figures: accounts by name, jobs by
        number, GPU-hours rounded as the usage report rounds them."""
        accounts = sorted(self.accounts, key=lambda a: a.account)
        jobs = sorted(self.jobs, key=lambda j: (job_order(j.job), j.job))
        slurm = math.fsum(a.slurm_h for a in accounts)
        metered = math.fsum(a.metered_h for a in accounts)
        return {
            "period": {"start": iso(self.period_start), "end": iso(self.period_end)},
            "as_of": iso(self.now),
            "threshold": fixed(self.threshold, "ratio"),
            "floor_gpu_hours_per_gpu": fixed(self.floor_h, "gpu_hours"),
            "accounts": [a.to_json() for a in accounts],
            "totals": {
                "slurm_gpu_hours": fixed(slurm, "gpu_hours"),
                "metered_gpu_hours": fixed(metered, "gpu_hours"),
                "metered_not_in_slurm_gpu_hours": fixed(self.not_in_slurm_h, "gpu_hours"),
                "jobs": self.compared,
                "jobs_differing": len(jobs),
            },
            "jobs": [j.to_json() for j in jobs],
        }


def _differ(slurm_h: float, metered_h: float, threshold: float, floor: float) -> bool:
    return abs(slurm_h - metered_h) > max(threshold * max(slurm_h, metered_h), floor)


def reconcile(
    jobs: Iterable[SlurmJob],
    metered: Mapping[str, float],
    period_start: int,
    period_end: int,
    now: int,
    *,
    threshold: float = 0.05,
    floor_h: float = FLOOR_H_PER_GPU,
) -> Reconciliation:
    """Per account, Slurm's GPU-hours in ``[period_start, period_end)`` (:func:`gpu_hours`, running
    jobs up to ``now``) beside the metered ones (``metered``: GPU-hours per job id, as the usage
    report charged them in the same period), and the jobs whose figures differ.

    Two figures ``s`` (Slurm) and ``m`` (metered) differ when ``|s - m| > max(threshold × max(s, m),
    floor)``. The floor is what the meters' minute resolution can make differ without anything being
    wrong: the accounting counts a job's share of a GPU for each whole minute in which its series had
    a sample, so the minute a job starts in and the minute it ends in may each be counted whole or not
    at all, up to a minute at each end: ``floor = floor_h × the job's GPUs``, with ``floor_h`` two
    minutes (:data:`FLOOR_H_PER_GPU`) by default. Both figures are cut at the period's edges, so a job
    that began before the period or ended after it is not a difference by itself.

    Listed: every Slurm job whose figures differ (one metered 0 included), its state's first word,
    ``reason`` "job still running" when Slurm says RUNNING (else None, for the caller to fill); and
    every job the meters charged that is not in ``jobs``, with Slurm's 0, state
    :data:`NOT_IN_SLURM` and empty account, user and partition (Slurm does not know them). Jobs with
    no GPU-hours in either source are left out. Raises ValueError for a threshold outside 0..1, a
    negative floor, a metered figure that is negative or not finite, or a job listed twice."""
    if not 0 <= threshold <= 1:
        raise ValueError(f"threshold {threshold!r} is not within 0..1")
    if not (math.isfinite(floor_h) and floor_h >= 0):
        raise ValueError(f"floor_h {floor_h!r} is not a number of hours ≥ 0")
    for job_id, hours in metered.items():
        if not (math.isfinite(hours) and hours >= 0):
            raise ValueError(f"metered GPU-hours of job {shown(job_id)} are {hours!r}")
    by_account: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    listed: list[JobDifference] = []
    known: set[str] = set()
    compared = 0
    for job in jobs:
        if job.job in known:
            raise ValueError(f"job {shown(job.job)} is listed twice")
        known.add(job.job)
        s = gpu_hours(job, period_start, period_end, now)
        m = metered.get(job.job, 0.0)
        if s == 0 and m == 0:
            continue
        compared += 1
        sums = by_account.setdefault(job.account, [0.0, 0.0])
        sums[0] += s
        sums[1] += m
        counts[job.account] = counts.get(job.account, 0) + 1
        if _differ(s, m, threshold, floor_h * job.gpus):
            reason = RUNNING if job.state == "RUNNING" else None
            listed.append(
                JobDifference(
                    job.job, job.account, job.user, job.partition, job.nodes, s, m, job.state, reason
                )
            )
    unknown = sorted((j for j, h in metered.items() if j not in known and h > 0), key=job_order)
    for job_id in unknown:
        listed.append(JobDifference(job_id, "", "", "", (), 0.0, metered[job_id], NOT_IN_SLURM))
    accounts = [
        AccountFigures(name, sums[0], sums[1], counts[name]) for name, sums in sorted(by_account.items())
    ]
    return Reconciliation(
        period_start,
        period_end,
        now,
        threshold,
        floor_h,
        accounts,
        sorted(listed, key=lambda j: (job_order(j.job), j.job)),
        not_in_slurm_h=math.fsum(metered[j] for j in unknown),
        compared=compared + len(unknown),
    )


__all__ = [
    "FLOOR_H_PER_GPU",
    "AccountFigures",
    "JobDifference",
    "Reconciliation",
    "SlurmJob",
    "expand_hostlist",
    "gpu_hours",
    "parse",
    "reconcile",
]
