"""``explain.job``: one job told from the monitoring store (docs/incidents.md)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.report import victoriametrics
from vigil.installer.reports.explain import (
    BEFORE_DAYS,
    DEFAULT_LOOKBACK_DAYS,
    ExplainError,
    explain_gpu,
    explain_job,
)
from vigil.installer.reports.metered import load_sacct


def explain_job_op(
    inv: Invocation,
    job: str,
    *,
    vm: str | Sequence[str] | None = None,
    sacct: Path | None = None,
    lookback_days: int = DEFAULT_LOOKBACK_DAYS,
    now: float | None = None,
) -> dict[str, Any]:
    """Job ``job``'s document: its user, account, nodes and GPUs, each GPU during and before it,
    the GPU-hours lost if it failed, and a verdict per GPU that had anything."""
    inv.object = f"job {job}"
    if not 1 <= lookback_days <= 400:
        raise ExplainError("--days", f"{lookback_days}: give 1 to 400 days")
    slurm = load_sacct(sacct)[0] if sacct is not None else []
    started = time.monotonic()
    doc = explain_job(
        victoriametrics(inv.home, vm),
        job,
        now=time.time() if now is None else now,
        lookback_days=lookback_days,
        slurm=slurm,
    )
    doc["source"]["seconds"] = round(time.monotonic() - started, 3)
    inv.details.update(gpus=len(doc["gpus"]), verdicts=len(doc["verdicts"]))
    return doc


def _n(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def explain_lines(doc: dict[str, Any]) -> list[str]:
    """The explanation as lines of text, for the CLI and the console: each holds data from the store,
    to be shown through ``visible`` (the CLI) or as plain text (the console)."""
    gpus = doc["gpus"]
    models = sorted({g["model"] for g in gpus if g["model"]})
    who = f"user {', '.join(doc['user']) or '?'}, account {', '.join(doc['account']) or '?'}"
    out = [
        f"job {doc['job']}: {who}, "
        f"partition {', '.join(doc['partition']) or '?'}; {len(gpus)} GPU(s) on {', '.join(doc['nodes'])}"
        + (f" ({', '.join(models)})" if models else ""),
        f"  {doc['first_sample']} to {doc['last_sample']}: {doc['state']}",
        f"  {doc['device_hours']:g} device-hours, {doc['gpu_energy_kwh']:g} kWh of GPU energy"
        + (f"; {doc['gpu_hours_lost']:g} GPU-hours lost ({doc['failed_because']})" if doc["failed"] else ""),
    ]
    for g in gpus:
        mig = g["profile"] or g["gpu_instance"]
        name = f"GPU {g['gpu']}" + (f" (MIG {mig})" if g["gpu_instance"] else "")
        parts = [
            f"peak {_n(g['peak_temperature_c'], ' °C')}",
            f"ECC {g['ecc_single_bit']} single-bit, {g['ecc_double_bit']} double-bit",
        ]
        if g["row_remap_failure"]:
            parts.append("row remap FAILED")
        if g["nvlink_crc_errors"]:
            parts.append(f"NVLink CRC {g['nvlink_crc_errors']}")
        parts += [f"XID {x['code']} at {x['at']} ({x['meaning']})" for x in g["xids"]]
        if g["throttle_reasons"]:
            parts.append("throttled: " + ", ".join(g["throttle_reasons"]))
        parts += [f"{a['alert']} ({a['severity']}) at {a['first_fired']}" for a in g["alerts"]]
        out.append(f"  {name} on {g['instance']} ({g['uuid'] or 'no UUID'}): " + "; ".join(parts))
        before = g["before"]
        prior = [f"{x['code']} at {x['at']}" for x in before["xids"]]
        by_day = before["ecc_single_bit_by_day"]
        counted = (
            f"{before['ecc_single_bit']} single-bit ECC errors (by day {by_day})"
            if by_day
            else "no samples of this GPU recorded"  # a fresh install, or the store's retention
        )
        out.append(
            f"    the {before['days']} days before: {counted}"
            + (f", XID {', '.join(prior)}" if prior else "")
            + (
                f", earlier jobs hit by GPU errors: {', '.join(before['earlier_jobs_hit_by_gpu_errors'])}"
                if before["earlier_jobs_hit_by_gpu_errors"]
                else ""
            )
        )
    if doc["verdicts"]:
        out += [f"VERDICT: {v}" for v in doc["verdicts"]]
        out += [f"RUNBOOK: {r}" for r in doc["runbooks"]]
    else:
        out.append("VERDICT: nothing on its GPUs points at the hardware")
    out.append(f"  ({doc['source']['seconds']:g} s, from {doc['source']['victoriametrics']})")
    return out


def explain_gpu_op(
    inv: Invocation,
    target: str,
    *,
    vm: str | Sequence[str] | None = None,
    days: int = BEFORE_DAYS,
    now: float | None = None,
) -> dict[str, Any]:
    """GPU ``NODE:INDEX``'s document: the jobs on it, its errors and alerts over ``days``, a verdict."""
    inv.object = f"gpu {target}"
    if not 1 <= days <= 400:
        raise ExplainError("--days", f"{days}: give 1 to 400 days")
    started = time.monotonic()
    doc = explain_gpu(
        victoriametrics(inv.home, vm), target, now=time.time() if now is None else now, days=days
    )
    doc["source"]["seconds"] = round(time.monotonic() - started, 3)
    inv.details.update(jobs=doc["jobs_total"], verdicts=len(doc["verdicts"]))
    return doc


def explain_gpu_lines(doc: dict[str, Any]) -> list[str]:
    """A GPU's history as lines of text (each the store's data, shown as for :func:`explain_lines`)."""
    out = [f"GPU {doc['gpu']} over the last {doc['days']} days: {doc['jobs_total']} job(s)"]
    for g in doc["entities"]:
        mig = f" (MIG {g['profile'] or g['gpu_instance']})" if g["gpu_instance"] else ""
        parts = [f"ECC {g['ecc_single_bit']} single-bit, {g['ecc_double_bit']} double-bit"]
        if g["row_remap_failure"]:
            parts.append("row remap FAILED")
        parts += [f"XID {x['code']} at {x['at']} ({x['meaning']})" for x in g["xids"]]
        parts += [f"{a['alert']} ({a['severity']}) at {a['first_fired']}" for a in g["alerts"]]
        out.append(f"  {g['uuid'] or 'no UUID'} {g['model']}{mig}: " + "; ".join(parts))
    for j in doc["jobs"]:
        out.append(
            f"  job {j['job']}: {j['first']} to {j['last']}, "
            f"user {j['user'] or '?'}, account {j['account'] or '?'}"
        )
    if doc["jobs_total"] > len(doc["jobs"]):
        out.append(f"  … and {doc['jobs_total'] - len(doc['jobs'])} older job(s)")
    out += [f"VERDICT: {v}" for v in doc["verdicts"]] or [
        "VERDICT: nothing in its history points at the hardware"
    ]
    out += [f"RUNBOOK: {r}" for r in doc["runbooks"]]
    out.append(f"  ({doc['source']['seconds']:g} s, from {doc['source']['victoriametrics']})")
    return out
