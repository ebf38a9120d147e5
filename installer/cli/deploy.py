"""``vigil deploy``: the stack from the imported bundle onto the cluster, through Ansible."""

from __future__ import annotations

import argparse
import contextlib
import queue
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from vigil.basics.printable import visible
from vigil.installer import ops
from vigil.installer.cli._common import json_option, trust_option
from vigil.installer.cli._output import emit_json
from vigil.installer.cli._output import say as _say
from vigil.installer.deploy import DEFAULT_FORKS, MAX_FORKS, PlaybookRun

#: how often the live table drains the run's event queue and redraws (seconds)
REFRESH = 0.25


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "deploy",
        parents=[trust_option(), json_option()],
        help="deploy the stack from the imported bundle",
        description="Deploy VictoriaMetrics, vmalert, Alertmanager, Grafana and node_exporter from the "
        "highest imported bundle (or --bundle N) with the bundle's own Ansible content. Before any change: "
        "the inventory is checked, the bundle is re-verified in the store, and every host is reached. "
        "The run's artifacts stay in $VIGIL_HOME/runs/<id>/. Exit non-zero on any failed or unreachable "
        "host.",
    )
    p.add_argument("--inventory", "-i", type=Path, required=True, help="inventory directory or file")
    p.add_argument("--limit", help="only these hosts/groups (Ansible pattern)")
    p.add_argument("--tags", help="only these role tags, comma-separated")
    p.add_argument(
        "--check",
        action="store_true",
        help="dry run: report what would change, per host: each task and the files it names",
    )
    p.add_argument("--bundle", type=int, metavar="N", help="imported bundle version (default: the highest)")
    p.add_argument(
        "--forks",
        type=_forks,
        metavar="N",
        help=f"hosts worked on at once (default: {DEFAULT_FORKS}; each is an Ansible worker process on "
        "this host)",
    )
    p.add_argument(
        "--ansible-dir",
        type=Path,
        help="use this Ansible tree instead of the bundle's (development only; recorded)",
    )
    p.set_defaults(func=_deploy, action="deploy")


def _forks(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= n <= MAX_FORKS:
        raise argparse.ArgumentTypeError(f"{n} is not in 1..{MAX_FORKS}")
    return n


def _live(run: PlaybookRun, events: queue.Queue[dict[str, Any]]) -> None:
    """A table of hosts and counts on the terminal, redrawn from the run's events until it ends."""
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    task = ""
    started = 0

    def drain() -> None:
        nonlocal task, started
        while True:
            try:
                event = events.get_nowait()
            except queue.Empty:
                return
            if event.get("event") == "playbook_on_task_start":
                task = (event.get("event_data") or {}).get("task", "")
                started += 1

    def render() -> Table:
        table = Table(title=Text(visible(f"task {started}: {task}")), title_justify="left")
        for col in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
            table.add_column(col, justify="left" if col == "host" else "right")
        with run.progress.lock:
            for host in sorted(run.progress.hosts):
                s = run.progress.hosts[host]
                table.add_row(
                    Text(visible(host)),
                    str(s.ok),
                    str(s.changed),
                    str(s.failed),
                    str(s.unreachable),
                    str(s.skipped),
                )
        return table

    with Live(render(), refresh_per_second=4, transient=True, console=None) as live:
        while not run.done():
            drain()
            live.update(render())
            _tick(run)
        drain()


#: with output to a file or a pipe, a line at least this often (seconds), so a log shows the run is alive
HEARTBEAT = 10.0


def _lines(run: PlaybookRun, events: queue.Queue[dict[str, Any]], out: TextIO) -> None:
    """Output to a file or a pipe (a CI log, `tee`): one line per play, one per role and host as it
    starts there, and a heartbeat naming the current task when nothing else was said for a while."""
    seen: set[tuple[str, str]] = set()
    task, started = "", 0
    t0 = last = time.monotonic()

    def say(text: str) -> None:
        nonlocal last
        _say(text, file=out, flush=True)
        last = time.monotonic()

    def drain() -> None:
        nonlocal task, started
        while True:
            try:
                event = events.get_nowait()
            except queue.Empty:
                return
            kind, data = event.get("event", ""), event.get("event_data") or {}
            if kind == "playbook_on_play_start":
                say(f"play: {data.get('play', '')}")
            elif kind == "playbook_on_task_start":
                task, started = data.get("task", ""), started + 1
            elif kind.startswith("runner_on_") and data.get("host") and data.get("role"):
                key = (data["host"], data["role"])
                if key not in seen:
                    seen.add(key)
                    say(f"  {key[0]}: {key[1]}")

    while not run.done():
        drain()
        if time.monotonic() - last >= HEARTBEAT:
            say(f"  ... {time.monotonic() - t0:.0f} s, task {started}: {task}")
        _tick(run)
    drain()


def _tick(run: PlaybookRun) -> None:
    """Wait up to one refresh for the run to end."""
    with contextlib.suppress(TimeoutError):
        run.wait(REFRESH)


def _deploy(args: argparse.Namespace, inv: ops.Invocation) -> int:
    plan = ops.plan_deploy(
        inv,
        inventory=args.inventory,
        trust=args.trust,
        bundle_version=args.bundle,
        ansible_dir=args.ansible_dir,
        limit=args.limit,
        tags=args.tags,
        check=args.check,
        forks=args.forks,
    )
    if not args.json:
        print(
            f"deploy: bundle {plan.bundle.version} to {len(plan.inventory.hosts)} hosts, run {plan.run_id}"
            f"{' (check mode)' if plan.check else ''}",
            flush=True,
        )
    events: queue.Queue[dict[str, Any]] | None = None if args.json else queue.Queue()
    run = ops.start_deploy(inv, plan, events)
    try:
        if events is not None and sys.stderr.isatty():
            _live(run, events)
        elif events is not None:
            _lines(run, events, sys.stdout)
        result = ops.finish_deploy(inv, run)
    except KeyboardInterrupt:
        run.cancel()  # ansible-runner stops the play; the record says interrupted
        ops.finish_deploy(inv, run)
        raise
    counts = {h: vars(s) for h, s in result.progress.hosts.items()}
    if args.json:
        emit_json(
            {
                "run_id": result.run_id,
                "run_dir": str(result.run_dir),
                "status": result.status,
                "ok": result.ok,
                "hosts": {h: {k: v for k, v in c.items() if k != "task"} for h, c in counts.items()},
                "failures": [vars(f) for f in result.progress.failures],
                "changes": [
                    {"host": c.host, "task": c.task, "role": c.role, "paths": list(c.paths)}
                    for c in result.progress.changes
                ],
            }
        )
    else:
        for f in result.progress.failures:
            _say(f"  {f.host}: {f.task}: {f.message}", file=sys.stderr)
        if plan.check:  # the drift question: what differs from the bundle, host by host
            print("would change:" if result.progress.changes else "would change: nothing")
            for c in sorted(result.progress.changes, key=lambda c: c.host):
                _say(f"  {c.line()}")
        print("recap:")
        _say(*(f"  {line}" for line in result.recap_lines()))
        print(f"artifacts: {result.run_dir}")
    failure = ops.deploy_failure(result)
    if failure is not None:
        raise failure
    if not args.json:
        print(
            f"OK: deploy {result.run_id}: {len(result.progress.hosts)} hosts, "
            f"{sum(s.changed for s in result.progress.hosts.values())} changed"
        )
    return 0
