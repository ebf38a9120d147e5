"""`vigil explain job ID`: one job told from the monitoring store, in five seconds (docs/incidents.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vigil.installer import ops
from vigil.installer.cli._common import json_option
from vigil.installer.cli._output import emit_json, say


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "explain",
        help="a job told from the monitoring store: its GPUs, their errors, and whether they were degrading",
        description="Which GPUs a job ran on, for which user and account, what each GPU went through "
        "during the job (XIDs and what they mean, ECC errors, row remapping, throttling, NVLink, the "
        "alerts that fired) and in the 7 days before it (the single-bit ECC trend, earlier XIDs, "
        "earlier jobs hit by GPU errors on it), the GPU-hours lost if it failed, a verdict per GPU "
        "and the runbook to follow. Read from VictoriaMetrics. See docs/incidents.md.",
    )
    esub = p.add_subparsers(dest="explain_command", metavar="SUBCOMMAND", parser_class=type(p))
    esub.required = True
    job = esub.add_parser(
        "job",
        parents=[json_option("whole explanation")],
        help="one Slurm job: its GPUs during and before it, and a verdict",
        description="Job ID as the monitoring store holds it (the prolog's job map tags its GPUs' "
        "series with hpc_job=ID). Exit status 0 whatever the verdict; 1 when the job cannot be read.",
    )
    job.add_argument("id", metavar="ID", help="the Slurm job id")
    job.add_argument(
        "--vm",
        metavar="URL",
        action="append",
        help="VictoriaMetrics to read, as for `vigil report` (default $VIGIL_VM_URL, else the "
        "monitoring hosts of the last successful deploy)",
    )
    job.add_argument(
        "--sacct",
        type=Path,
        metavar="FILE",
        help="Slurm's accounting for the job's state (the file `vigil report usage --sacct` reads; "
        "docs/reports.md); without it, a job whose GPUs stopped reporting within 10 minutes of a GPU "
        "fault on them is taken as failed",
    )
    job.add_argument(
        "--days",
        type=int,
        default=30,
        metavar="N",
        help="how far back to look for the job (default 30, at most 400)",
    )
    job.set_defaults(func=job_handler, action="explain.job")


def _n(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def job_lines(doc: dict[str, Any]) -> list[str]:
    """The explanation as lines of text (each printed through ``visible``)."""
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
        out.append(
            f"    the {before['days']} days before: {before['ecc_single_bit']} single-bit ECC errors "
            f"(by day {before['ecc_single_bit_by_day']})"
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


def job_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    doc = ops.explain_job_op(inv, args.id, vm=args.vm, sacct=args.sacct, lookback_days=args.days)
    if args.json:
        emit_json(doc)
    else:
        say(*job_lines(doc))
    return 0
