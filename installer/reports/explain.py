"""`vigil explain`: one job, or one GPU, told from what VictoriaMetrics holds (docs/incidents.md).

The question it answers is the one of a job killed at 02:42: which GPU failed, on which node, for
which user and account; was that GPU already degrading; how many GPU-hours were lost. Every piece is
a series the stack already keeps:

* the job: the prolog's ``slurm_job_info`` (user, account, partition, node) and the DCGM series that
  carry its ``hpc_job`` (which GPUs, from when to when); Slurm's state where its accounting is given
  (``--sacct FILE``, the file the usage report reads);
* each of its GPUs during the job, on the job's own series: energy, peak temperature, single- and
  double-bit ECC errors, row-remap failure, NVLink CRC errors, the XIDs that appeared (with
  :mod:`vigil.installer.reports.xid`'s meaning), the clock throttle reasons seen, and the alerts that
  fired on it or its node (vmalert's ``ALERTS`` series);
* before the job, on the GPU's own series whatever ran on it: the single-bit ECC trend over the
  7 days before and during the job, earlier XIDs, and earlier jobs on that GPU whose own series saw
  a GPU error;
* a verdict per GPU that had anything, and the runbook to follow.

The queries are aggregated per GPU in VictoriaMetrics, about twenty whatever the job's size. What
VictoriaMetrics answers is data: it is returned as values, never evaluated; the front ends show it as
plain text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vigil.installer.reports.errors import ReportInputError
from vigil.installer.reports.period import iso
from vigil.installer.reports.sacct import SlurmJob
from vigil.installer.reports.usage import PRESENT_FIELDS, quote
from vigil.installer.reports.vm import Labels, VictoriaMetrics
from vigil.installer.reports.xid import GPU_FAULT, describe

#: one GPU entity: a whole GPU, or one MIG GPU instance
GPU = ("instance", "gpu", "GPU_I_ID")
_GPU = ", ".join(GPU)
#: what names a GPU beyond its entity
DETAIL = ("UUID", "modelName", "GPU_I_PROFILE")
_PRESENT = '__name__=~"DCGM_FI_DEV_(' + "|".join(PRESENT_FIELDS) + ')"'
#: how far back a job is looked for
DEFAULT_LOOKBACK_DAYS = 30
#: how far before the job its GPUs' history is read
BEFORE_DAYS = 7
#: the most points a range query asks for
POINTS = 600
#: Slurm states of a job that ended in failure (sacct's State, first word)
FAILED_STATES = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY"})
#: a job whose GPU series end this soon after a GPU fault on it ended with that fault
ENDED_WITH_FAULT_S = 600
#: how long after a job's last sample its GPUs' errors still count as the job's: the failure that
#: ends a job is scraped after it, on series that no longer carry the job (a job that takes the GPU
#: in the meantime stops it sooner: its series are not read)
AFTER_END_S = 300
#: NVML's clock throttle reasons, bit by bit (nvmlClocksEventReasons / ThrottleReasons)
THROTTLE_BITS = (
    (0x1, "GPU idle"),
    (0x2, "application clocks setting"),
    (0x4, "software power cap"),
    (0x8, "hardware slowdown"),
    (0x10, "sync boost"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "hardware power brake"),
    (0x100, "display clock setting"),
)
#: the throttle reasons that are a fault, not the GPU's normal control of its clocks
THROTTLE_FAULTS = frozenset({"hardware slowdown", "hardware thermal slowdown", "hardware power brake"})


class ExplainError(ReportInputError):
    """What was asked cannot be answered from the store (a job it never saw, a GPU name)."""


def _key(labels: Labels) -> tuple[str, str, str]:
    return (labels.get("instance", ""), labels.get("gpu", ""), labels.get("GPU_I_ID", ""))


def _name(key: tuple[str, str, str]) -> str:
    instance, gpu, gi = key
    return f"GPU {gpu}{f' (MIG instance {gi})' if gi else ''} on {instance}"


@dataclass
class GpuFacts:
    instance: str
    gpu: str
    gpu_instance: str
    uuid: str = ""
    model: str = ""
    profile: str = ""
    first: float = 0.0
    last: float = 0.0
    energy_kwh: float | None = None
    peak_temp_c: float | None = None
    sbe: int = 0
    dbe: int = 0
    dbe_at: float | None = None
    row_remap_failure: bool = False
    nvlink_crc: int = 0
    xids: list[dict[str, Any]] = field(default_factory=list)
    throttle: list[str] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    sbe_before: int = 0
    sbe_by_day: list[int] = field(default_factory=list)
    sbe_rising_since: float | None = None
    sbe_growing: bool = False
    earlier_xids: list[dict[str, Any]] = field(default_factory=list)
    earlier_jobs_hit: list[str] = field(default_factory=list)
    verdict: str = ""
    runbook: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.instance, self.gpu, self.gpu_instance)

    def first_fault(self) -> float | None:
        times = [x["at"] for x in self.xids if x["kind"] in GPU_FAULT]
        times += [self.dbe_at] if self.dbe_at is not None else []
        return min(times) if times else None

    def doc(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "gpu": self.gpu,
            "gpu_instance": self.gpu_instance or None,
            "profile": self.profile or None,
            "uuid": self.uuid,
            "model": self.model,
            "first": iso(int(self.first)),
            "last": iso(int(self.last)),
            "device_hours": round((self.last - self.first) / 3600, 4),
            "energy_kwh": None if self.energy_kwh is None else round(self.energy_kwh, 6),
            "peak_temperature_c": self.peak_temp_c,
            "ecc_single_bit": self.sbe,
            "ecc_double_bit": self.dbe,
            "ecc_double_bit_first": None if self.dbe_at is None else iso(int(self.dbe_at)),
            "row_remap_failure": self.row_remap_failure,
            "nvlink_crc_errors": self.nvlink_crc,
            "xids": [{**x, "at": iso(int(x["at"]))} for x in self.xids],
            "throttle_reasons": self.throttle,
            "alerts": [{**a, "first_fired": iso(int(a["first_fired"]))} for a in self.alerts],
            "before": {
                "days": BEFORE_DAYS,
                "ecc_single_bit": self.sbe_before,
                "ecc_single_bit_by_day": self.sbe_by_day,
                "ecc_single_bit_since": None
                if self.sbe_rising_since is None
                else iso(int(self.sbe_rising_since)),
                "ecc_single_bit_growing": self.sbe_growing,
                "xids": [{**x, "at": iso(int(x["at"]))} for x in self.earlier_xids],
                "earlier_jobs_hit_by_gpu_errors": self.earlier_jobs_hit,
            },
            "verdict": self.verdict or None,
            "runbook": self.runbook or None,
        }


class _Reader:
    """The queries, each aggregated per GPU, against one VictoriaMetrics."""

    def __init__(self, vm: VictoriaMetrics) -> None:
        self.vm = vm

    def per_gpu(self, expr: str, at: float) -> dict[tuple[str, str, str], tuple[Labels, float]]:
        return {_key(labels): (labels, value) for labels, value in self.vm.query(expr, int(math.ceil(at)))}

    def range(self, expr: str, start: float, end: float) -> list[tuple[Labels, list[tuple[int, float]]]]:
        start_i, end_i = int(start), int(math.ceil(end))
        step = max(15, math.ceil((end_i - start_i) / POINTS))
        return self.vm.query_range(expr, start_i, end_i, step)


def _window(seconds: float) -> str:
    return f"{max(60, int(math.ceil(seconds)))}s"


def _increase(metric: str, sel: str, window: str) -> str:
    series = f"{metric}{{{sel}}}[{window}]"
    return f"max by ({_GPU}) (max_over_time({series}) - min_over_time({series}))"


def _changes(points: list[tuple[int, float]]) -> list[tuple[int, int]]:
    """(time, new value) of each change of a sticky field to a non-zero value; the first point is the
    value before the window, not a change."""
    out = []
    for (_, before), (t, value) in zip(points, points[1:], strict=False):
        if value != before and value > 0 and math.isfinite(value):
            out.append((t, int(value)))
    return out


def _rise(points: list[tuple[int, float]]) -> tuple[int, float | None, bool]:
    """A counter's increase over its points (resets skipped), when it first rose, and whether its
    increase grew: the last third of the rising span counts more than its first third."""
    total, since = 0.0, None
    steps: list[tuple[int, float]] = []
    for (_, a), (t, b) in zip(points, points[1:], strict=False):
        step = b - a if b >= a else 0.0
        if step > 0 and since is None:
            since = float(t)
        total += step
        steps.append((t, step))
    if since is None:
        return 0, None, False
    span = [s for t, s in steps if t >= since]
    third = max(1, len(span) // 3)
    return int(total), since, sum(span[-third:]) > sum(span[:third]) and len(span) >= 3


def _joined(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Two runs of points of one series, in time order, each time once."""
    return sorted(dict(a + b).items())


