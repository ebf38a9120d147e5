"""The Overview's reads against a stub VictoriaMetrics and Alertmanager on 127.0.0.1 (the lab tries the
real ones), and its queries held to the Grafana overview dashboard's."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Sparkline
from tui_helpers import drive, settle

from vigil.tui import VigilApp, overview
from vigil.tui.widgets import ResultLine

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "roles" / "grafana" / "files" / "dashboards" / "vigil-cluster-overview.json"

VALUES = {
    "cluster:gpus_healthy:count": "7",
    "cluster:gpus:count": "8",
    "cluster:gpu_power_draw:sum / 1000": "2.45",
    "cluster:gpu_temp:max": "81",
    "cluster:hpc_jobs_on_gpus:count": "3",
}
ALERTS = [
    {
        "labels": {
            "alertname": "GpuTemperatureHigh",
            "severity": "P1",
            "instance": "gpu01:9400",
            "gpu": "2",
            "hpc_job": "4242",
            "user": "ada",
            "account": "physics",
        },
        "annotations": {"summary": "GPU 2 on gpu01 runs hot (86 °C)"},
        "startsAt": "2026-12-01T03:00:00.000Z",
        "status": {"state": "active"},
    }
]


class Stub(BaseHTTPRequestHandler):
    """Just enough of /api/v1/query, /api/v1/query_range and /api/v2/alerts; it keeps what it was asked."""

    asked: list[tuple[str, dict[str, str]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query))
        self.asked.append((url.path, params))
        body: Any
        if url.path == "/api/v1/query":
            expr = params["query"]
            if expr.startswith("sum by (account)"):
                result = [{"metric": {"account": "physics"}, "value": [0, "12.5"]}]
            else:
                result = [{"metric": {}, "value": [0, VALUES[expr]]}] if expr in VALUES else []
            body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        elif url.path == "/api/v1/query_range":
            values = [[i, str(v)] for i, v in enumerate([10, 40, 80, 55])]
            body = {"status": "success", "data": {"result": [{"metric": {}, "values": values}]}}
        elif url.path == "/api/v2/alerts":
            body = ALERTS
        elif url.path == "/broken/api/v2/alerts":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>not json")
            return
        else:
            self.send_error(500, "no such thing")
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stub() -> Iterator[str]:
    Stub.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_queries_are_the_dashboards() -> None:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    stats = [e for e in exprs if "$__range" not in e and e != overview.UTILISATION]
    assert stats == [expr for _, _, expr in overview.PANELS]
    assert overview.UTILISATION in exprs
    assert overview.ENERGY.format(range="$__range") in exprs


def test_panels_energy_and_alerts_from_the_stub(stub: str) -> None:
    panels = overview.fetch_panels(stub)
    assert [(p.title, p.text()) for p in panels] == [
        ("GPUs healthy", "7"),
        ("GPUs", "8"),
        ("GPU power", "2.5 kW"),
        ("Hottest GPU", "81 °C"),
        ("Active jobs", "3"),
    ]
    assert overview.fetch_utilisation(stub, now=1_800_000_000.0) == [10.0, 40.0, 80.0, 55.0]
    path, params = Stub.asked[-1]
    assert path == "/api/v1/query_range" and params["start"] == "1799998200" and params["step"] == "30"
    assert overview.fetch_energy(stub, seconds_today=3 * 3600 + 1) == {"physics": 12.5}
    assert Stub.asked[-1][1]["query"].endswith("[4h:1h])) / 3.6e6")
    (alert,) = overview.fetch_alerts(stub)
    assert (alert.name, alert.severity, alert.job, alert.user, alert.account) == (
        "GpuTemperatureHigh",
        "P1",
        "4242",
        "ada",
        "physics",
    )
    assert alert.since == "2026-12-01 03:00:00"
    assert Stub.asked[-1] == ("/api/v2/alerts", {"active": "true", "silenced": "false", "inhibited": "false"})


def test_what_cannot_be_read_is_one_line(stub: str) -> None:
    with pytest.raises(overview.FetchError) as exc:
        overview.fetch_alerts(stub + "/broken")
    assert str(exc.value) == f"{stub}/broken/api/v2/alerts: answer is not JSON"
    with pytest.raises(overview.FetchError) as exc:
        overview.fetch_panels(stub + "/nothing")
    assert str(exc.value) == f"{stub}/nothing/api/v1/query: HTTP 500 no such thing"
    with pytest.raises(overview.FetchError, match="not an http:// or https:// URL"):
        overview.fetch_alerts("file:///etc/passwd")
    closed = stub.rsplit(":", 1)[0] + ":1"  # nothing listens on port 1 of 127.0.0.1
    with pytest.raises(overview.FetchError, match=r"^http://127\.0\.0\.1:1/api/v2/alerts: cannot connect: "):
        overview.fetch_alerts(closed)


def test_the_screen_shows_panels_and_alerts(
    stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_VM_URL", stub)
    monkeypatch.setenv("VIGIL_ALERTMANAGER_URL", stub + "/broken")
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        seen["broken"] = app.screen.query_one("#result", ResultLine).lines
        app.screen.query_one("#am", Input).value = stub
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).text
        seen["panels"] = str(app.screen.query_one("#panels").render())
        seen["spark"] = list(app.screen.query_one("#util", Sparkline).data or [])
        table = app.screen.query_one("#alerts", DataTable)
        seen["alerts"] = [table.get_row_at(i) for i in range(table.row_count)]

    drive(tmp_path / "home", scenario, start="overview")
    assert seen["broken"] == [f"FAIL: {stub}/broken/api/v2/alerts: answer is not JSON"]
    assert seen["result"].endswith("1 alerts firing")
    assert seen["panels"].startswith("GPUs healthy 7   GPUs 8   GPU power 2.5 kW")
    assert seen["spark"] == [10.0, 40.0, 80.0, 55.0]
    assert seen["alerts"] == [
        ["P1", "GpuTemperatureHigh", "gpu01:9400", "4242", "ada", "physics", "2026-12-01 03:00:00"]
    ]
    assert not (tmp_path / "home" / "audit").exists()  # reading the cluster is not an audited action
