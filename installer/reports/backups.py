"""The VictoriaMetrics backups of each monitoring host, as their metrics say (docs/backup.md).

Each run of the backup service (roles/victoriametrics, files/vigil_vm_backup.py) writes its outcome
into node_exporter's textfile collector on its host; VictoriaMetrics scrapes it with the host's
other metrics. This reads the newest of those series, one host per ``instance``: when the last
complete backup ended, its size, whether the last run completed one, and how many are kept. Values
come from a store and are checked as data: a negative or absurd figure is refused, naming the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vigil.installer.reports.errors import ReportError
from vigil.installer.reports.vm import VictoriaMetrics

#: older than this, a host's newest complete backup is stale (the BackupStale alert's threshold)
STALE_SECONDS = 2 * 86400
METRICS = (
    "vigil_backup_last_success_timestamp_seconds",
    "vigil_backup_last_size_bytes",
    "vigil_backup_last_duration_seconds",
    "vigil_backup_last_run_timestamp_seconds",
    "vigil_backup_last_run_success",
    "vigil_backup_completed",
)
#: the most hosts one answer may name (a monitoring pair, a few sites' worth)
MAX_HOSTS = 1000


@dataclass(frozen=True)
class HostBackups:
    host: str
    #: end of the newest complete backup (Unix time), None when none has completed
    last_success: float | None
    size_bytes: float | None
    duration_seconds: float | None
    last_run: float | None
    last_run_ok: bool | None
    completed: int

    def age(self, now: float) -> float | None:
        return None if self.last_success is None else max(0.0, now - self.last_success)

    def stale(self, now: float) -> bool:
        age = self.age(now)
        return age is None or age > STALE_SECONDS

    def as_json(self, now: float) -> dict[str, object]:
        return {
            "host": self.host,
            "last_success": self.last_success,
            "age_seconds": self.age(now),
            "size_bytes": self.size_bytes,
            "duration_seconds": self.duration_seconds,
            "last_run": self.last_run,
            "last_run_ok": self.last_run_ok,
            "completed": self.completed,
            "stale": self.stale(now),
        }


def read(vm: VictoriaMetrics, now: int) -> list[HostBackups]:
    """Every host with backup metrics at ``now``, by name."""
    values: dict[str, dict[str, float]] = {}
    for metric in METRICS:
        for labels, value in vm.query(f"last_over_time({metric}[1h])", now):
            host = labels.get("instance", "")
            if not host:
                raise ReportError(vm.name, f"{metric}: a series without an instance label")
            if not math.isfinite(value) or value < 0 or value > 1e18:
                raise ReportError(
                    vm.name, f"{metric}{{instance={host!r}}}: {value} is not a figure it can be"
                )
            values.setdefault(host, {})[metric] = value
            if len(values) > MAX_HOSTS:
                raise ReportError(vm.name, f"{metric}: more than {MAX_HOSTS} hosts")
    out = []
    for host, v in sorted(values.items()):
        run_ok = v.get("vigil_backup_last_run_success")
        out.append(
            HostBackups(
                host=host,
                last_success=v.get("vigil_backup_last_success_timestamp_seconds"),
                size_bytes=v.get("vigil_backup_last_size_bytes"),
                duration_seconds=v.get("vigil_backup_last_duration_seconds"),
                last_run=v.get("vigil_backup_last_run_timestamp_seconds"),
                last_run_ok=None if run_ok is None else run_ok == 1,
                completed=int(v.get("vigil_backup_completed", 0)),
            )
        )
    return out