def _throttle(values: Iterable[float]) -> list[str]:
    seen = 0
    for v in values:
        if math.isfinite(v) and v >= 0:
            seen |= int(v)
    return [name for bit, name in THROTTLE_BITS if seen & bit]


def find_job(vm: VictoriaMetrics, job: str, now: float, lookback_days: int) -> dict[str, GpuFacts]:
    """The GPUs whose DCGM series carried ``hpc_job`` ``job`` in the lookback, with their first and
    last sample; ExplainError when there are none."""
    gpus = _seen(vm, f"{_PRESENT},hpc_job={quote(job)}", f"{lookback_days}d", now)
    if not gpus:
        raise ExplainError(f"job {job}", f"no GPU sample carries it in the last {lookback_days} days")
    return {":".join(g.key): g for g in gpus}


def _seen(vm: VictoriaMetrics, sel: str, window: str, now: float) -> list[GpuFacts]:
    """Each GPU entity with a series matching SEL in the window: its names, first and last sample."""
    by = f"{_GPU}, {', '.join(DETAIL)}"
    first = vm.query(f"min by ({by}) (tfirst_over_time({{{sel}}}[{window}]))", int(now))
    last = _Reader(vm).per_gpu(f"max by ({_GPU}) (tlast_over_time({{{sel}}}[{window}]))", now)
    return [
        GpuFacts(
            instance=key[0],
            gpu=key[1],
            gpu_instance=key[2],
            uuid=labels.get("UUID", ""),
            model=labels.get("modelName", ""),
            profile=labels.get("GPU_I_PROFILE", ""),
            first=value,
            last=last[key][1],
        )
        for labels, value in first
        if (key := _key(labels)) in last
    ]


