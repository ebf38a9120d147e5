"""``backup.status``: each monitoring host's VictoriaMetrics backups, read from their metrics."""

from __future__ import annotations

import time
from collections.abc import Sequence

from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.report import victoriametrics
from vigil.installer.reports import backups
from vigil.installer.reports.backups import HostBackups
from vigil.installer.reports.errors import ReportError


def backup_status(
    inv: Invocation, *, vm: str | Sequence[str] | None, now: float | None = None
) -> list[HostBackups]:
    """Every host whose backup service has written its metrics, newest state first read from the
    VictoriaMetrics ``vm`` names (or the deployed monitoring host's). Raises when there are none: no
    host has backups enabled, or none has run yet."""
    client = victoriametrics(inv.home, vm)
    inv.object = client.url
    at = int(time.time() if now is None else now)
    hosts = backups.read(client, at)
    inv.details.update(hosts=len(hosts), stale=sorted(h.host for h in hosts if h.stale(at)), at=at)
    if not hosts:
        raise ReportError(
            client.name,
            "no host has backup metrics (vigil_backup_*): set victoriametrics_backup_enabled and "
            "victoriametrics_backup_dst, deploy, and wait for the first run (docs/backup.md)",
        )
    return hosts


def backup_status_failure(hosts: list[HostBackups], now: float) -> None:
    """Raise for the first host whose newest complete backup is stale (after they were shown)."""
    bad = [h for h in hosts if h.stale(now)]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        what = (
            "no complete backup"
            if bad[0].last_success is None
            else "the newest complete backup is over 2 days old"
        )
        raise ReportError(bad[0].host, f"{what}{more}; see docs/runbooks/BackupStale.md")
