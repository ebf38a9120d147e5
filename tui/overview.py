"""What the Overview screen reads: the cluster panels from VictoriaMetrics and the firing alerts from
Alertmanager, over their HTTP APIs. Plain functions of the service's replicas (a base URL, several,
or a comma-separated list: the tests' stub on 127.0.0.1, the lab's mon01, a site's monitoring pair),
read through :class:`vigil.installer.stack.Replicas` (the first that answers; the site CA and the
API login of ACCESS on a site deployed with TLS, else plain http; never a proxy).

The queries are the Grafana cluster overview's (roles/grafana/files/dashboards/vigil-cluster-overview.json;
a test holds the two to each other), so the terminal and Grafana say the same thing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vigil.basics.errors import VigilError
from vigil.installer.ops import Failure, ReadFailed, Replicas, SiteAccess, StackError, TooLarge, alert_who

#: (title, unit, PromQL) of the overview's stat panels, in the dashboard's order
PANELS: tuple[tuple[str, str, str], ...] = (
    ("GPUs healthy", "", "cluster:gpus_healthy:count"),
    ("GPUs", "", "cluster:gpus:count"),
    ("GPU power", "kW", "cluster:gpu_power_draw:sum / 1000"),
    ("Hottest GPU", "°C", "cluster:gpu_temp:max"),
    ("Active jobs", "", "cluster:hpc_jobs_on_gpus:count"),
)
#: the utilisation time series (the dashboard's timeseries panel)
UTILISATION = "cluster:gpu_utilization:avg"
#: energy per account today, in kWh; ``{range}`` is the time since midnight, as the dashboard's
#: ``$__range`` over a "today" time range
ENERGY = "sum by (account) (sum_over_time(account:gpu_energy_joules:increase1h[{range}:1h])) / 3.6e6"

#: seconds one replica has for one answer, from connecting to the last byte
TIMEOUT = 3.0
#: the most bytes read from one answer; a server that sends more is not one of ours
MAX_BYTES = 8 << 20

#: a service's replicas: one base URL, several, a comma-separated list, or a client made already
Source = str | Iterable[str] | Replicas


class FetchError(VigilError):
    """A monitoring API could not be read."""


def replicas(
    source: Source, *, access: SiteAccess | None = None, service: str = "", timeout: float = TIMEOUT
) -> Replicas:
    """The client of SOURCE's replicas, read with ACCESS (default: plain, no login)."""
    if isinstance(source, Replicas):
        return source
    try:
        return Replicas(source, service=service, access=access, timeout=timeout, max_bytes=MAX_BYTES, what="")
    except StackError as exc:
        raise FetchError(exc.obj if exc.obj else "(no URL)", exc.reason) from None


def _why(failure: Failure) -> str:
    if failure.status is not None:
        return f"HTTP {failure.status} {failure.phrase}"
    return failure.reason if failure.tls else f"cannot connect: {failure.reason}"


def get_json(
    source: Source,
    path: str,
    params: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
    *,
    access: SiteAccess | None = None,
) -> Any:
    """GET PATH?PARAMS from the first of SOURCE's replicas that answers and parse the JSON answer,
    or raise FetchError naming the URL (each replica's, when none answered)."""
    client = replicas(source, access=access, timeout=timeout)
    try:
        answer = client.get(path, list((params or {}).items()))
    except ReadFailed as exc:
        if len(exc.failures) == 1:
            (failure,) = exc.failures
            raise FetchError(failure.replica + path, _why(failure)) from None
        reasons = "; ".join(f"{f.replica}: {_why(f)}" for f in exc.failures)
        raise FetchError(", ".join(client.urls), f"{path}: no replica answered: {reasons}") from None
    except TooLarge as exc:
        raise FetchError(exc.replica + path, f"answer larger than {MAX_BYTES} bytes") from None
    try:
        return json.loads(answer.body)
    except ValueError:
        raise FetchError(answer.replica + path, "answer is not JSON") from None


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    value: float | None

    def text(self) -> str:
        if self.value is None or math.isnan(self.value):
            return "no data"
        number = f"{self.value:.0f}" if self.value == int(self.value) else f"{self.value:.1f}"
        return f"{number} {self.unit}".rstrip()


@dataclass(frozen=True)
class Alert:
    name: str
    severity: str
    instance: str
    job: str
    user: str
    account: str
    since: str
    summary: str


def _data(answer: Any, client: Replicas) -> Any:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error", "no status") if isinstance(answer, dict) else "not an object"
        raise FetchError(client.first, f"query failed: {error}")
    return answer.get("data", {})


def query(
    source: Source, expr: str, timeout: float = TIMEOUT, *, access: SiteAccess | None = None
) -> list[tuple[dict[str, str], float]]:
    """An instant query: each series' labels and value."""
    client = replicas(source, access=access, timeout=timeout)
    data = _data(get_json(client, "/api/v1/query", {"query": expr}), client)
    out = []
    for item in data.get("result", []):
        out.append((dict(item.get("metric", {})), float(item["value"][1])))
    return out


def query_range(
    source: Source, expr: str, *, start: float, end: float, step: int, access: SiteAccess | None = None
) -> list[float]:
    """A range query of one series: its values, oldest first (empty when there is none)."""
    client = replicas(source, access=access)
    params = {"query": expr, "start": f"{start:.0f}", "end": f"{end:.0f}", "step": str(step)}
    data = _data(get_json(client, "/api/v1/query_range", params), client)
    result = data.get("result", [])
    return [float(v) for _, v in result[0].get("values", [])] if result else []


def fetch_panels(source: Source, *, access: SiteAccess | None = None) -> list[Panel]:
    client = replicas(source, access=access)
    panels = []
    for title, unit, expr in PANELS:
        result = query(client, expr)
        panels.append(Panel(title, unit, result[0][1] if result else None))
    return panels


def fetch_utilisation(
    source: Source, *, now: float, minutes: int = 30, step: int = 30, access: SiteAccess | None = None
) -> list[float]:
    return query_range(source, UTILISATION, start=now - minutes * 60, end=now, step=step, access=access)


def fetch_energy(source: Source, *, seconds_today: int, access: SiteAccess | None = None) -> dict[str, float]:
    """kWh per account since midnight (at least the last hour)."""
    hours = max(1, math.ceil(seconds_today / 3600))
    result = query(source, ENERGY.format(range=f"{hours}h"), access=access)
    return {labels.get("account", "(none)"): value for labels, value in result}


def fetch_alerts(source: Source, *, access: SiteAccess | None = None) -> list[Alert]:
    """Alertmanager's firing alerts (active, not silenced or inhibited), worst first."""
    client = replicas(source, access=access)
    answer = get_json(client, "/api/v2/alerts", {"active": "true", "silenced": "false", "inhibited": "false"})
    if not isinstance(answer, list):
        raise FetchError(client.first, "alerts answer is not a list")
    alerts = []
    for item in answer:
        labels = item.get("labels", {})
        who = alert_who(item)
        alerts.append(
            Alert(
                name=labels.get("alertname", ""),
                severity=labels.get("severity", ""),
                instance=labels.get("instance", labels.get("node", "")),
                job=who["hpc_job"],
                user=who["user"],
                account=who["account"],
                since=str(item.get("startsAt", ""))[:19].replace("T", " "),
                summary=item.get("annotations", {}).get("summary", ""),
            )
        )
    return sorted(alerts, key=lambda a: (a.severity, a.name, a.instance))
