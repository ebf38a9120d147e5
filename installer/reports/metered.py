"""What the meters say of each job, for the reconciliation with Slurm's own accounting.

Slurm's accounting counts a job's GPUs as devices (``AllocTRES`` ``gres/gpu=N``: a MIG instance is
one device, a GPU the job shares with others is still one). The usage report charges shares of GPUs
(docs/reports.md, "MIG instances and shared GPUs"), which Slurm has no figure for. So the figure set
beside Slurm's is the device-hours the job's series show: each GPU or MIG instance that carries the
job's ``hpc_job`` in a minute counts one device-minute, read from the raw DCGM series minute by
minute, as the accounting rules read them.

Where the two differ, the scrape health of the job's nodes says why when it can: the GPU exporter
not answering while node_exporter did (the exporter was down), neither answering (the node or its
network was down), or no scrape of either at all (the monitoring host did not scrape).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vigil.basics.bounded import read_bounded
from vigil.installer.reports import sacct
from vigil.installer.reports.errors import ReportInputError
from vigil.installer.reports.period import Period, chunks
from vigil.installer.reports.sacct import SlurmJob
from vigil.installer.reports.usage import ENTITY, PRESENT_JOB, RAW_CHUNK, quote
from vigil.installer.reports.vm import VictoriaMetrics

#: the scrape jobs (roles/victoriametrics/vars/main.yml) whose health explains a difference
GPU_EXPORTER_JOB = "dcgm_exporter"
NODE_EXPORTER_JOB = "node_exporter"
#: two figures of a job differ when they are more than this far apart (and more than the meters'
#: minute resolution at its two ends: sacct.FLOOR_H_PER_GPU)
THRESHOLD = 0.05
#: at most this many differing jobs get a reason looked up (two queries per node each)
MAX_EXPLAINED = 200
#: and at most this many nodes of one job
MAX_NODES_EXPLAINED = 16


def device_minutes_now() -> str:
    """GPUs and MIG instances each job's series are on now."""
    return f"count by (hpc_job) (group by ({ENTITY}, hpc_job) ({PRESENT_JOB}))"


def job_device_hours(vm: VictoriaMetrics, period: Period) -> dict[str, float]:
    """Device-hours each job's DCGM series show in the period (every job, whatever its account)."""
    hours: dict[str, float] = {}
    for lo, hi in chunks(period.start, period.end, RAW_CHUNK):
        expr = f"sum_over_time(({device_minutes_now()})[{hi - lo}s:1m]) / 60"
        for labels, value in vm.query(expr, hi):
            job = labels.get("hpc_job", "")
            if job:
                hours[job] = hours.get(job, 0.0) + value
    return hours


def _minutes_up(vm: VictoriaMetrics, job: str, node: str, a: int, b: int) -> int | None:
    """Minutes of ``[a, b)`` in which the scrape job ``job`` of ``node`` answered; None when the
    store has no ``up`` of it at all in that time."""
    sel = "up{job=" + quote(job) + ",instance=" + quote(node) + "}"
    got = vm.query(f"sum_over_time(({sel} == bool 1)[{b - a}s:1m])", b)
    return int(round(sum(v for _, v in got))) if got else None


def why(vm: VictoriaMetrics, nodes: Iterable[str], start: int, end: int) -> str | None:
    """Why the meters could have missed part of ``[start, end)`` on ``nodes``; None when every
    scrape answered in every minute (the difference is not explained by scrape health)."""
    if end - start < 60:
        return None
    a, b = start // 60 * 60, -(-end // 60) * 60
    total = (b - a) // 60
    reasons = []
    for node in sorted(set(nodes))[:MAX_NODES_EXPLAINED]:
        gpu = _minutes_up(vm, GPU_EXPORTER_JOB, node, a, b)
        host = _minutes_up(vm, NODE_EXPORTER_JOB, node, a, b)
        if gpu is None and host is None:
            reasons.append(f"{node}: not scraped at all in the job's {total} min (monitoring down?)")
        elif gpu is not None and gpu >= total:
            continue
        elif host is not None and host >= total:
            reasons.append(f"{node}: GPU exporter down {total - (gpu or 0)} of the job's {total} min")
        else:
            down = total - max(gpu or 0, host or 0)
            reasons.append(f"{node}: node down (no exporter answered) {down} of the job's {total} min")
    return "; ".join(reasons) or None


#: the reason given to a job that holds part of a GPU through Slurm's sharding (gres/shard) or MPS:
#: AllocTRES has no gres/gpu for it, while the meters see the GPU it ran on
SHARED = "shares a GPU (gres/shard or MPS): Slurm's gres/gpu counts no GPU for it"


def load_sacct(path: Path) -> tuple[list[SlurmJob], str]:
    """``--sacct FILE``: the jobs in it and the file's SHA-256 (read once, within sacct's bound)."""
    data = read_bounded(path, max_bytes=sacct.MAX_BYTES, error=ReportInputError)
    return sacct.parse(data, where=str(path)), hashlib.sha256(data).hexdigest()


def reconciliation(
    vm: VictoriaMetrics,
    period: Period,
    jobs: list[SlurmJob],
    *,
    sha256: str,
    now: int,
    account: str | None = None,
    threshold: float = THRESHOLD,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The usage report's ``reconciliation``: Slurm's GPU-hours (``jobs``, read from sacct) beside
    the device-hours the meters show, per account, and the jobs that differ with why where known."""
    if progress is not None:
        progress(f"device-hours per job for the reconciliation with Slurm ({len(jobs)} jobs in the file)")
    hours = job_device_hours(vm, period)
    rec = sacct.reconcile(jobs, hours, period.start, period.end, now, threshold=threshold)
    by_id = {j.job: j for j in jobs}
    explained = 0
    for diff in rec.jobs:
        if diff.reason is not None:
            continue
        job = by_id.get(diff.job)
        if job is None or job.start is None:
            continue
        if job.gpus == 0 and diff.metered_h > 0:
            diff.reason = SHARED
        elif diff.metered_h < diff.slurm_h and explained < MAX_EXPLAINED:
            explained += 1
            a, b = max(job.start, period.start), min(now if job.end is None else job.end, period.end)
            diff.reason = why(vm, job.nodes, a, b)
    doc: dict[str, Any] = rec.to_json()
    if account is not None:
        doc["accounts"] = [a for a in doc["accounts"] if a["account"] == account]
        doc["jobs"] = [j for j in doc["jobs"] if j["account"] == account]
    doc["source"] = {
        "sacct_sha256": sha256,
        "jobs_in_file": len(jobs),
        "metered": "device-hours: each GPU or MIG instance a job's DCGM series are on, a minute each",
    }
    return doc