def _during(r: _Reader, job: str, gpus: Sequence[GpuFacts], first: float, last: float, now: float) -> None:
    sel = f"hpc_job={quote(job)}"
    window = _window(last - first + 60)
    at = last + 1
    wanted = {g.key: g for g in gpus}

    def each(expr: str) -> Iterable[tuple[GpuFacts, float]]:
        for key, (_, value) in r.per_gpu(expr, at).items():
            if key in wanted:
                yield wanted[key], value

    for g, v in each(_increase("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", sel, window)):
        g.energy_kwh = v / 1000 / 3.6e6
    for g, v in each(f"max by ({_GPU}) (max_over_time(DCGM_FI_DEV_GPU_TEMP{{{sel}}}[{window}]))"):
        g.peak_temp_c = v
    for g, v in each(_increase("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", sel, window)):
        g.sbe = int(v)
    for name in (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    ):
        for g, v in each(_increase(name, sel, window)):
            g.nvlink_crc += int(v)
    # The failure that ends a job shows at its GPUs' next scrapes, which no longer carry the job (its
    # epilog removed the job map as the program died): the errors are read on the job's series and on
    # the same GPUs' series without a job up to AFTER_END_S after its last sample. A job that took a
    # GPU meanwhile has series of its own, which are not read.
    nodes = "|".join(_regex_quote(n) for n in sorted({g.instance for g in gpus}))
    ids = "|".join(_regex_quote(g.gpu) for g in gpus)
    events = f"instance=~{quote(nodes)},gpu=~{quote(ids)},hpc_job=~{quote(_regex_quote(job) + '|')}"
    end = max(last, min(now, last + AFTER_END_S))
    # sticky fields read as points: the XID that appeared, when; the throttle reasons seen
    _xids(r, events, wanted, first, end)
    for labels, points in r.range(f"max by ({_GPU}) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{events}}})", first, end):
        found = wanted.get(_key(labels))
        if found is not None:
            found.dbe, found.dbe_at, _ = _rise(points)
    for labels, points in r.range(f"max by ({_GPU}) (DCGM_FI_DEV_ROW_REMAP_FAILURE{{{events}}})", first, end):
        found = wanted.get(_key(labels))
        if found is not None:
            found.row_remap_failure = any(v > 0 for _, v in points)
    for labels, points in r.range(
        f"max by ({_GPU}) (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{sel}}})", first, last
    ):
        found = wanted.get(_key(labels))
        if found is not None:
            found.throttle = _throttle(v for _, v in points)
    # the alerts that fired on these GPUs (or their nodes) from the job's start to a while after its
    # end (an alert fires its `for:` after its cause)
    _alerts(r, gpus, first, min(now, last + 900))


