"""``vigil status``'s view of the monitoring replicas: each VictoriaMetrics and Alertmanager of the
inventory's ``monitoring`` group asked for itself (:mod:`vigil.installer.stack_health`)."""

from __future__ import annotations

from pathlib import Path

from vigil.installer.access import SiteAccess, site_access
from vigil.installer.deploy.credentials import metrics_key
from vigil.installer.ops.report import monitoring_places
from vigil.installer.stack_health import ReplicaHealth, read

#: each replica's health from given URL lists (the console's fields): stack_health.read
read_replicas = read


def monitoring_urls(inventory: str | Path, access: SiteAccess) -> tuple[list[str], list[str]]:
    """The VictoriaMetrics and the Alertmanager URLs of INVENTORY's monitoring hosts, in its order,
    in the site's scheme (https once the site has TLS)."""
    places = monitoring_places(inventory)
    vm = list(dict.fromkeys(access.url(p.address, p.vm_port) for p in places))
    am = list(dict.fromkeys(access.url(p.address, p.alertmanager_port) for p in places))
    return vm, am


def site_metrics_key(home: Path) -> str | None:
    """The site's key for the services' own /metrics (secrets/metrics.key), None when it has none."""
    found = metrics_key(home, create=False)
    return found[0].read_text().strip() if found else None


def replica_health(home: Path, inventory: str | Path, *, now: float | None = None) -> list[ReplicaHealth]:
    """Each monitoring replica's health, read with the site's CA, API login and metrics key."""
    access = site_access(home)
    vm, am = monitoring_urls(inventory, access)
    return read(vm, am, access=access, now=now, metrics_key=site_metrics_key(home))
