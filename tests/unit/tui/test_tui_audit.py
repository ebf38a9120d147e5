"""The Audit screen over a real log: records from real ops calls, filters, verify, and a tampered log."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_helpers import Signed, audit_lines, cli_fail_line, drive, settle

from vigil.installer import ops
from vigil.installer.audit.witness import witness_line
from vigil.installer.cli import main
from vigil.tui import VigilApp
from vigil.tui.widgets import ResultLine


def rows(app: VigilApp) -> list[list[str]]:
    table = app.screen.query_one("#records", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


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


def witness_file(home: Path, path: Path) -> Path:
    """The log receiver's file for this host: each checkpoint made so far as its syslog line, among
    another program's lines."""
    lines = ["2026-11-02T09:59:01.000000+00:00 admin cron[77]: (root) CMD (true)"]
    for raw in (home / "audit" / "checkpoints.jsonl").read_text().splitlines():
        cp = json.loads(raw)
        lines.append(f"2026-11-02T10:00:00.000000+00:00 admin vigil-audit[4242]: {witness_line(cp)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_checkpoint_export_and_verify_with_a_witness(
    logged: Signed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_AUDIT_SYSLOG", "")  # no syslog here: the checkpoint says it was not sent
    witness = witness_file(logged.home, logged.tmp / "admin.log")
    out, bad = logged.tmp / "audit-copy", logged.tmp / "forged.log"
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        seen["checkpoint"] = app.screen.query_one("#result", ResultLine).lines
        app.screen.query_one("#out", Input).value = str(out)
        await pilot.press("ctrl+o")
        await settle(app, pilot)
        seen["export"] = app.screen.query_one("#result", ResultLine).lines
        app.screen.query_one("#witness", Input).value = str(witness)
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        seen["verify"] = app.screen.query_one("#result", ResultLine).lines
        # the receiver's copy altered: a witnessed head that the log does not have
        text = witness.read_text().splitlines()
        cp = json.loads((logged.home / "audit" / "checkpoints.jsonl").read_text().splitlines()[0])
        forged = dict(cp, head="0" * 64)
        text[1] = text[1].replace(witness_line(cp), witness_line(forged))
        bad.write_text("\n".join(text) + "\n")
        app.screen.query_one("#witness", Input).value = str(bad)
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        seen["forged"] = app.screen.query_one("#result", ResultLine).lines

    drive(logged.home, scenario, start="audit")
    records = audit_lines(logged.home)
    # 2 records by the fixture, then audit.show (on open), audit.checkpoint, audit.export, 2 verifies
    assert [r["action"] for r in records[2:]] == [
        "audit.show", "audit.checkpoint", "audit.export", "audit.verify", "audit.verify",
    ]  # fmt: skip
    head = records[2]["hash"][:12]
    key = records[3]["details"]["key_id"]  # type: ignore[index]
    assert seen["checkpoint"] == [
        f"OK: audit: checkpoint over 3 records, head {head}, key {key}, "
        "not sent to syslog (no syslog socket ($VIGIL_AUDIT_SYSLOG is empty))"
    ]
    assert seen["export"] == [f"OK: audit: exported 4 records, 4 checkpoints to {out}"]
    assert sorted(p.name for p in out.iterdir()) == [
        "audit-key-id",
        "audit.pub",
        "checkpoints.jsonl",
        "log.jsonl",
    ]
    # the witness covers the two checkpoints made before it was written (over 1 and 2 records)
    assert seen["verify"] == [
        f"OK: audit: 5 records, 5 checkpoints, head {records[4]['hash'][:12]}; witnessed: 2 checkpoints, "
        "up to record 2 of 5 (later ones not witnessed yet)"
    ]
    assert records[5]["details"]["argv"] == ["audit", "verify", "--witness", str(witness)]  # type: ignore[index]
    assert seen["forged"][0].startswith(f"FAIL: audit: witness {bad} line 2: ")
    expected = cli_fail_line(capsys, "audit", "verify", "--witness", str(bad))
    assert seen["forged"] == [expected]


def test_the_count_says_when_it_was_read_and_a_bad_since_keeps_the_records(logged: Signed) -> None:
    """The header said "41 records" after verify had counted 42 (each action adds its own record): it
    says when it read them. A Since that is no time says so without emptying the table (it stayed
    empty until ctrl+r)."""
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        seen["opened"] = len(rows(app))
        seen["count"] = str(app.screen.query_one("#count").render())
        since = app.screen.query_one("#since", Input)
        since.value = "yesterday-ish"
        since.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        seen["bad_since"] = (len(rows(app)), app.screen.query_one("#result", ResultLine).text)

    drive(logged.home, scenario, start="audit")
    assert seen["opened"] == 2
    assert re.fullmatch(r"2 records, as read at \d\d:\d\d:\d\d", seen["count"].strip()), seen["count"]
    shown, result = seen["bad_since"]
    assert shown == 2 and result.startswith("FAIL: "), seen["bad_since"]
