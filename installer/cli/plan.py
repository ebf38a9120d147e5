"""`vigil plan`: the monitoring topology, capacity and deploy time for a cluster's size (docs/plan.md)."""

from __future__ import annotations

import argparse

from vigil.installer import ops
from vigil.installer.cli._common import json_option
from vigil.installer.cli._output import emit_json, say


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "plan",
        parents=[json_option("plan")],
        help="size a site: topology, series, ingest, disk, deploy time and the inventory variables",
        description="For a cluster of N GPU nodes: the monitoring topology (one host, the pair, the "
        "pair with scrape shards), the active series, samples a second and disk per replica, the vmagent "
        "queue, the CPU it takes, the admin host's deploy time, and the inventory variables to set. Every "
        "figure is a formula over measured constants; docs/plan.md gives each formula and measurement. "
        "Reads nothing and changes nothing.",
    )
    p.add_argument("--gpu-nodes", type=int, required=True, metavar="N", help="GPU nodes in the cluster")
    p.add_argument("--gpus-per-node", type=int, default=8, metavar="G", help="GPUs a node (default 8)")
    p.add_argument(
        "--cpus-per-node", type=int, default=64, metavar="C", help="logical CPUs a node (default 64)"
    )
    p.add_argument(
        "--retention-months",
        type=int,
        default=13,
        metavar="M",
        help="months of samples kept (default 13: a reporting year and its last month)",
    )
    p.add_argument(
        "--scrape-interval", type=int, default=30, metavar="S", help="seconds between scrapes (default 30)"
    )
    p.add_argument(
        "--admin-cores",
        type=int,
        default=16,
        metavar="K",
        help="admin host cores free for Ansible (default 16)",
    )
    p.set_defaults(func=handler, action="plan")


def handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    doc = ops.plan_op(
        inv,
        ops.PlanInputs(
            gpu_nodes=args.gpu_nodes,
            gpus_per_node=args.gpus_per_node,
            cpus_per_node=args.cpus_per_node,
            retention_months=args.retention_months,
            scrape_interval_s=args.scrape_interval,
            admin_cores=args.admin_cores,
        ),
    )
    if args.json:
        emit_json(doc)
    else:
        say(*ops.plan_lines(doc))
    return 0
