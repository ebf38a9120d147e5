"""``vigil upgrade``, ``vigil rollback``, ``vigil status``: move the site between imported bundles, and
show what runs where."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vigil.basics.errors import VigilError
from vigil.installer import ops
from vigil.installer.cli._common import json_option, trust_option
from vigil.installer.cli._output import emit_json, ok, say, showing_progress


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    inventory = argparse.ArgumentParser(add_help=False)
    inventory.add_argument("--inventory", "-i", type=Path, required=True, help="inventory directory or file")
    inventory.add_argument(
        "--ansible-dir",
        type=Path,
        help="use this Ansible tree instead of the bundles' (development only; recorded)",
    )
    root = argparse.ArgumentParser(add_help=False)
    root.add_argument(
        "--admin-root",
        type=Path,
        metavar="DIR",
        help="the admin host's vigil installs: DIR/<version>-bundle<N>/ and DIR/current "
        "(default: $VIGIL_ADMIN_ROOT, else /opt/vigil/admin)",
    )
    admin = argparse.ArgumentParser(add_help=False, parents=[root])
    admin.add_argument(
        "--no-admin",
        action="store_true",
        help="leave the admin host's vigil alone (a site that runs vigil from elsewhere; recorded)",
    )

    p = sub.add_parser(
        "upgrade",
        parents=[inventory, admin, trust_option(), json_option()],
        help="upgrade the site to an imported bundle, rolling, with automatic rollback",
        description="Upgrade every host to an imported bundle (default: the highest). The plan (per host and "
        "component, old -> new) is shown first; --check stops there. Then the GPU nodes and the controller, "
        "--serial at a time, then on the monitoring hosts every service but VictoriaMetrics, and "
        "VictoriaMetrics last; each step is health-checked. A failed check switches that step's hosts "
        "back to their previous bundle, stops, and exits 1. A rerun skips what is already at the target. "
        "The admin host's own vigil comes from the same bundle: its wheels are installed offline into "
        "--admin-root/<version>-bundle<N>/ before the first step, and --admin-root/current is switched "
        "to it after the last health check (--no-admin: not).",
    )
    p.add_argument("--to", type=int, metavar="VERSION", help="bundle version (default: the highest imported)")
    p.add_argument("--serial", type=int, default=1, metavar="N", help="hosts changed at a time (default 1)")
    p.add_argument("--check", action="store_true", help="show the plan and change nothing")
    p.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="allow a bundle older than the newest imported, or than what a host runs (audited)",
    )
    p.set_defaults(func=_upgrade, action="upgrade", rollback=False, keep_store=False)

    p = sub.add_parser(
        "rollback",
        parents=[inventory, admin, trust_option(), json_option()],
        help="return the site to the previous (or named) deployed bundle",
        description="Return every host to the bundle the site ran before the current one (from the site "
        "history, $VIGIL_HOME/site/history.jsonl), or to --to VERSION, the same way as an upgrade. A store "
        "rollback that the older VictoriaMetrics could not read is refused. The admin host's "
        "--admin-root/current goes back to that bundle's vigil too (--no-admin: not).",
    )
    p.add_argument("--to", type=int, metavar="VERSION", help="bundle version (default: the previous one)")
    p.add_argument("--serial", type=int, default=1, metavar="N", help="hosts changed at a time (default 1)")
    p.add_argument("--check", action="store_true", help="show the plan and change nothing")
    p.add_argument(
        "--keep-store",
        action="store_true",
        help="leave VictoriaMetrics at the version it runs (an older release cannot read a newer one's data)",
    )
    p.set_defaults(func=_upgrade, action="rollback", rollback=True, allow_downgrade=True)

    p = sub.add_parser(
        "status",
        parents=[inventory, root, trust_option(), json_option("hosts' status")],
        help="each host's components, versions, bundle and drift; each monitoring replica's health",
        description="Read each host's facts file (written by every deploy) and re-hash the binaries, units "
        "and configuration it lists; then ask each monitoring replica (VictoriaMetrics, Alertmanager) for "
        "its own health: answering, disk, newest sample, what vmagent has queued for it, the cluster it "
        "sees. Changes nothing. Exit 1 when a host drifted from what was deployed, has no facts file, "
        "a service is not active, or a replica needs attention.",
    )
    p.add_argument("--limit", help="only these hosts/groups (Ansible pattern)")
    p.add_argument(
        "--no-replicas", action="store_true", help="the hosts only: do not ask the monitoring replicas"
    )
    p.set_defaults(func=_status, action="status")


def _upgrade(args: argparse.Namespace, inv: ops.Invocation) -> int:
    with showing_progress(inv, steps=f"{args.action}: ", bars=False):
        out = ops.upgrade(
            inv,
            inventory=args.inventory,
            trust=args.trust,
            to=args.to,
            serial=args.serial,
            check=args.check,
            allow_downgrade=args.allow_downgrade,
            rollback=args.rollback,
            keep_store=args.keep_store,
            ansible_dir=args.ansible_dir,
            admin=not args.no_admin,
            admin_root_dir=args.admin_root,
        )
    if args.json:
        emit_json(
            {
                "id": out.upgrade_id,
                "run_dir": str(out.run_dir),
                "bundle_version": out.target,
                "check": out.checked_only,
                "changes": [vars(c) for c in out.changes],
                "steps": out.steps_run,
                "skipped": out.skipped,
                "tls": out.tls,
                "files": out.files,
                "files_unknown": out.files_unknown,
                "admin": out.admin,
            }
        )
        return 0
    if out.checked_only:
        say(*ops.upgrade_plan_lines(out.changes, out.target, out.files, out.files_unknown))
        if out.admin.get("plan"):
            say(f"  {out.admin['plan']}")
    ok(f"{args.action} {out.upgrade_id}", ops.upgrade_outcome_message(out))
    return 0


def _status_lines(hosts: dict[str, ops.HostStatus]) -> list[str]:
    lines = []
    for name in sorted(hosts):
        s = hosts[name]
        if not s.deployed:
            lines.append(f"{name}: never deployed (no /var/lib/vigil/deployed.json)")
            continue
        lines.append(f"{name}: bundle {s.bundle_version} ({s.channel or 'channel unknown'})")
        for c in sorted(s.components.values(), key=lambda c: c.name):
            state = s.services.get(c.service, "") if c.service else ""
            lines.append(
                f"  {c.name} {c.version} (bundle {c.bundle_version})"
                + (f" {c.service} {state}" if state else "")
            )
        for d in s.drift:
            lines.append(f"  DRIFT {d.component or '-'}: {d.path}: {d.reason}")
    return lines


def _say_replicas(replicas: list[ops.ReplicaHealth], unread: str) -> None:
    if replicas or unread:
        say("monitoring replicas:" + (f" not read: {unread}" if unread else ""))
        say(*(f"  {r.line()}" for r in replicas))  # what the replicas said: shown as data


def admin_line(a: ops.AdminState) -> str:
    """The admin host's line of ``vigil status``."""
    here = "this vigil" if a.running_current else f"this vigil {a.running_version} from {a.running_prefix}"
    if a.problem:
        return f"admin host: {a.problem}; {here}"
    if a.current is None:
        return f"admin host: no vigil installed under {a.root} (no current); {here}"
    return (
        f"admin host: vigil {a.current.vigil_version} (bundle {a.current.bundle_version}) "
        f"{a.root / 'current'} -> {a.current.dirname}; {here}"
    )