def _alerts(r: _Reader, gpus: Sequence[GpuFacts], start: float, end: float) -> None:
    """vmalert's ALERTS that fired from START to END on these GPUs, or on their nodes (no ``gpu``)."""
    nodes = sorted({g.instance for g in gpus})
    node_re = "|".join(_regex_quote(n) for n in nodes)
    alert_window = _window(end - start)
    match = f'alertstate="firing",instance=~{quote(node_re)}'
    by = "alertname, severity, instance, gpu"
    fired = r.vm.query(f"min by ({by}) (tfirst_over_time(ALERTS{{{match}}}[{alert_window}]))", int(end))
    for labels, fired_at in fired:
        for g in gpus:
            if labels.get("instance") == g.instance and labels.get("gpu", g.gpu) == g.gpu:
                g.alerts.append(
                    {
                        "alert": labels.get("alertname", ""),
                        "severity": labels.get("severity", ""),
                        "first_fired": fired_at,
                        "runbook": f"docs/runbooks/{labels.get('alertname', '')}.md",
                    }
                )
    for g in gpus:
        g.alerts.sort(key=lambda a: (a["severity"], a["first_fired"], a["alert"]))


def _xids(
    r: _Reader, sel: str, wanted: dict[tuple[str, str, str], GpuFacts], start: float, end: float
) -> None:
    """The XIDs that appeared on the series SEL selects from START to END, each with its meaning."""
    for labels, points in r.range(f"max by ({_GPU}) (DCGM_FI_DEV_XID_ERRORS{{{sel}}})", start, end):
        found = wanted.get(_key(labels))
        if found is not None:
            for t, code in _changes(points):
                x = describe(code)
                found.xids.append(
                    {"code": code, "at": t, "meaning": x.meaning, "kind": x.kind, "source": x.source}
                )


def _regex_quote(text: str) -> str:
    return "".join("\\" + c if c in ".^$*+?()[]{}|\\" else c for c in text)


def _before(r: _Reader, job: str, gpus: Sequence[GpuFacts], first: float, last: float) -> None:
    """The same GPUs' own series (whatever ran on them) in the days before the job, and during it."""
    start = first - BEFORE_DAYS * 86400
    nodes = "|".join(_regex_quote(n) for n in sorted({g.instance for g in gpus}))
    ids = "|".join(_regex_quote(g) for g in sorted({g.gpu for g in gpus}))
    sel = f"instance=~{quote(nodes)},gpu=~{quote(ids)}"
    wanted = {g.key: g for g in gpus}
    sbe = f"max by ({_GPU}) (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{sel}}})"
    before: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for labels, points in r.range(sbe, start, first):
        g = wanted.get(_key(labels))
        if g is None:
            continue
        before[g.key] = points
        g.sbe_before, since, _ = _rise(points)
        g.sbe_by_day = []
        for day in range(BEFORE_DAYS):
            lo, hi = start + day * 86400, start + (day + 1) * 86400
            g.sbe_by_day.append(_rise([p for p in points if lo <= p[0] <= hi])[0])
        g.sbe_rising_since = since
    for labels, points in r.range(sbe, first, last):
        g = wanted.get(_key(labels))
        if g is None:
            continue
        # the trend over the days before and the job together: growing when the last third of the
        # rising span counts more than its first third
        _, since, g.sbe_growing = _rise(points if g.sbe_before == 0 else _joined(before[g.key], points))
        if g.sbe_rising_since is None:
            g.sbe_rising_since = since
    xid = f"max by ({_GPU}) (DCGM_FI_DEV_XID_ERRORS{{{sel}}})"
    for labels, points in r.range(xid, start, first):
        g = wanted.get(_key(labels))
        if g is not None:
            for t, code in _changes(points):
                x = describe(code)
                g.earlier_xids.append({"code": code, "at": t, "meaning": x.meaning, "kind": x.kind})
    # earlier jobs on these GPUs whose own series saw a double-bit error or an XID appear
    other = f'{sel},hpc_job!="",hpc_job!={quote(job)}'
    window = f"{BEFORE_DAYS}d"
    for metric in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS"):
        expr = (
            f"max by ({_GPU}, hpc_job) (max_over_time({metric}{{{other}}}[{window}])"
            f" - min_over_time({metric}{{{other}}}[{window}])) > 0"
        )
        for labels, _ in r.vm.query(expr, int(first)):
            g = wanted.get(_key(labels))
            job_id = labels.get("hpc_job", "")
            if g is not None and job_id and job_id not in g.earlier_jobs_hit:
                g.earlier_jobs_hit.append(job_id)
    for g in gpus:
        g.earlier_jobs_hit.sort(key=lambda j: (len(j), j))


