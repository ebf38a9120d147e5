"""The Overview's reads against a stub VictoriaMetrics and Alertmanager on 127.0.0.1 (the lab tries the
real ones), and its queries held to the Grafana overview dashboard's."""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Sparkline
from tui_helpers import drive, settle

from tests.helpers.tls_site import make_site
from vigil.installer import pki
from vigil.installer.access import SiteAccess, site_access
from vigil.installer.cli import build_parser
from vigil.installer.pki import Issued
from vigil.tui import VigilApp, overview
from vigil.tui.screens import overview as screen
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
#: what the stub's Alertmanager says its version is: an escape and markup, shown as text
VERSION = "0.25.0\x1b[2J[red]x[/red]\nok   forged line"
ALERTS = [
    {
        "labels": {
            "alertname": "GpuTemperatureHigh",
            "severity": "P1",
            "instance": "gpu01:9400",
            "gpu": "2",
        },
        # a GPU alert names the jobs on the GPU in its annotations (vigil-gpu-alerts.yml)
        "annotations": {
            "summary": "GPU 2 on gpu01 runs hot (86 °C)",
            "hpc_job": "4242",
            "user": "ada",
            "account": "physics",
        },
        "startsAt": "2026-12-01T03:00:00.000Z",
        "status": {"state": "active"},
    }
]


class Stub(BaseHTTPRequestHandler):
    """Just enough of /api/v1/query, /api/v1/query_range and /api/v2/alerts; it keeps what it was asked."""

    asked: list[tuple[str, dict[str, str]]] = []
    logins: list[str | None] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query))
        self.asked.append((url.path, params))
        self.logins.append(self.headers.get("Authorization"))
        body: Any
        if url.path in ("/health", "/metrics"):
            text = b"OK" if url.path == "/health" else b'vm_free_disk_space_bytes{path="/d"} 2147483648\n'
            self.send_response(200)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        if url.path == "/api/v2/status":
            body = {"cluster": {"status": "disabled", "peers": []}, "versionInfo": {"version": VERSION}}
        elif url.path == "/api/v1/query":
            expr = params["query"]
            if expr == "max(timestamp(up))":
                result = [{"metric": {}, "value": [0, str(time.time() - 5)]}]
            elif expr.startswith("sum by (account)"):
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


def _serve(tls: Issued | None = None) -> Iterator[str]:
    Stub.asked, Stub.logins = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls.cert, tls.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def stub() -> Iterator[str]:
    yield from _serve()


@pytest.fixture
def tls_home(tmp_path: Path) -> Path:
    """A state root of a site deployed with TLS: the site CA, the API password."""
    home = tmp_path / "home"
    make_site(home)
    return home


@pytest.fixture
def tls_stub(tls_home: Path) -> Iterator[str]:
    """The stub over https, with a certificate for 127.0.0.1 from TLS_HOME's site CA."""
    yield from _serve(pki.issue(tls_home, "mon01", ips=["127.0.0.1"]))


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
        seen["replicas"] = str(app.screen.query_one("#replicas").render())
        seen["spark"] = list(app.screen.query_one("#util", Sparkline).data or [])
        table = app.screen.query_one("#alerts", DataTable)
        seen["alerts"] = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]

    drive(tmp_path / "home", scenario, start="overview")
    assert seen["broken"] == [f"FAIL: {stub}/broken/api/v2/alerts: answer is not JSON"]
    assert seen["result"].endswith("1 alert firing (P1 1)")
    assert seen["panels"].startswith("GPUs healthy 7   GPUs 8   GPU power 2.5 kW")
    assert seen["spark"] == [10.0, 40.0, 80.0, 55.0]
    vm_line, am_line = seen["replicas"].split("\n")
    assert re.fullmatch(
        rf"ok   VictoriaMetrics {re.escape(stub)}: ok; newest sample [5-9] s old; 2\.0 GiB free", vm_line
    )
    version = r"0.25.0\x1b[2J[red]x[/red]\x0aok   forged line"  # one line: the newline shown as \x0a
    assert am_line == f"ok   Alertmanager {stub}: ok; cluster disabled, 0 members seen; version {version}"
    assert seen["alerts"] == [
        ["P1", "GpuTemperatureHigh", "gpu01:9400", "4242", "ada", "physics", "2026-12-01 03:00:00"]
    ]
    assert not (tmp_path / "home" / "audit").exists()  # reading the cluster and the site is not audited


def test_a_tls_site_is_read_with_its_ca_and_login(tls_stub: str, tls_home: Path) -> None:
    access = site_access(tls_home)
    snap = screen.take_snapshot(tls_stub, tls_stub, access=access)
    assert snap.failures == []
    assert [p.text() for p in snap.panels][:2] == ["7", "8"] and len(snap.alerts) == 1
    # the panels (5 queries, a range, the energy), the alerts, and each replica asked for itself
    # (/health, /metrics, the newest sample; Alertmanager's status)
    assert len(Stub.logins) == 12 and set(Stub.logins) == {
        "Basic " + base64.b64encode(f"vigil-api:{access.password}".encode()).decode()
    }
    plain = screen.take_snapshot(tls_stub, tls_stub)  # no site CA: the server is not trusted
    assert plain.failures[0].startswith(
        f"FAIL: {tls_stub}/api/v1/query: TLS: the server's certificate is not trusted: "
    )
    assert len(Stub.logins) == 12  # and it was sent nothing


