"""GPU-hours, GPU energy and jobs per account and user over a period, from VictoriaMetrics.

Hour by hour, the period is read from the recording rules (roles/vmalert/files/rules/
vigil-accounting.yml) where they cover it, and from the raw series the rules are computed from
(DCGM + ``slurm_job_info``) where they do not — a fresh install, data imported from elsewhere, or
the partial last hour of a period still in progress. Each consecutive run of hours with one source
is one set of queries over the run's window, evaluated at its end:

* recorded: the hourly samples ``account_user:*:…1h`` at ``a+1h … b`` (each covers the hour before
  it), summed by a subquery at a 1h step — the rules' own tiling;
* raw: the rules' expressions over the whole window — GPU-hours as the minutes a job-labelled GPU
  series was present (a subquery at a 1m step, as ``job:gpus_allocated:count`` counts them), energy
  as ``increase()`` of DCGM's mJ counter over the window (counter resets handled by
  VictoriaMetrics; its base is the last sample before the window, so a job crossing a boundary is
  split there), joined on ``(instance, hpc_job)`` to ``slurm_job_info``.

GPUs without a job (no ``hpc_job``) are charged to no one. Hours without any GPU series are counted
and said, never reported as measured zeros; a period without any is refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

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


def _info(window: str, matcher: str) -> str:
    return f"max by (instance, hpc_job, user, account) (last_over_time(slurm_job_info{matcher}[{window}]))"


def recorded_queries(window: int, matcher: str) -> dict[str, str]:
    """The queries of a run of recorded hours ending at the evaluation time."""

    def hourly(series: str, fn: str = "sum_over_time", match: str = matcher) -> str:
        return f"{fn}(last_over_time({series}{match}[{LOOKBACK}])[{window}s:1h])"

    return {
        "gpu_hours": f"sum by (account, user) ({hourly('account_user:gpu_hours:sum1h')})",
        "joules": f"sum by (account, user) ({hourly('account_user:gpu_energy_joules:increase1h')})",
        # a plain window, not the hourly subquery: that one builds a point per hour for every job
        # series, which VictoriaMetrics refuses for a year at cluster scale (benchmarks/report.py).
        # The window starts at the first hourly point's lookback, so every rolling 1h sum read lies
        # inside the run (to the same LOOKBACK as the hourly points).
        "jobs": "group by (account, user, hpc_job) ("
        f"max_over_time(job:gpu_hours:sum1h{matcher}[{window - HOUR + LOOKBACK_S}s]) > 0)",
        "cluster_joules": f"sum({hourly('cluster:gpu_energy_joules:increase1h', match='')})",
    }


def raw_queries(window: int, matcher: str) -> dict[str, str]:
    """The rules' expressions over a window of raw series ending at the evaluation time."""
    w = f"{window}s"
    info = _info(f"{window + HOUR}s", matcher)
    allocated = (
        "count by (hpc_job, user, account) ("
        'max by (instance, gpu, hpc_job) (DCGM_FI_DEV_GPU_TEMP{hpc_job!=""})'
        f" * on (instance, hpc_job) group_left (user, account) {_info('1h', matcher)})"
    )
    energy = 'increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{hpc_job!=""}' + f"[{w}]) / 1000"
    return {
        "gpu_hours": f"sum by (account, user) (sum_over_time(({allocated})[{w}:1m])) / 60",
        "joules": f"sum by (account, user) ({energy} * on (instance, hpc_job) group_left (user, account) "
        f"{info})",
        "jobs": "group by (account, user, hpc_job) ("
        'max by (instance, hpc_job) (count_over_time(DCGM_FI_DEV_GPU_TEMP{hpc_job!=""}' + f"[{w}]))"
        f" * on (instance, hpc_job) group_left (user, account) {info})",
        "cluster_joules": f"sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[{w}])) / 1000",
    }


@dataclass
class Usage:
    """What :func:`collect` read: per (account, user) sums, and where the hours came from."""

    period: Period
    gpu_hours: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    joules: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    jobs: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    #: every GPU's energy, allocated or not (the energy report's GPU share of E_IT)
    cluster_joules: float = 0.0
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
        self.cluster_joules += other.cluster_joules
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
            _add(usage.gpu_hours, vm.query(queries["gpu_hours"], hi))
            _add(usage.joules, vm.query(queries["joules"], hi))
            if jobs:
                for labels, _ in vm.query(queries["jobs"], hi):
                    usage.jobs[_key(labels)].add(labels.get("hpc_job", ""))
            if account is None:
                usage.cluster_joules += sum(v for _, v in vm.query(queries["cluster_joules"], hi))
    return usage


def _key(labels: Labels) -> tuple[str, str]:
    return labels.get("account", ""), labels.get("user", "")


def _add(into: dict[tuple[str, str], float], result: list[tuple[Labels, float]]) -> None:
    for labels, value in result:
        into[_key(labels)] += value
