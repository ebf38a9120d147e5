"""HTTPS to the lab's monitoring host, for lab tests: VictoriaMetrics, vmalert and Alertmanager on mon01.

The deployed stack serves them over TLS (the site CA) to the site's API login: `use_site` (called by
the deployed_stack fixture) reads both from the deploy's home, as vigil's own clients do
(vigil.installer.access). Only mon01's address (from vigil.installer.lab.hosts) is ever asked
(asserted), with proxies ignored.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from vigil.installer.access import SiteAccess, site_access
from vigil.installer.lab.hosts import host_by_name

#: the monitoring host's address
MON = host_by_name("mon01").ip
#: the components' own default ports, which the lab keeps
VM = f"https://{MON}:8428"
VMALERT = f"https://{MON}:8880"
ALERTMANAGER = f"https://{MON}:9093"
_site: list[SiteAccess] = []


def use_site(home: Path) -> None:
    """Reach the services with the site CA and the API login of the deploy whose home is HOME."""
    access = site_access(home)
    assert access.tls, f"{home}: the deploy left no site CA or API credential"
    _site[:] = [access]


def opener() -> urllib.request.OpenerDirector:
    """An opener that checks mon01's certificate against the site CA and sends the API login."""
    assert _site, "no deployed stack yet (the deployed_stack fixture calls use_site)"
    return _site[0].opener()


T = TypeVar("T")


def get(url: str, timeout: float = 20) -> tuple[int, str]:
    """GET URL on mon01: (HTTP status, body)."""
    assert url.startswith(f"https://{MON}:"), url  # the lab only
    with opener().open(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def get_json(url: str, timeout: float = 20) -> Any:
    return json.loads(get(url, timeout)[1])


def query(expr: str, *, at: float | None = None, nocache: bool = False) -> list[dict[str, Any]]:
    """An instant query; fails the test on any error the server reports. ``nocache``: answered as of
    the time asked for, even within VictoriaMetrics' -search.latencyOffset of now (10 s in the lab),
    which it otherwise moves back to now - 10 s."""
    params = {"query": expr}
    if at is not None:
        params["time"] = f"{at:.3f}"
    if nocache:
        params["nocache"] = "1"
    data = get_json(f"{VM}/api/v1/query?{urllib.parse.urlencode(params)}")
    assert data["status"] == "success", data
    return list(data["data"]["result"])


def query_range(expr: str, start: float, end: float, step: str) -> list[dict[str, Any]]:
    params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step}
    data = get_json(f"{VM}/api/v1/query_range?{urllib.parse.urlencode(params)}")
    assert data["status"] == "success", data
    return list(data["data"]["result"])


def am_alerts() -> list[dict[str, Any]]:
    """Alertmanager's current alerts (active, silenced and inhibited; never resolved ones)."""
    return list(get_json(f"{ALERTMANAGER}/api/v2/alerts"))


def vmalert_alerts() -> list[dict[str, Any]]:
    """vmalert's alerts in the pending and firing states."""
    data = get_json(f"{VMALERT}/api/v1/alerts")
    return list(data["data"]["alerts"] or [])


def wait_for(what: str, check: Callable[[], T], timeout: float, every: float = 3) -> T:
    """Call CHECK until it returns something truthy (returned); fail the test after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {got!r}")
        time.sleep(every)
