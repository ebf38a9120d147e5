"""``vigil backup``: the VictoriaMetrics backups of the monitoring hosts (docs/backup.md)."""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime

from vigil.installer import ops
from vigil.installer.cli._common import json_option
from vigil.installer.cli._output import emit_json, say, visible_tree


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "backup",
        help="VictoriaMetrics backups of the monitoring hosts",
        description="VictoriaMetrics is backed up with vmbackup on a timer on each monitoring host "
        "(victoriametrics_backup_enabled); the restore is a documented procedure on the host. "
        "See docs/backup.md.",
    )
    bsub = p.add_subparsers(dest="backup_command", metavar="SUBCOMMAND", parser_class=type(p))
    bsub.required = True
    s = bsub.add_parser(
        "status",
        parents=[json_option("hosts")],
        help="each host's last complete backup: when, how old, how large",
        description="Per monitoring host, from the metrics its backup service writes (vigil_backup_*, "
        "through node_exporter's textfile collector, read from VictoriaMetrics): when the newest complete "
        "backup ended, its age and size, whether the last run completed one, and how many are kept. Exit 1 "
        "when a host has no complete backup younger than 2 days (the BackupStale alert's threshold).",
    )
    s.add_argument(
        "--vm",
        metavar="URL",
        action="append",
        help="VictoriaMetrics to read; give it again for each replica, in the order to try them "
        "(default $VIGIL_VM_URL, a comma-separated list, else every monitoring host of the last "
        "successful `vigil deploy` recorded in the audit log)",
    )
    s.set_defaults(func=_status, action="backup.status")


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    hours = seconds / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} d"


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"  # pragma: no cover


def table(hosts: list[ops.HostBackups], now: float) -> list[str]:
    """The status as aligned text lines: a header, then a line per host."""
    rows = [("HOST", "LAST COMPLETE (UTC)", "AGE", "SIZE", "LAST RUN", "KEPT", "STATE")]
    for h in hosts:
        run = "-" if h.last_run_ok is None else ("ok" if h.last_run_ok else "failed")
        rows.append(
            (
                h.host,
                _when(h.last_success),
                _age(h.age(now)),
                _size(h.size_bytes),
                run,
                str(h.completed),
                "STALE" if h.stale(now) else "ok",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _status(args: argparse.Namespace, inv: ops.Invocation) -> int:
    now = time.time()
    hosts = ops.backup_status(inv, vm=list(args.vm) if args.vm else os.environ.get("VIGIL_VM_URL"), now=now)
    if args.json:
        emit_json(visible_tree([h.as_json(now) for h in hosts]))
    else:
        say(*table(hosts, now))
    ops.backup_status_failure(hosts, now)
    return 0