def test_the_defaults_take_the_sites_scheme(tls_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VIGIL_VM_URL", raising=False)
    monkeypatch.delenv("VIGIL_ALERTMANAGER_URL", raising=False)
    assert screen.default_urls(SiteAccess()) == ("http://198.18.0.10:8428", "http://198.18.0.10:9093")
    assert screen.default_urls(site_access(tls_home)) == (
        "https://198.18.0.10:8428",
        "https://198.18.0.10:9093",
    )
    monkeypatch.setenv("VIGIL_VM_URL", "https://vm.example:8428")
    monkeypatch.setenv("VIGIL_ALERTMANAGER_URL", "http://am.example:9093")
    assert screen.default_urls(site_access(tls_home)) == ("https://vm.example:8428", "http://am.example:9093")


def test_the_screen_follows_a_deploy_to_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab's default URLs become https once a deploy has made the site CA and the login, and the
    reads use them; an operator's own URL is left as typed."""
    monkeypatch.delenv("VIGIL_VM_URL", raising=False)
    monkeypatch.delenv("VIGIL_ALERTMANAGER_URL", raising=False)
    home = tmp_path / "home"
    reads: list[tuple[str, str, SiteAccess | None]] = []

    def fake(
        vm_url: str,
        am_url: str,
        now: Any = None,
        *,
        access: SiteAccess | None = None,
        metrics_key: Any = None,
    ) -> Any:
        reads.append((vm_url, am_url, access))
        return screen.Snapshot()

    monkeypatch.setattr(screen, "take_snapshot", fake)
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        seen["before"] = app.screen.query_one("#vm", Input).value
        make_site(home)
        seen["access"] = site_access(home)
        app.screen.query_one("#am", Input).value = "https://am.example:9093"
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["after"] = (app.screen.query_one("#vm", Input).value, app.screen.query_one("#am", Input).value)
        (home / "secrets" / "api.password").chmod(0o644)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["refused"] = app.screen.query_one("#result", ResultLine).lines

    drive(home, scenario, start="overview")
    assert seen["before"] == "http://198.18.0.10:8428"
    assert seen["after"] == ("https://198.18.0.10:8428", "https://am.example:9093")
    assert reads[0][2] == SiteAccess()
    assert reads[-1] == (*seen["after"], seen["access"]) and seen["access"].tls
    assert len(seen["refused"]) == 1 and seen["refused"][0].startswith(f"FAIL: {home}/secrets/api.password: ")
    assert "chmod 600 it" in seen["refused"][0]


def _explained(job: str) -> dict[str, Any]:
    """What explain_job_op returns for JOB, its account hostile (an escape and a forged line)."""
    gpu = {
        "instance": "gpu01",
        "gpu": "2",
        "gpu_instance": None,
        "profile": None,
        "uuid": "GPU-2",
        "model": "NVIDIA H100",
        "peak_temperature_c": 86.0,
        "ecc_single_bit": 0,
        "ecc_double_bit": 0,
        "row_remap_failure": False,
        "nvlink_crc_errors": 0,
        "xids": [],
        "throttle_reasons": ["hardware thermal slowdown"],
        "alerts": [{"alert": "GpuTemperatureHigh", "severity": "P1", "first_fired": "2026-12-01T03:00:00Z"}],
        "before": {
            "days": 7,
            "ecc_single_bit": 0,
            "ecc_single_bit_by_day": [0] * 7,
            "xids": [],
            "earlier_jobs_hit_by_gpu_errors": [],
        },
    }
    return {
        "job": job,
        "user": ["ada"],
        "account": ["phys\x1b[2J\nVERDICT: forged"],
        "partition": ["gpu"],
        "nodes": ["gpu01"],
        "first_sample": "2026-12-01T02:00:00Z",
        "last_sample": "2026-12-01T03:10:00Z",
        "state": "RUNNING (its GPUs still report it; Slurm's accounting not given)",
        "device_hours": 1.1667,
        "gpu_energy_kwh": 0.5,
        "failed": False,
        "failed_because": None,
        "gpus": [gpu],
        "verdicts": ["GPU 2 on gpu01: clocks cut by hardware thermal slowdown"],
        "runbooks": ["GPU 2 on gpu01: check gpu01's power and cooling: docs/runbooks/GpuClocksThrottled.md"],
        "source": {"seconds": 0.1, "victoriametrics": "stub"},
    }


def explaining(stub: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Home reading the stub, and `vigil explain job` answering for any job: the (job, vm) asked."""
    monkeypatch.setenv("VIGIL_VM_URL", stub)
    monkeypatch.setenv("VIGIL_ALERTMANAGER_URL", stub)
    asked: list[tuple[str, Any]] = []

    def explain(inv: Any, job: str, *, vm: Any = None, **_: Any) -> dict[str, Any]:
        asked.append((job, vm))
        inv.object = f"job {job}"
        return _explained(job)

    monkeypatch.setattr(screen.ops, "explain_job_op", explain)
    return asked


def test_enter_on_an_alert_explains_its_job(
    stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alert names job 4242 (in its annotations): enter opens the explanation, an audited action,
    its account shown as text on one line."""
    asked = explaining(stub, monkeypatch)
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        app.screen.query_one("#alerts", DataTable).focus()
        await pilot.press("enter")
        await settle(app, pilot)
        seen["screen"] = type(app.screen).__name__
        seen["text"] = str(app.screen.query_one("#explanation").render())
        await pilot.press("escape")
        await settle(app, pilot)
        seen["after"] = type(app.screen).__name__

    drive(tmp_path / "home", scenario, start="overview")
    assert asked == [("4242", stub)]
    assert seen["screen"] == "ExplainScreen" and seen["after"] == "OverviewScreen"
    lines = seen["text"].split("\n")
    assert lines[0].startswith("job 4242: user ada, account phys\\x1b[2J\\x0aVERDICT: forged, partition gpu")
    assert [x for x in lines if x.startswith("VERDICT")] == [
        "VERDICT: GPU 2 on gpu01: clocks cut by hardware thermal slowdown"
    ]
    records = (tmp_path / "home" / "audit").glob("*")
    assert any("explain.job" in p.read_text(errors="replace") for p in records if p.is_file())


def test_a_typed_job_id_is_explained_and_an_empty_one_asked_for(
    stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job search: a job id typed in "Explain job" opens its explanation, alerting or not (the
    same audited action as enter on an alert); enter on an empty box asks for an id and reads
    nothing; what the box refuses to take (a PromQL injection) never reaches the store."""
    from textual.widgets import Input

    asked = explaining(stub, monkeypatch)
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        box = app.screen.query_one("#job", Input)
        box.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        seen["empty"] = str(app.screen.query_one("#result").render())
        await pilot.press(*'7"}or{x', "enter")  # typed: only 7 and the letters are taken
        await settle(app, pilot)
        seen["typed"] = box.value
        seen["screen"] = type(app.screen).__name__
        seen["text"] = str(app.screen.query_one("#explanation").render())
        await pilot.press("escape")
        await settle(app, pilot)

    drive(tmp_path / "home", scenario, start="overview")
    assert "type a job id" in seen["empty"]
    assert seen["typed"] == "7orx" and asked == [("7orx", stub)]
    assert seen["screen"] == "ExplainScreen" and seen["text"].startswith("job 7orx: user ada")
    records = (tmp_path / "home" / "audit").glob("*")
    assert any("explain.job" in p.read_text(errors="replace") for p in records if p.is_file())


def test_home_says_the_sites_state_and_the_alerts_by_severity(
    signed: Any, stub: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console opens on Home: the trust root, the bundles, the last deploy and the audit trail's
    last verify, read from this host; then the cluster's alerts counted by severity."""
    from vigil.installer import ops
    from vigil.installer.cli import main

    monkeypatch.setenv("VIGIL_VM_URL", stub)
    monkeypatch.setenv("VIGIL_ALERTMANAGER_URL", stub)
    home = signed.home
    before = ops.site_summary(home)
    assert before[0].startswith("trust root: none usable (") and before[1] == "bundles: none imported"
    assert before[2:] == ["last deploy: none recorded", "audit trail: never verified here (Audit, ctrl+y)"]
    assert main(["trust", "install", str(signed.trust)]) == 0
    assert main(["bundle", "import", str(signed.bundle)]) == 0
    inv = ops.Invocation(home=home, argv=["deploy"], action="deploy")
    with ops.audited(inv):
        inv.object = "/site/lab\x1b[2J"  # a host's file name: shown as text
        inv.details.update(bundle_version=3, check=False)
    assert main(["audit", "verify"]) == 0
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        seen["mode"] = app.current_mode
        seen["site"] = str(app.screen.query_one("#site").render()).split("\n")
        seen["result"] = app.screen.query_one("#result", ResultLine).text

    drive(home, scenario, start="overview")
    assert seen["mode"] == "overview"
    # where `vigil tui` and the app open when not told
    import inspect

    from vigil.tui import make_app

    assert inspect.signature(make_app).parameters["start"].default == "overview"
    assert build_parser().parse_args(["tui"]).screen == "overview"
    trust, bundles, last, audit = seen["site"]
    assert trust.startswith("trust root v1: 1 of 1 key(s), ") and trust.endswith("trust/root.json"), trust
    assert bundles == "bundles: v3 in the store; the last change ran v3"
    assert last.startswith("last deploy: ok at ") and last.endswith(", inventory /site/lab\\x1b[2J"), last
    assert audit.startswith("audit trail: last verified ") and audit.endswith(", ok, 3 records"), audit
    assert seen["result"].endswith("1 alert firing (P1 1)")