def _status(args: argparse.Namespace, inv: ops.Invocation) -> int:
    admin = ops.admin_status(args.admin_root)
    # the replicas first: when a monitoring host is down, what the others say is what the operator
    # needs, and the hosts' read below fails on the host it cannot reach
    replicas: list[ops.ReplicaHealth] = []
    replicas_unread = ""
    if not args.no_replicas:
        try:
            replicas = ops.replica_health(inv.home, args.inventory)
        except VigilError as exc:
            replicas_unread = f"{exc.obj}: {exc.reason}" if exc.obj else exc.reason
    inv.details.update(replicas_attention=[r.url for r in replicas if not r.ok])
    try:
        hosts = ops.site_status(
            inv, inventory=args.inventory, trust=args.trust, limit=args.limit, ansible_dir=args.ansible_dir
        )
    except VigilError as exc:
        if replicas or replicas_unread:
            if args.json:
                emit_json(
                    {
                        "admin": admin.to_json(),
                        "hosts": {},
                        "hosts_unread": f"{exc.obj}: {exc.reason}" if exc.obj else exc.reason,
                        "attention": [],
                        "replicas": [r.to_json() for r in replicas],
                        "replicas_attention": [r.url for r in replicas if not r.ok],
                        "replicas_unread": replicas_unread,
                    }
                )
            else:
                say(admin_line(admin))
                _say_replicas(replicas, replicas_unread)
        raise
    bad = sorted(
        h
        for h, s in hosts.items()
        if not s.deployed
        or s.drift
        or any(s.services.get(c.service, "active") != "active" for c in s.components.values() if c.service)
    )
    if args.json:
        emit_json(
            {
                "admin": admin.to_json(),
                "hosts": {h: s.to_json() for h, s in sorted(hosts.items())},
                "attention": bad,
                "replicas": [r.to_json() for r in replicas],
                "replicas_attention": [r.url for r in replicas if not r.ok],
                "replicas_unread": replicas_unread,
            }
        )
    else:
        say(admin_line(admin))
        say(*_status_lines(hosts))  # what the hosts reported: escapes shown, one line each
        _say_replicas(replicas, replicas_unread)
        sick = [r for r in replicas if not r.ok]
        if not bad and not sick:
            ok(
                "status",
                f"{len(hosts)} hosts as deployed"
                + (f", {len(replicas)} replicas healthy" if replicas else ""),
            )
        if bad:
            say(f"FAIL: status: {', '.join(bad)} not as deployed", file=sys.stderr)
        if sick:
            names = ", ".join(f"{r.service} {r.url}" for r in sick)
            say(f"FAIL: status: {names} needs attention", file=sys.stderr)
    return 1 if bad or any(not r.ok for r in replicas) else 0
