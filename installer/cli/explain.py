"""`vigil explain job ID`: one job told from the monitoring store, in five seconds (docs/incidents.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    gpu = esub.add_parser(
        "gpu",
        parents=[json_option("whole history")],
        help="one GPU's history: the jobs on it, its errors and alerts, and a verdict",
        description="GPU NODE:INDEX (gpu01:3) over the last days: the jobs that ran on it with their "
        "users and accounts, its XIDs, ECC errors and row remapping on its own series whatever ran, the "
        "alerts that fired on it or its node, and a verdict. Exit status 0 whatever the verdict.",
    )
    gpu.add_argument(
        "target", metavar="NODE:INDEX", help="the node (the inventory's host name) and the GPU's index"
    )
    gpu.add_argument(
        "--vm", metavar="URL", action="append", help="VictoriaMetrics to read, as for `vigil explain job`"
    )
    gpu.add_argument(
        "--days", type=int, default=7, metavar="N", help="how many days back (default 7, at most 400)"
    )
    gpu.set_defaults(func=gpu_handler, action="explain.gpu")


def job_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    doc = ops.explain_job_op(inv, args.id, vm=args.vm, sacct=args.sacct, lookback_days=args.days)
    if args.json:
        emit_json(doc)
    else:
        say(*ops.explain_lines(doc))
    return 0


def gpu_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    doc = ops.explain_gpu_op(inv, args.target, vm=args.vm, days=args.days)
    if args.json:
        emit_json(doc)
    else:
        say(*ops.explain_gpu_lines(doc))
    return 0
