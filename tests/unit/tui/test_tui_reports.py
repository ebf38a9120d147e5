"""The Reports screen over a real report store: generate (from a stub VictoriaMetrics on 127.0.0.1,
and unreachable), list, show, verify (and a one-character edit caught in the CLI's words), export."""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_helpers import audit_lines, cli_fail_line, drive, settle

from vigil.installer.reports import ReportStore, Usage, parse_period, usage_document
from vigil.tui import VigilApp
from vigil.tui.widgets import ResultLine


def sample_doc() -> dict[str, Any]:
    """A usage document as tests/unit/reports makes one, without VictoriaMetrics."""
    usage = Usage(parse_period("2025-10"))
    usage.gpu_hours[("physics", "alice")] = 8.0
    usage.joules[("physics", "alice")] = 8 * 350 * 3600
    usage.jobs[("physics", "alice")] = {"101"}
    usage.raw_hours = 744
    return usage_document(usage, vm_url="http://127.0.0.1:8428")


class FakeVM(BaseHTTPRequestHandler):
    """Just enough of VictoriaMetrics for a usage report: raw DCGM data in every hour, no recording
    rules, one account and user."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length", "0"))
        params = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        path, expr = urllib.parse.urlsplit(self.path).path, params.get("query", "")
        result: list[dict[str, Any]] = []
        if path == "/api/v1/query_range" and not expr.startswith("count(last_over_time(cluster:"):
            start, end, step = int(params["start"]), int(params["end"]), int(params["step"].rstrip("s"))
            result = [{"metric": {}, "values": [[t, "1"] for t in range(start, end + 1, step)]}]
        elif path == "/api/v1/query" and not expr.startswith("count(count_over_time"):
            labels = {"account": "physics", "user": "alice", "hpc_job": "101"}
            result = [{"metric": labels, "value": [int(params["time"]), "2"]}]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())


@pytest.fixture
def vm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeVM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VIGIL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VIGIL_VM_URL", raising=False)
    return tmp_path / "home"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def result(app: VigilApp) -> ResultLine:
    return app.screen.query_one("#result", ResultLine)


def test_list_show_verify_export_and_an_edit(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = ReportStore(home).add(sample_doc(), generated_at="2025-11-01T00:00:00Z")
    seen: dict[str, Any] = {}
    out = tmp_path / "export"

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f8")
        await settle(app, pilot)
        table = app.screen.query_one("#reports", DataTable)
        seen["rows"] = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        seen["file"] = app.screen.query_one("#file", Input).value
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        seen["detail"] = str(app.screen.query_one("#detail").render())
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        seen["verify"] = result(app).lines
        app.screen.query_one("#out", Input).value = str(out)
        await pilot.press("ctrl+o")
        await settle(app, pilot)
        seen["export"] = result(app).lines
        # one character of the stored report changed: verify says so, as the CLI does
        path = stored.json_path
        os.chmod(path, 0o644)
        path.write_bytes(path.read_bytes().replace(b'"physics"', b'"physica"', 1))
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        seen["tampered"] = result(app).lines
        seen["classes"] = set(result(app).classes)

    drive(home, scenario)
    assert seen["rows"] == [[stored.id, "usage", "2025-10", "2025-11-01T00:00:00Z", seen["rows"][0][4]]]
    assert seen["file"] == str(stored.json_path)
    assert '"account": "physics"' in seen["detail"]
    assert seen["verify"] == [
        f"OK: {stored.json_path}: usage report 2025-10, sha256 {stored.sha256}, "
        f"signed by key {seen['rows'][0][4]}; report.csv, report.pdf bound to it"
    ]
    assert seen["export"][0].startswith(f"OK: report {stored.id}: exported to {out} (verify: minisign")
    assert sorted(p.name for p in out.iterdir()) == [
        "README.txt", "report.csv", "report.csv.minisig", "report.json", "report.json.minisig",
        "report.pdf", "report.pdf.minisig", "report.pub",
    ]  # fmt: skip
    expected = cli_fail_line(capsys, "report", "verify", str(stored.json_path))
    assert seen["tampered"] == [expected] and "-fail" in seen["classes"]
    actions = [r["action"] for r in audit_lines(home)]
    assert actions[:5] == ["report.list", "report.show", "report.verify", "report.export", "report.verify"]
    records = audit_lines(home)
    assert records[3]["details"]["argv"] == ["report", "export", stored.id, "--out", str(out)]  # type: ignore[index]
    assert records[4]["outcome"] == "failed" or records[4]["outcome"] == "refused"


def test_generate_usage_from_victoriametrics(home: Path, vm: str) -> None:
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f8")
        await settle(app, pilot)
        app.screen.query_one("#period", Input).value = "2025-10"
        app.screen.query_one("#vm", Input).value = vm
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        await settle(app, pilot)  # then the list is read again
        seen["result"] = result(app).text
        table = app.screen.query_one("#reports", DataTable)
        seen["rows"] = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        seen["detail"] = str(app.screen.query_one("#detail").render())

    drive(home, scenario)
    (entry,) = ReportStore(home).entries()
    assert seen["result"].startswith(
        f"OK: usage report 2025-10: sha256 {entry['sha256']}, stored, signed by key "
    )
    assert [r[:3] for r in seen["rows"]] == [[entry["sha256"][:12], "usage", "2025-10"]]
    assert '"user": "alice"' in seen["detail"]
    usage = next(r for r in audit_lines(home) if r["action"] == "report.usage")
    assert usage["outcome"] == "ok"
    assert usage["details"]["argv"] == ["report", "usage", "--period", "2025-10", "--vm", vm]  # type: ignore[index]
    assert usage["details"]["vm"] == vm  # type: ignore[index]


def test_an_unreachable_victoriametrics_in_the_cli_words(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("VIGIL_VM_URL", url)  # the default, as the CLI takes it
    expected = cli_fail_line(capsys, "report", "usage", "--period", "2025-10")
    cli_record = audit_lines(home)[-1]
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f8")
        await settle(app, pilot)
        seen["vm"] = app.screen.query_one("#vm", Input).value
        app.screen.query_one("#period", Input).value = "2025-10"
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["result"] = result(app).lines

    drive(home, scenario)
    assert seen["vm"] == url
    assert expected.startswith(f"FAIL: VictoriaMetrics {url}: unreachable")
    assert seen["result"] == [expected]
    record = audit_lines(home)[-1]
    for field in ("action", "object", "outcome", "reason"):
        assert record[field] == cli_record[field], field
    assert record["details"]["argv"] == ["report", "usage", "--period", "2025-10"]  # type: ignore[index]
    assert not (home / "reports" / "objects").exists() or not any((home / "reports" / "objects").iterdir())


def test_missing_fields_are_named_as_the_console_shows_them(home: Path) -> None:
    """An empty Period was refused naming --from/--to, which the console does not offer."""
    seen: dict[str, str] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f8")
        await settle(app, pilot)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["usage"] = result(app).text
        await pilot.press("ctrl+n")
        await settle(app, pilot)
        seen["energy"] = result(app).text

    drive(home, scenario)
    assert seen == {
        "usage": "FAIL: usage report: give the Period (YYYY-MM, YYYY-Qn or YYYY)",
        "energy": "FAIL: energy report: give the Year (YYYY) and the Site file (site.yaml)",
    }
    assert not ReportStore(home).entries()
