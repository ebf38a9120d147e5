"""HTTP to the lab's monitoring host, for lab tests: VictoriaMetrics, vmalert and Alertmanager on mon01.

Only mon01's address (from vigil.installer.lab.hosts) is ever asked (asserted), with proxies ignored.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from vigil.installer.lab.hosts import host_by_name

#: the monitoring host's address
MON = host_by_name("mon01").ip
#: the components' own default ports, which the lab keeps
VM = f"http://{MON}:8428"
VMALERT = f"http://{MON}:8880"
ALERTMANAGER = f"http://{MON}:9093"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

T = TypeVar("T")


def get(url: str, timeout: float = 20) -> tuple[int, str]:
    """GET URL on mon01: (HTTP status, body)."""
    assert url.startswith(f"http://{MON}:"), url  # the lab only
    with _NO_PROXY.open(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def get_json(url: str, timeout: float = 20) -> Any:
    return json.loads(get(url, timeout)[1])


def query(expr: str, *, at: float | None = None) -> list[dict[str, Any]]:
    """An instant query; fails the test on any error the server reports."""
    params = {"query": expr}
    if at is not None:
        params["time"] = f"{at:.3f}"
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