def _clock(t: float) -> str:
    return iso(int(t)).replace("T", " ").removesuffix("Z") + " UTC"


def _verdict(g: GpuFacts, window_words: str | None = None) -> None:
    """The GPU's verdict and runbook; ``window_words`` ("in the last 7 days") for a GPU's own history
    rather than a job's."""
    said: list[str] = []
    runbook = ""
    faults = [x for x in g.xids if x["kind"] in GPU_FAULT]
    if g.dbe:
        when = f" from {_clock(g.dbe_at)}" if g.dbe_at is not None else ""
        said.append(f"{g.dbe} uncorrectable (double-bit) ECC error{'s' if g.dbe > 1 else ''}{when}")
        runbook = "docs/runbooks/GpuEccDoubleBitError.md"
    if g.row_remap_failure:
        said.append("a memory row it could not remap")
        runbook = "docs/runbooks/GpuRowRemapFailure.md"
    for x in faults:
        said.append(f"XID {x['code']} at {_clock(x['at'])} ({x['meaning']})")
        runbook = runbook or "docs/runbooks/GpuXidHardwareError.md"
    if g.sbe_rising_since is not None and (g.sbe or g.sbe_before):
        how = "rising" if g.sbe_growing else "counted"
        counts = (
            f"{g.sbe} {window_words}"
            if window_words
            else f"{g.sbe_before} in the {BEFORE_DAYS} days before the job, {g.sbe} during it"
        )
        said.append(f"single-bit ECC errors {how} since {_clock(g.sbe_rising_since)} ({counts})")
        runbook = runbook or "docs/runbooks/GpuEccSingleBitRateHigh.md"
    hot = [t for t in g.throttle if t in THROTTLE_FAULTS]
    if hot:
        said.append("clocks cut by " + ", ".join(hot))
        runbook = runbook or "docs/runbooks/GpuClocksThrottled.md"
    if g.earlier_jobs_hit:
        n = len(g.earlier_jobs_hit)
        when = window_words or f"in the {BEFORE_DAYS} days before"
        said.append(
            f"{n} {'' if window_words else 'earlier '}job{'s' if n > 1 else ''} hit by GPU errors on it "
            f"{when} "
            f"({', '.join(g.earlier_jobs_hit[:5])}{', …' if n > 5 else ''})"
        )
    earlier_faults = [x for x in g.earlier_xids if x["kind"] in GPU_FAULT]
    if earlier_faults:
        said.append(
            "earlier XID " + ", ".join(f"{x['code']} at {_clock(x['at'])}" for x in earlier_faults[:3])
        )
    if not said:
        return
    g.verdict = f"{_name(g.key)}: " + "; ".join(said)
    if g.dbe or g.row_remap_failure or faults:
        g.runbook = (
            f"{_name(g.key)}: drain {g.instance} (scontrol update nodename={g.instance} state=drain "
            f'reason="GPU {g.gpu}"), reset GPU {g.gpu} once it is idle (nvidia-smi -r -i {g.gpu}), and open '
            f"a hardware case if the error recurs or a row could not be remapped: {runbook}"
        )
    elif hot:
        g.runbook = f"{_name(g.key)}: check {g.instance}'s power and cooling (its BMC, the PDU): {runbook}"
    elif runbook:
        g.runbook = f"{_name(g.key)}: watch it; drain {g.instance} at the next chance if it keeps rising: "
        g.runbook += runbook
    else:
        g.runbook = f"{_name(g.key)}: read its history (vigil explain on the earlier jobs named)"


