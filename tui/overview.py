"""What the Overview screen reads: the cluster panels from VictoriaMetrics and the firing alerts from
Alertmanager, over their HTTP APIs. Plain functions of a base URL, so that they can be tried against
any server (the tests' stub on 127.0.0.1; the lab's mon01), and of an opener: a site deployed with
TLS is read with :meth:`SiteAccess.opener() <vigil.installer.access.SiteAccess.opener>` (the site CA,
the API login); without one, plain http.

The queries are the Grafana cluster overview's (roles/grafana/files/dashboards/vigil-cluster-overview.json;
a test holds the two to each other), so the terminal and Grafana say the same thing.
"""

from __future__ import annotations

import functools
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from vigil.basics.errors import VigilError
from vigil.installer.ops import SiteAccess, failure_reason

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

TIMEOUT = 3.0
#: the most bytes read from one answer; a server that sends more is not one of ours
MAX_BYTES = 8 << 20


Opener = urllib.request.OpenerDirector


@functools.cache
def _plain() -> Opener:
    """Plain http, no login and no proxy from the environment: the monitoring host is reached
    directly, inside the cluster."""
    return SiteAccess().opener()


class FetchError(VigilError):
    """A monitoring API could not be read."""


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


def get_json(
    base_url: str,
    path: str,
    params: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
    *,
    opener: Opener | None = None,
) -> Any:
    """GET BASE_URL/PATH?PARAMS with OPENER (default: plain, no login) and parse the JSON answer, or
    raise FetchError naming the URL."""
    if not base_url.startswith(("http://", "https://")):
        raise FetchError(base_url or "(no URL)", "not an http:// or https:// URL")
    where = base_url.rstrip("/") + path
    url = where + ("?" + urllib.parse.urlencode(params) if params else "")
    try:
        with (opener or _plain()).open(url, timeout=timeout) as response:
            body = response.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise FetchError(where, f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = failure_reason(exc)
        raise FetchError(where, reason if reason.startswith("TLS") else f"cannot connect: {reason}") from None
    if len(body) > MAX_BYTES:
        raise FetchError(where, f"answer larger than {MAX_BYTES} bytes")
    try:
        return json.loads(body)
    except ValueError:
        raise FetchError(where, "answer is not JSON") from None


def _data(answer: Any, url: str) -> Any:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error", "no status") if isinstance(answer, dict) else "not an object"
        raise FetchError(url, f"query failed: {error}")
    return answer.get("data", {})


def query(
    base_url: str, expr: str, timeout: float = TIMEOUT, *, opener: Opener | None = None
) -> list[tuple[dict[str, str], float]]:
    """An instant query: each series' labels and value."""
    data = _data(get_json(base_url, "/api/v1/query", {"query": expr}, timeout, opener=opener), base_url)
    out = []
    for item in data.get("result", []):
        out.append((dict(item.get("metric", {})), float(item["value"][1])))
    return out


def query_range(
    base_url: str, expr: str, *, start: float, end: float, step: int, opener: Opener | None = None
) -> list[float]:
    """A range query of one series: its values, oldest first (empty when there is none)."""
    params = {"query": expr, "start": f"{start:.0f}", "end": f"{end:.0f}", "step": str(step)}
    data = _data(get_json(base_url, "/api/v1/query_range", params, opener=opener), base_url)
    result = data.get("result", [])
    return [float(v) for _, v in result[0].get("values", [])] if result else []


def fetch_panels(base_url: str, *, opener: Opener | None = None) -> list[Panel]:
    panels = []
    for title, unit, expr in PANELS:
        result = query(base_url, expr, opener=opener)
        panels.append(Panel(title, unit, result[0][1] if result else None))
    return panels


def fetch_utilisation(
    base_url: str, *, now: float, minutes: int = 30, step: int = 30, opener: Opener | None = None
) -> list[float]:
    return query_range(base_url, UTILISATION, start=now - minutes * 60, end=now, step=step, opener=opener)


def fetch_energy(base_url: str, *, seconds_today: int, opener: Opener | None = None) -> dict[str, float]:
    """kWh per account since midnight (at least the last hour)."""
    hours = max(1, math.ceil(seconds_today / 3600))
    result = query(base_url, ENERGY.format(range=f"{hours}h"), opener=opener)
    return {labels.get("account", "(none)"): value for labels, value in result}


def fetch_alerts(base_url: str, *, opener: Opener | None = None) -> list[Alert]:
    """Alertmanager's firing alerts (active, not silenced or inhibited), worst first."""
    answer = get_json(
        base_url,
        "/api/v2/alerts",
        {"active": "true", "silenced": "false", "inhibited": "false"},
        opener=opener,
    )
    if not isinstance(answer, list):
        raise FetchError(base_url, "alerts answer is not a list")
    alerts = []
    for item in answer:
        labels = item.get("labels", {})
        alerts.append(
            Alert(
                name=labels.get("alertname", ""),
                severity=labels.get("severity", ""),
                instance=labels.get("instance", labels.get("node", "")),
                job=labels.get("hpc_job", ""),
                user=labels.get("user", ""),
                account=labels.get("account", ""),
                since=str(item.get("startsAt", ""))[:19].replace("T", " "),
                summary=item.get("annotations", {}).get("summary", ""),
            )
        )
    return sorted(alerts, key=lambda a: (a.severity, a.name, a.instance))
