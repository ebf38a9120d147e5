"""``explain.job``: one job told from the monitoring store (docs/incidents.md)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.report import victoriametrics
from vigil.installer.reports.explain import DEFAULT_LOOKBACK_DAYS, ExplainError, explain_job
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