def explain_job(
    vm: VictoriaMetrics,
    job: str,
    *,
    now: float,
    lookback_days: int = DEFAULT_LOOKBACK_DAYS,
    slurm: Sequence[SlurmJob] = (),
) -> dict[str, Any]:
    """The job's document (``kind: job``): who, where, when, its GPUs during and before it, the
    GPU-hours lost if it failed, and the verdicts."""
    if not job or len(job) > 64 or not all(c.isalnum() or c in "._-" for c in job):
        raise ExplainError(f"job {job[:64]!r}", "not a Slurm job id (digits, letters, . _ -)")
    r = _Reader(vm)
    by_key = find_job(vm, job, now, lookback_days)
    gpus = sorted(by_key.values(), key=lambda g: (g.instance, _num(g.gpu), _num(g.gpu_instance)))
    first, last = min(g.first for g in gpus), max(g.last for g in gpus)
    info = r.vm.query(
        f"max by (instance, user, account, partition, node) "
        f"(last_over_time(slurm_job_info{{hpc_job={quote(job)}}}[{lookback_days}d]))",
        int(now),
    )
    _during(r, job, gpus, first, last, now)
    _before(r, job, gpus, first, last)
    for g in gpus:
        _verdict(g)
    who = {
        k: sorted({labels.get(k, "") for labels, _ in info} - {""}) for k in ("user", "account", "partition")
    }
    nodes = sorted({g.instance for g in gpus} | {labels.get("node", "") for labels, _ in info} - {""})
    device_hours = sum((g.last - g.first) / 3600 for g in gpus)
    whole = {(g.instance, g.gpu): g.energy_kwh for g in gpus if g.energy_kwh is not None}
    slurm_job = next((s for s in slurm if s.job == job), None)
    state, failed, basis = _state(slurm_job, gpus, last, now)
    return {
        "kind": "job",
        "job": job,
        "user": who["user"],
        "account": who["account"],
        "partition": who["partition"],
        "nodes": nodes,
        "first_sample": iso(int(first)),
        "last_sample": iso(int(last)),
        "running": now - last < 120,
        "slurm": None
        if slurm_job is None
        else {
            "state": slurm_job.state,
            "start": None if slurm_job.start is None else iso(slurm_job.start),
            "end": None if slurm_job.end is None else iso(slurm_job.end),
            "gpus": slurm_job.gpus,
        },
        "state": state,
        "device_hours": round(device_hours, 4),
        "gpu_energy_kwh": round(sum(whole.values()), 6),
        "failed": failed,
        "failed_because": basis,
        "gpu_hours_lost": round(device_hours, 4) if failed else 0.0,
        "gpus": [g.doc() for g in gpus],
        "verdicts": [g.verdict for g in gpus if g.verdict],
        "runbooks": [g.runbook for g in gpus if g.runbook],
        "source": {
            "victoriametrics": vm.source,
            "lookback_days": lookback_days,
            "before_days": BEFORE_DAYS,
            "device_hours": "each GPU or MIG instance from its first to its last sample carrying the job",
        },
    }


