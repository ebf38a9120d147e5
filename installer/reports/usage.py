"""GPU-hours, GPU energy and jobs per account and user over a period, from VictoriaMetrics.

Hour by hour, the period is read from the recording rules (roles/vmalert/files/rules/
vigil-accounting.yml) where they cover it, and from the raw series the rules are computed from
(DCGM + ``slurm_job_info``) where they do not — a fresh install, data imported from elsewhere, or
the partial last hour of a period still in progress. Each consecutive run of hours with one source
is one set of queries over the run's window, evaluated at its end:

* recorded: the hourly samples ``account_user:*:…1h`` at ``a+1h … b`` (each covers the hour before
  it), summed by a subquery at a 1h step — the rules' own tiling;
* raw: the rules' expressions over the whole window, minute by minute (a subquery at a 1m step, as
  the rules record them) — GPU-hours as the share of a GPU each job held in each minute, energy as
  each job series' ``increase()`` of DCGM's mJ counter in the minute times that share, joined on
  ``(instance, hpc_job)`` to ``slurm_job_info``.

A GPU's share: a whole GPU is 1, a MIG instance of profile ``Ng.*`` is N/7 (N/4 on an A30), and
the jobs on one GPU or instance in the same minute split it equally (:func:`fraction`, :func:`share`).
Every report also reads the cluster's own figures — each GPU's counter once, and what no one was
charged of it — so that the charges can be checked against them (docs/reports.md, "Conservation").

GPUs without a job (no ``hpc_job``) are charged to no one. Hours without any GPU series are counted
and said, never reported as measured zeros; a period without any is refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vigil.installer.reports.errors import ReportInputError
from vigil.installer.reports.period import HOUR, Period, chunks, hour_runs, iso
from vigil.installer.reports.vm import Labels, VictoriaMetrics

#: how far back from an hourly point its sample may lie. vmalert stores each evaluation at the whole
#: minute it asked for, so the sample of the hour ending at t lies at t. The window is shorter than the
#: rules' 1m interval so that it can never be the minute before: an evaluation not yet written (a
#: loaded host runs the group late in the minute, or after it) or never run (vmalert down) leaves the
#: hour to the raw series, instead of a sample covering (t - 1h - 1m, t - 1m] standing in for it and
#: losing the last minute's energy of every job in it.
LOOKBACK = "30s"
LOOKBACK_S = 30
#: the longest raw window one query reads: the 1m subquery may not exceed VictoriaMetrics' default
#: -search.maxPointsPerTimeseries (30,000 points: 20 days at 1m is 28,800)
RAW_CHUNK = 20 * 24 * HOUR

#: an hour is read from the rules when the group's last rule has its sample at the hour's end:
#: vmalert evaluates a group's rules in order and one writer (-remoteWrite.concurrency, 1 as the role
#: leaves it) sends them in that order, so the samples of the rules before it are stored by then
RECORDED_PROBE = f"count(last_over_time(cluster:gpu_energy_joules:increase1h[{LOOKBACK}]))"
RAW_PROBE = "count(count_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[{w}]))"


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


#: what the prolog's slurm_job_info says of a job that its charges carry (roles/slurm_jobmap)
WHO = "user, account, partition"
#: the labels of every charge: who, in which partition, on which GPU model (dcgm-exporter's modelName)
BY = "account, user, partition, modelName"


def _info(window: str, matcher: str) -> str:
    return f"max by (instance, hpc_job, {WHO}) (last_over_time(slurm_job_info{matcher}[{window}]))"


#: the fields whose presence says a GPU (or a MIG instance) was scraped in a sample: any of them, so
#: that a counters file leaving one out does not leave GPU-hours at 0 beside non-zero energy
PRESENT_FIELDS = ("GPU_TEMP", "POWER_USAGE", "TOTAL_ENERGY_CONSUMPTION", "FB_USED")
_NAMES = '__name__=~"DCGM_FI_DEV_(' + "|".join(PRESENT_FIELDS) + ')"'
PRESENT = "{" + _NAMES + "}"
PRESENT_JOB = "{" + _NAMES + ',hpc_job!=""}'
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
JOB = '{hpc_job!=""}'
#: one GPU entity: a whole GPU (GPU_I_ID empty) or one MIG GPU instance
ENTITY = "instance, gpu, GPU_I_ID"
#: models whose MIG mode has 4 compute slices; every other GPU in MIG mode is taken as 7 (A100, H100)
FOUR_SLICE_MODELS = ".*A30.*"


def _present(extra: str) -> str:
    return "{" + _NAMES + "," + extra + "}"


def _profile(n: int) -> str:
    return 'GPU_I_PROFILE=~"' + str(n) + 'g[.].*"'


def fraction() -> str:
    """Each GPU entity present now, valued at its share of the GPU: ``N / slices`` for a MIG profile
    ``Ng.*`` (``3g.40gb`` on a 7-slice GPU: 3/7; ``1g.10gb+me``: 1/7), 1 for a whole GPU and for a
    profile that does not start with ``Ng.``."""
    mig = " or ".join(f"(count by ({ENTITY}) ({_present(_profile(n))}) * 0 + {n})" for n in range(1, 8))
    four = _present('modelName=~"' + FOUR_SLICE_MODELS + '"')
    slices = f"(count by (instance, gpu) ({four}) * 0 + 4) or (count by (instance, gpu) ({PRESENT}) * 0 + 7)"
    whole = f"count by ({ENTITY}) ({PRESENT}) * 0 + 1"
    return f"(({mig}) / on (instance, gpu) group_left () ({slices})) or ({whole})"


def share(matcher: str, window: str | None = None) -> str:
    """Each job's share of a GPU now, per entity and job, joined to its account and partition: the
    entity's fraction split equally between the jobs on it. It keeps the GPU's ``modelName``.

    ``window`` (energy): a job counts when its energy series had a sample in that window, not only
    now: a job's last minute is charged the energy its own series counted up to its end (its series
    is gone at the minute's end, and an instant share would leave that energy to no one). The split
    is between the jobs on the entity now; where none is there now, the jobs of the minute are taken
    to have run one after the other (each its own series' increase in full): a job ending and the
    next starting on a GPU within a minute, or two short jobs both within it, ran one after the
    other, and splitting between them charged each half of its own energy. Two jobs that shared a GPU
    and both ended within one minute are each charged their part of that minute in full; the
    conservation check measures what that adds."""
    present = f"group by ({ENTITY}, hpc_job, modelName) ({PRESENT_JOB})"
    if window:
        jobs = f"group by ({ENTITY}, hpc_job, modelName) (last_over_time({ENERGY}{JOB}[{window}]))"
        split = f"(count by ({ENTITY}) ({present}) or count by ({ENTITY}) ({jobs}) * 0 + 1)"
    else:
        jobs, split = present, f"count by ({ENTITY}) ({present})"
    return (
        f"{jobs} * on ({ENTITY}) group_left () (({fraction()}) / {split})"
        f" * on (instance, hpc_job) group_left ({WHO}) {_info('1h', matcher)}"
    )


def job_gpus(matcher: str) -> str:
    """GPU-equivalents each job holds now (``job:gpus_allocated:count``), per GPU model."""
    return f"sum by (hpc_job, {WHO}, modelName) (({share(matcher)}))"


def gpus_by(by: str, matcher: str) -> str:
    """GPU-equivalents held now, summed by BY (``account``; :data:`BY` for the reports' breakdowns)."""
    return f"sum by ({by}) (({share(matcher)}))"


#: the field saying whether a GPU (or a MIG instance) was busy: DCGM_FI_PROF_GR_ENGINE_ACTIVE (the
#: ratio of time the graphics engine was active; dcgm-exporter gives it for a whole GPU and for each
#: MIG instance) and, for a GPU without it (no profiling metrics), DCGM_FI_DEV_GPU_UTIL in % (which
#: DCGM leaves blank on MIG instances)
ACTIVE_FIELD = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
ACTIVE_FALLBACK = "DCGM_FI_DEV_GPU_UTIL"
#: a GPU is active in a minute when that ratio is above this (10 %)
ACTIVE_THRESHOLD = 0.1


def busy() -> str:
    """Each GPU entity active now: 1 where its engine was busy above the threshold, absent otherwise."""
    ratio = f"max by ({ENTITY}) ({ACTIVE_FIELD}) or max by ({ENTITY}) ({ACTIVE_FALLBACK}) / 100"
    return f"({ratio}) > {ACTIVE_THRESHOLD:g}"


def active_gpus(matcher: str) -> str:
    """GPU-equivalents each (account, user, partition, model) holds now on GPUs that are busy
    (``account_user:gpus_active:count``): a job's share counts only in the minutes its GPU or
    MIG instance is active."""
    return f"sum by ({BY}) (({share(matcher)}) * on ({ENTITY}) group_left () (({busy()}) * 0 + 1))"


def _job_series_energy(by: str, matcher: str) -> str:
    return (
        f"sum by ({by}) (increase({ENERGY}{JOB}[1m]) / 1000"
        f" * on ({ENTITY}, hpc_job) group_left ({WHO}) ({share(matcher, '1m')}))"
    )


def job_energy_1m(matcher: str) -> str:
    """Joules each job was charged in the last minute: each of its series' own increase (its own
    samples, so a job starting or ending mid-minute gets only its part) times its share."""
    return _job_series_energy(f"hpc_job, {WHO}, modelName", matcher)


def energy_1m_by(by: str, matcher: str) -> str:
    """The same joules of the last minute, summed by BY."""
    return _job_series_energy(by, matcher)


def gpu_energy_1m() -> str:
    """Joules each GPU used in the last minute, from its counter read once however many series repeat
    it (a MIG instance each, a job each): the newest sample of any, minute to minute (a reset: 0)."""
    last = f"max by (instance, gpu) (last_over_time({ENERGY}[5m]"
    return f"(clamp_min({last})) - {last} offset 1m)), 0) / 1000)"


def cluster_energy_1m() -> str:
    return f"sum({gpu_energy_1m()})"


def unallocated_energy_1m() -> str:
    """Joules of each GPU's minute charged to no one (idle GPUs and slices, slices not configured,
    jobs without slurm_job_info); 0 where the jobs were charged more than the GPU used."""
    e = gpu_energy_1m()
    return f"sum(clamp_min({e} - ({_job_series_energy('instance, gpu', '')} or {e} * 0), 0))"


def cluster_gpus() -> str:
    """GPUs scraped now (each once, whole or split into MIG instances)."""
    return f"count(group by (instance, gpu) ({PRESENT}))"


def unallocated_gpus() -> str:
    """The parts of the GPUs scraped now that no job is charged for."""
    held = f"sum by (instance, gpu) (({share('')}))"
    return f"sum(clamp_min(1 - ({held} or group by (instance, gpu) ({PRESENT}) * 0), 0))"


#: an hourly rule's window: 60 points of a 1m subquery, whether the store's range is closed
#: (Prometheus 2.x) or half-open (VictoriaMetrics)
HOUR_WINDOW = "59m30s"


def minutes(expr: str, window: str) -> str:
    """EXPR evaluated once a minute over WINDOW and summed: a subquery at a 1m step, the rules' and the
    reports' tiling of time."""
    return f"sum_over_time(({expr})[{window}:1m])"


def accounting_rules() -> dict[str, str]:
    """The ``vigil_accounting`` group's rules, in order (roles/vmalert/files/rules/vigil-accounting.yml
    must give them as this text: tests/unit/rules/test_recording_rules.py).

    Every rule reads raw series only, never another rule of its group: vmalert writes a rule's result
    asynchronously, so a rule reading one recorded at the same evaluation finds the minute before (or
    nothing), and an hour ending at t would cover (t - 1h - 1m, t - 1m] while the reports join raw
    series to it from t (vmalert's documentation, "Limitations": do not chain recording rules in a
    group). The hourly rules are the reports' raw expressions over :data:`HOUR_WINDOW`."""
    h = HOUR_WINDOW
    return {
        "job:gpus_allocated:count": job_gpus(""),
        "job:gpu_hours:sum1h": f"{minutes(job_gpus(''), h)} / 60",
        "job:gpu_energy_joules:increase1h": minutes(job_energy_1m(""), h),
        "account:gpu_hours:sum1h": f"{minutes(gpus_by('account', ''), h)} / 60",
        "account:gpu_energy_joules:increase1h": minutes(energy_1m_by("account", ""), h),
        "account_user:gpu_hours:sum1h": f"{minutes(gpus_by(BY, ''), h)} / 60",
        "account_user:gpu_energy_joules:increase1h": minutes(energy_1m_by(BY, ""), h),
        "account_user:gpus_active:count": active_gpus(""),
        "account_user:gpu_active_hours:sum1h": f"{minutes(active_gpus(''), h)} / 60",
        "cluster:gpus_scraped:count": cluster_gpus(),
        "cluster:gpus_unallocated:sum": unallocated_gpus(),
        "cluster:gpu_hours:sum1h": f"{minutes(cluster_gpus(), h)} / 60",
        "cluster:gpu_unallocated_hours:sum1h": f"{minutes(unallocated_gpus(), h)} / 60",
        "cluster:gpu_unallocated_energy_joules:increase1h": minutes(unallocated_energy_1m(), h),
        "cluster:gpu_energy_joules:increase1h": minutes(cluster_energy_1m(), h),
    }


def recorded_queries(window: int, matcher: str) -> dict[str, str]:
    """The queries of a run of recorded hours ending at the evaluation time."""

    def hourly(series: str, fn: str = "sum_over_time", match: str = matcher) -> str:
        return f"{fn}(last_over_time({series}{match}[{LOOKBACK}])[{window}s:1h])"

    return {
        "gpu_hours": f"sum by ({BY}) ({hourly('account_user:gpu_hours:sum1h')})",
        "joules": f"sum by ({BY}) ({hourly('account_user:gpu_energy_joules:increase1h')})",
        "active_hours": f"sum by ({BY}) ({hourly('account_user:gpu_active_hours:sum1h')})",
        # a plain window, not the hourly subquery: that one builds a point per hour for every job
        # series, which VictoriaMetrics refuses for a year at cluster scale (benchmarks/report.py).
        # The window starts at the first hourly point's lookback, so every rolling 1h sum read lies
        # inside the run (to the same LOOKBACK as the hourly points).
        "jobs": "group by (account, user, partition, hpc_job) ("
        f"max_over_time(job:gpu_hours:sum1h{matcher}[{window - HOUR + LOOKBACK_S}s]) > 0)",
        "cluster_joules": f"sum({hourly('cluster:gpu_energy_joules:increase1h', match='')})",
        "unallocated_joules": f"sum({hourly('cluster:gpu_unallocated_energy_joules:increase1h', match='')})",
        "cluster_gpu_hours": f"sum({hourly('cluster:gpu_hours:sum1h', match='')})",
        "unallocated_gpu_hours": f"sum({hourly('cluster:gpu_unallocated_hours:sum1h', match='')})",
        "charged_gpu_hours": f"sum({hourly('account_user:gpu_hours:sum1h', match='')})",
        "charged_joules": f"sum({hourly('account_user:gpu_energy_joules:increase1h', match='')})",
    }


def raw_queries(window: int, matcher: str) -> dict[str, str]:
    """The rules' expressions over a window of raw series ending at the evaluation time: each
    minute's figure, summed over the window's minutes (a subquery at a 1m step, as the rules record
    them)."""
    w = f"{window}s"
    info = _info(f"{window + HOUR}s", matcher)
    return {
        "gpu_hours": f"{minutes(gpus_by(BY, matcher), w)} / 60",
        "joules": minutes(energy_1m_by(BY, matcher), w),
        "active_hours": f"{minutes(active_gpus(matcher), w)} / 60",
        "jobs": "group by (account, user, partition, hpc_job) ("
        f"max by (instance, hpc_job) (count_over_time({PRESENT_JOB}[{w}]))"
        f" * on (instance, hpc_job) group_left ({WHO}) {info})",
        "cluster_joules": minutes(cluster_energy_1m(), w),
        "unallocated_joules": minutes(unallocated_energy_1m(), w),
        "cluster_gpu_hours": f"{minutes(cluster_gpus(), w)} / 60",
        "unallocated_gpu_hours": f"{minutes(unallocated_gpus(), w)} / 60",
        "charged_gpu_hours": f"sum({minutes(gpus_by(BY, ''), w)}) / 60",
        "charged_joules": f"sum({minutes(energy_1m_by(BY, ''), w)})",
    }


#: the cluster's figures every report reads, whatever its account filter (the conservation check)
CLUSTER_FIGURES = (
    "cluster_joules",
    "unallocated_joules",
    "charged_joules",
    "cluster_gpu_hours",
    "unallocated_gpu_hours",
    "charged_gpu_hours",
)


#: (account, user, partition, GPU model): the finest breakdown the report reads
Cell = tuple[str, str, str, str]


def _floats() -> dict[Any, float]:
    return defaultdict(float)


@dataclass
class Usage:
    """What :func:`collect` read: per (account, user) sums, the same per partition and GPU model,
    and where the hours came from."""

    period: Period
    gpu_hours: dict[tuple[str, str], float] = field(default_factory=_floats)
    joules: dict[tuple[str, str], float] = field(default_factory=_floats)
    jobs: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    #: GPU-hours on a GPU that was busy (ACTIVE_FIELD above ACTIVE_THRESHOLD), per (account, user)
    active_hours: dict[tuple[str, str], float] = field(default_factory=_floats)
    #: the three figures per (account, user, partition, GPU model)
    cell_hours: dict[Cell, float] = field(default_factory=_floats)
    cell_joules: dict[Cell, float] = field(default_factory=_floats)
    cell_active_hours: dict[Cell, float] = field(default_factory=_floats)
    #: job ids per (account, partition)
    partition_jobs: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    #: every GPU's energy, allocated or not, each GPU's counter once (the energy report's GPU share
    #: of E_IT); what no one was charged of it; and what all accounts were charged (any filter aside)
    cluster_joules: float = 0.0
    unallocated_joules: float = 0.0
    charged_joules: float = 0.0
    #: the same in GPU-hours: GPUs scraped, the parts no job held, what all accounts were charged
    cluster_gpu_hours: float = 0.0
    unallocated_gpu_hours: float = 0.0
    charged_gpu_hours: float = 0.0
    recorded_hours: int = 0
    raw_hours: int = 0
    hours_without_data: int = 0
    #: seconds of a partial last hour, read from raw series (a period in progress)
    raw_tail_s: int = 0
    #: the runs read, as (source, start, end)
    runs: list[tuple[str, int, int]] = field(default_factory=list)

    def merge(self, other: Usage) -> None:
        """Add another period's figures (the periods must not overlap)."""
        for key, value in other.gpu_hours.items():
            self.gpu_hours[key] += value
        for key, value in other.joules.items():
            self.joules[key] += value
        for key, ids in other.jobs.items():
            self.jobs[key] |= ids
        for mine, theirs in (
            (self.active_hours, other.active_hours),
            (self.cell_hours, other.cell_hours),
            (self.cell_joules, other.cell_joules),
            (self.cell_active_hours, other.cell_active_hours),
        ):
            for cell, value in theirs.items():
                mine[cell] += value  # type: ignore[index]
        for pair, ids in other.partition_jobs.items():
            self.partition_jobs[pair] |= ids
        for name in CLUSTER_FIGURES:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.recorded_hours += other.recorded_hours
        self.raw_hours += other.raw_hours
        self.hours_without_data += other.hours_without_data
        self.raw_tail_s += other.raw_tail_s
        self.runs += other.runs

    def pairs(self) -> list[tuple[str, str]]:
        return sorted(set(self.gpu_hours) | set(self.joules) | set(self.jobs))


def _sources(vm: VictoriaMetrics, period: Period) -> tuple[list[tuple[str, int, int]], list[str]]:
    """Each whole hour's source ("recorded", "raw" or "none"), as runs; and the partial tail's."""
    ends = [period.start + (i + 1) * HOUR for i in range(period.hours)]
    flags: list[str] = []
    if ends:
        recorded = {
            t
            for _, points in vm.query_range(RECORDED_PROBE, ends[0], ends[-1], HOUR)
            for t, v in points
            if v > 0
        }
        rest = [t for t in ends if t not in recorded]
        raw: set[int] = set()
        if rest:
            for _, points in vm.query_range(RAW_PROBE.format(w="1h"), rest[0], rest[-1], HOUR):
                raw.update(t for t, v in points if v > 0)
        flags = ["recorded" if t in recorded else "raw" if t in raw else "none" for t in ends]
    runs = hour_runs(ends, flags)
    tail = period.end - period.whole_hours_end
    tail_flags = []
    if tail > 0:
        present = vm.query(RAW_PROBE.format(w=f"{tail}s"), period.end)
        tail_flags.append("raw" if any(v > 0 for _, v in present) else "none")
        runs.append((tail_flags[0], period.whole_hours_end, period.end))
    return runs, flags


def collect(
    vm: VictoriaMetrics,
    period: Period,
    *,
    account: str | None = None,
    jobs: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Usage:
    """Read the period's usage; :class:`ReportInputError` when the period has no GPU data at all."""
    matcher = "{account=" + quote(account) + "}" if account is not None else ""
    runs, flags = _sources(vm, period)
    usage = Usage(period)
    usage.recorded_hours = flags.count("recorded")
    usage.raw_hours = flags.count("raw")
    usage.hours_without_data = flags.count("none")
    if not any(src != "none" for src, _, _ in runs):
        raise ReportInputError(
            f"period {period.label}",
            f"no GPU data in {vm.name} between {iso(period.start)} and {iso(period.end)} "
            "(no recording-rule series and no DCGM series); nothing was stored",
        )
    for source, a, b in runs:
        if source == "none":
            continue
        if source == "raw" and b == period.end and period.end != period.whole_hours_end:
            usage.raw_tail_s = b - a
        pieces = chunks(a, b, RAW_CHUNK) if source == "raw" else [(a, b)]
        for lo, hi in pieces:
            usage.runs.append((source, lo, hi))
            if progress is not None:
                progress(f"{source} series {iso(lo)} .. {iso(hi)}")
            queries = (recorded_queries if source == "recorded" else raw_queries)(hi - lo, matcher)
            _add(usage.gpu_hours, usage.cell_hours, vm.query(queries["gpu_hours"], hi))
            _add(usage.joules, usage.cell_joules, vm.query(queries["joules"], hi))
            _add(usage.active_hours, usage.cell_active_hours, vm.query(queries["active_hours"], hi))
            if jobs:
                for labels, _ in vm.query(queries["jobs"], hi):
                    job = labels.get("hpc_job", "")
                    usage.jobs[_key(labels)].add(job)
                    usage.partition_jobs[(labels.get("account", ""), labels.get("partition", ""))].add(job)
            for name in CLUSTER_FIGURES:
                got = sum(v for _, v in vm.query(queries[name], hi))
                setattr(usage, name, getattr(usage, name) + got)
    return usage


def _key(labels: Labels) -> tuple[str, str]:
    return labels.get("account", ""), labels.get("user", "")


def _cell(labels: Labels) -> Cell:
    return (*_key(labels), labels.get("partition", ""), labels.get("modelName", ""))


def _add(
    into: dict[tuple[str, str], float], cells: dict[Cell, float], result: list[tuple[Labels, float]]
) -> None:
    for labels, value in result:
        into[_key(labels)] += value
        cells[_cell(labels)] += value
