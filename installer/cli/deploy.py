"""``vigil deploy``: the stack from the imported bundle onto the cluster, through Ansible."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from vigil.bundle.trust import load_root
from vigil.installer.cli._context import Context
from vigil.installer.cli._output import emit_json
from vigil.installer.cli.trust import resolve_trust
from vigil.installer.deploy import DeployError, Progress, deploy, plan_deploy


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "deploy",
        help="deploy the stack from the imported bundle",
        description="Deploy VictoriaMetrics, vmalert, Alertmanager, Grafana and node_exporter from the "
        "highest imported bundle (or --bundle N) with the bundle's own Ansible content. Before any change: "
        "the inventory is checked, the bundle is re-verified in the store, and every host is reached. "
        "The run's artifacts stay in $VIGIL_HOME/runs/<id>/. Exit non-zero on any failed or unreachable host.",
    )
    p.add_argument("--inventory", "-i", type=Path, required=True, help="inventory directory or file")
    p.add_argument("--limit", help="only these hosts/groups (Ansible pattern)")
    p.add_argument("--tags", help="only these role tags, comma-separated")
    p.add_argument("--check", action="store_true", help="dry run: report what would change")
    p.add_argument("--bundle", type=int, metavar="N", help="imported bundle version (default: the highest)")
    p.add_argument("--trust", type=Path, help="trust root (default: the installed one)")
    p.add_argument("--ansible-dir", type=Path,
                   help="use this Ansible tree instead of the bundle's (development only; recorded)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_deploy, action="deploy")


def _live(progress: Progress, work: threading.Thread) -> None:
    from rich.live import Live
    from rich.table import Table

    def render() -> Table:
        table = Table(title=f"task {progress.tasks_started}: {progress.task}", title_justify="left")
        for col in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
            table.add_column(col, justify="left" if col == "host" else "right")
        with progress.lock:
            for host in sorted(progress.hosts):
                s = progress.hosts[host]
                table.add_row(host, str(s.ok), str(s.changed), str(s.failed), str(s.unreachable), str(s.skipped))
        return table

    with Live(render(), refresh_per_second=4, transient=True, console=None) as live:
        while work.is_alive():
            live.update(render())
            time.sleep(0.25)


def _deploy(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.inventory)
    trust = load_root(resolve_trust(ctx, args.trust))
    plan = plan_deploy(home=ctx.home, inventory=args.inventory, trust=trust, version=args.bundle,
                       ansible_dir=args.ansible_dir, limit=args.limit)
    ctx.audit_details.update(run_id=plan.run_id, bundle_version=plan.bundle.version,
                             manifest_sha256=plan.bundle.manifest_sha256, check=args.check, limit=args.limit,
                             tags=args.tags, hosts=plan.inventory.hosts,
                             ansible_dir=str(args.ansible_dir) if args.ansible_dir else "bundle")
    progress = Progress()
    result_box: dict[str, object] = {}

    def work() -> None:
        try:
            result_box["result"] = deploy(plan, home=ctx.home, limit=args.limit, tags=args.tags, check=args.check,
                                          progress=progress)
        except BaseException as exc:  # handed back to the main thread
            result_box["error"] = exc

    thread = threading.Thread(target=work, name="vigil-deploy")
    if not args.json:
        print(f"deploy: bundle {plan.bundle.version} to {len(plan.inventory.hosts)} hosts, run {plan.run_id}"
              f"{' (check mode)' if args.check else ''}", flush=True)
    thread.start()
    if sys.stderr.isatty() and not args.json:
        _live(progress, thread)
    thread.join()
    if "error" in result_box:
        raise result_box["error"]  # type: ignore[misc]
    result = result_box["result"]
    from vigil.installer.deploy.runner import RunResult

    assert isinstance(result, RunResult)
    counts = {h: vars(s) for h, s in result.progress.hosts.items()}
    ctx.audit_details.update(status=result.status, rc=result.rc,
                             counts={h: {k: c[k] for k in ("ok", "changed", "failed", "unreachable")}
                                     for h, c in counts.items()})
    if args.json:
        emit_json({"run_id": result.run_id, "run_dir": str(result.run_dir), "status": result.status,
                   "ok": result.ok, "hosts": {h: {k: v for k, v in c.items() if k != "task"} for h, c in counts.items()},
                   "failures": [vars(f) for f in result.progress.failures]})
    else:
        for f in result.progress.failures:
            print(f"  {f.host}: {f.task}: {f.message}", file=sys.stderr)
        print("recap:")
        for line in result.recap_lines():
            print(f"  {line}")
        print(f"artifacts: {result.run_dir}")
    if not result.ok:
        bad = sorted(h for h, s in result.progress.hosts.items() if s.failed or s.unreachable)
        raise DeployError(f"deploy {result.run_id}", f"failed on {', '.join(bad) or 'the playbook'} "
                          f"(ansible status {result.status}); see {result.run_dir}")
    if not args.json:
        print(f"OK: deploy {result.run_id}: {len(result.progress.hosts)} hosts, "
              f"{sum(s.changed for s in result.progress.hosts.values())} changed")
    return 0