def _num(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


def _state(
    slurm_job: SlurmJob | None, gpus: Sequence[GpuFacts], last: float, now: float
) -> tuple[str, bool, str | None]:
    """(the job's state, whether it failed, why that is said)."""
    if slurm_job is not None:
        failed = slurm_job.state in FAILED_STATES
        return slurm_job.state, failed, f"Slurm's accounting: {slurm_job.state}" if failed else None
    faults = [t for g in gpus for t in [g.first_fault()] if t is not None]
    if now - last < 120:
        return "RUNNING (its GPUs still report it; Slurm's accounting not given)", False, None
    if faults and last - min(faults) <= ENDED_WITH_FAULT_S:
        return (
            "ENDED with a GPU fault (Slurm's accounting not given)",
            True,
            f"its GPUs' series ended {int(last - min(faults))} s after the first GPU fault on them",
        )
    return "ENDED (Slurm's accounting not given)", False, None


#: the most jobs a GPU's history lists (the newest first)
MAX_JOBS = 50


def _ident(text: str, what: str) -> str:
    if not text or len(text) > 64 or not all(c.isalnum() or c in "._-" for c in text):
        raise ExplainError(f"GPU {text[:64]!r}", f"not a {what} (letters, digits, . _ -)")
    return text


def explain_gpu(vm: VictoriaMetrics, target: str, *, now: float, days: int = BEFORE_DAYS) -> dict[str, Any]:
    """GPU ``NODE:INDEX``'s history over the last ``days`` (``kind: gpu``): the jobs that ran on it
    with their users and accounts, its errors (XIDs, ECC, row remapping) on its own series whatever
    ran, the alerts that fired on it or its node, and a verdict."""
    node, sep, index = target.partition(":")
    if not sep:
        raise ExplainError(f"GPU {target[:64]!r}", "give it as NODE:INDEX (gpu01:3)")
    node, index = _ident(node, "node name"), _ident(index, "GPU index")
    r = _Reader(vm)
    sel = f"instance={quote(node)},gpu={quote(index)}"
    window = f"{days}d"
    start = now - days * 86400
    gpus = _seen(vm, f"{_PRESENT},{sel}", window, now)
    if not gpus:
        raise ExplainError(f"GPU {node}:{index}", f"no sample of it in the last {days} days")
    gpus.sort(key=lambda g: _num(g.gpu_instance))
    wanted = {g.key: g for g in gpus}
    for metric in ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"):
        for labels, points in r.range(f"max by ({_GPU}) ({metric}{{{sel}}})", start, now):
            g = wanted.get(_key(labels))
            if g is None:
                continue
            total, since, growing = _rise(points)
            if "SBE" in metric:
                g.sbe, g.sbe_rising_since, g.sbe_growing = total, since, growing
            else:
                g.dbe, g.dbe_at = total, since
    _xids(r, sel, wanted, start, now)
    for key, (_, value) in r.per_gpu(
        f"max by ({_GPU}) (max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE{{{sel}}}[{window}]))", now
    ).items():
        if key in wanted:
            wanted[key].row_remap_failure = value > 0
    for labels, points in r.range(
        f"max by ({_GPU}) (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{sel}}})", start, now
    ):
        g = wanted.get(_key(labels))
        if g is not None:
            g.throttle = _throttle(v for _, v in points)
    _alerts(r, gpus, start, now)
    # the jobs on it, and those whose own series saw a double-bit error or an XID appear
    job_sel = f'{_PRESENT},{sel},hpc_job!=""'
    began = vm.query(f"min by (hpc_job) (tfirst_over_time({{{job_sel}}}[{window}]))", int(now))
    ended = {
        j.get("hpc_job", ""): t
        for j, t in vm.query(f"max by (hpc_job) (tlast_over_time({{{job_sel}}}[{window}]))", int(now))
    }
    info = f"slurm_job_info{{instance={quote(node)}}}[{window}]"
    who = {
        labels.get("hpc_job", ""): labels
        for labels, _ in vm.query(f"max by (hpc_job, user, account) (last_over_time({info}))", int(now))
    }
    for metric in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS"):
        series = f'{metric}{{{sel},hpc_job!=""}}[{window}]'
        expr = f"max by ({_GPU}, hpc_job) (max_over_time({series}) - min_over_time({series})) > 0"
        for labels, _ in vm.query(expr, int(now)):
            g = wanted.get(_key(labels))
            job_id = labels.get("hpc_job", "")
            if g is not None and job_id and job_id not in g.earlier_jobs_hit:
                g.earlier_jobs_hit.append(job_id)
    words = f"in the last {days} days"
    for g in gpus:
        g.earlier_jobs_hit.sort(key=lambda j: (len(j), j))
        _verdict(g, words)
    jobs = sorted(
        (
            {
                "job": labels.get("hpc_job", ""),
                "user": who.get(labels.get("hpc_job", ""), {}).get("user"),
                "account": who.get(labels.get("hpc_job", ""), {}).get("account"),
                "first": iso(int(t)),
                "last": iso(int(ended.get(labels.get("hpc_job", ""), t))),
            }
            for labels, t in began
        ),
        key=lambda j: str(j["first"]),
        reverse=True,
    )
    return {
        "kind": "gpu",
        "gpu": f"{node}:{index}",
        "days": days,
        "jobs": jobs[:MAX_JOBS],
        "jobs_total": len(jobs),
        "entities": [g.doc() for g in gpus],
        "verdicts": [g.verdict for g in gpus if g.verdict],
        "runbooks": [g.runbook for g in gpus if g.runbook],
        "source": {"victoriametrics": vm.source, "days": days},
    }
