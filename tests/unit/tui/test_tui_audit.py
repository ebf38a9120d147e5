"""The Audit screen over a real log: records from real ops calls, filters, verify, and a tampered log."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_helpers import Signed, audit_lines, drive, settle

from vigil.installer import ops
from vigil.installer.cli import main
from vigil.tui import VigilApp
from vigil.tui.widgets import ResultLine


def rows(app: VigilApp) -> list[list[object]]:
    table = app.screen.query_one("#records", DataTable)
    return [table.get_row_at(i) for i in range(table.row_count)]


@pytest.fixture
def logged(signed: Signed) -> Signed:
    """A log written by real actions: a verify through ops (as the TUI runs it) and a CLI usage error."""
    inv = ops.Invocation(home=signed.home, argv=["bundle", "verify"], operator="bob", action="bundle.verify")
    with ops.audited(inv):
        ops.verify_bundle(inv, signed.bundle, signed.trust)
    assert main(["bundle", "frobnicate"]) == 1
    return signed


def test_records_filter_and_verify(logged: Signed, capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)  # the screen reads the log when it opens
        seen["all"] = rows(app)
        app.screen.query_one("#action", Input).value = "bundle"
        app.screen.query_one("#action", Input).focus()
        await pilot.press("enter")
        await settle(app, pilot)
        seen["bundle"] = rows(app)
        seen["detail"] = str(app.screen.query_one("#detail").render())
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        seen["verify"] = app.screen.query_one("#result", ResultLine).lines

    drive(logged.home, scenario, start="audit")
    assert [(r[3], r[4]) for r in seen["all"]] == [("ok", "bundle.verify"), ("refused", "vigil.usage")]  # type: ignore[attr-defined]
    assert seen["all"][0][2] == "bob"  # type: ignore[index]
    assert [r[4] for r in seen["bundle"]] == ["bundle.verify"]  # type: ignore[attr-defined]
    assert '"manifest_sha256"' in str(seen["detail"]) and "bundle.verify ok" in str(seen["detail"])
    # the screen's own reads and the verify are recorded too, as `vigil audit show|verify` would be
    records = audit_lines(logged.home)
    assert [r["action"] for r in records] == [
        "bundle.verify",
        "vigil.usage",
        "audit.show",
        "audit.show",
        "audit.verify",
    ]
    assert records[3]["details"]["argv"] == ["audit", "show", "--action", "bundle"]  # type: ignore[index]
    assert records[3]["actor"]["operator"] == "alice"  # type: ignore[index]
    # the OK line is the CLI's, over the log as it was when the screen verified it (4 records then)
    head = records[3]["hash"][:12]  # type: ignore[index]
    assert seen["verify"] == [f"OK: audit: 4 records, 4 checkpoints, head {head}"]


def unprotect(path: object) -> None:
    chattr = shutil.which("chattr")
    if chattr:
        subprocess.run([chattr, "-a", str(path)], stderr=subprocess.DEVNULL, check=False)


def test_a_tampered_log_is_named_as_the_cli_names_it(
    logged: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    log = logged.home / "audit" / "log.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["outcome"] = "ok"  # hide the refusal
    unprotect(log)
    log.write_text(lines[0] + json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
    assert main(["audit", "verify"]) == 1
    expected = capsys.readouterr().err.splitlines()[0]
    assert expected == "FAIL: audit: record 2: hash mismatch (record edited)"
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        seen["verify"] = app.screen.query_one("#result", ResultLine).lines
        seen["classes"] = set(app.screen.query_one("#result", ResultLine).classes)

    drive(logged.home, scenario, start="audit")
    # verifying fails; and the record of that cannot be appended to a log found rewritten: both said
    assert seen["verify"][0] == expected  # type: ignore[index]
    assert "-fail" in seen["classes"]  # type: ignore[operator]
