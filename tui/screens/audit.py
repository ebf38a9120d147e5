"""Audit: the log's records with filters, and the verification of its chain and checkpoints."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Button, DataTable, Input, Label, Static

from vigil.installer import ops
from vigil.installer.audit import Summary
from vigil.tui.screens._base import VigilScreen
from vigil.tui.session import Outcome, perform
from vigil.tui.widgets import ResultLine, to_ui


def verified_line(summary: Summary) -> str:
    """``vigil audit verify``'s OK line."""
    return (
        f"OK: audit: {summary.records} records, {summary.checkpoints} checkpoints, head {summary.head[:12]}"
    )


def record_row(record: dict[str, Any]) -> tuple[str, ...]:
    actor = record["actor"]
    who = actor["operator"] or actor["user"]
    what = record["object"] + (f" -- {record['reason']}" if record["reason"] else "")
    return (
        str(record["seq"]),
        record["time"][:19].replace("T", " "),
        who,
        record["outcome"],
        record["action"],
        what,
    )


def record_detail(record: dict[str, Any]) -> str:
    actor = record["actor"]
    who = actor["user"] + (f" ({actor['operator']})" if actor["operator"] else "") + f" uid {actor['uid']}"
    lines = [
        f"#{record['seq']} {record['time']} {who} on {record['host']}: {record['action']} {record['outcome']}"
    ]
    if record["reason"]:
        lines.append(f"reason: {record['reason']}")
    lines.append("details: " + json.dumps(record["details"], sort_keys=True, ensure_ascii=False))
    return "\n".join(lines)


class AuditScreen(VigilScreen):
    MODE = "audit"
    LABEL = "Audit"
    HELP = "Browse the audit log and verify its hash chain and signed checkpoints"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+r", "reload", "Reload", id="audit-show", tooltip="Read the records again, with the filters"
        ),
        Binding(
            "ctrl+y", "verify", "Verify", id="audit-verify", tooltip="Verify the chain and the checkpoints"
        ),
    ]

    DEFAULT_CSS = """
    AuditScreen .row { height: 1; margin: 0 1; }
    AuditScreen .row Label { width: 8; }
    AuditScreen .row Input { width: 1fr; margin-right: 1; }
    AuditScreen .row Button { margin-left: 1; }
    AuditScreen .row #count { width: auto; }
    AuditScreen #records { height: 1fr; margin: 0 1; }
    AuditScreen #detail { height: 3; margin: 0 1; color: $text-muted; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[dict[str, Any]] = []

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Action")
            yield Input(placeholder="prefix, e.g. bundle", id="action", compact=True)
            yield Label("Since")
            yield Input(placeholder="ISO 8601, e.g. 2026-12-01", id="since", compact=True)
        with Horizontal(classes="row"):
            yield Button("Reload", id="reload", compact=True, variant="primary")
            yield Button("Verify", id="verify", compact=True)
            yield Label("", id="count")
        yield ResultLine(id="result")
        yield DataTable(id="records", cursor_type="row", zebra_stripes=True)
        yield Static("", id="detail", markup=False)

    def on_mount(self) -> None:
        self.query_one("#records", DataTable).add_columns(
            "seq", "time (UTC)", "who", "outcome", "action", "object"
        )
        self.action_reload()

    @on(Input.Submitted)
    @on(Button.Pressed, "#reload")
    def action_reload(self) -> None:
        action = self.query_one("#action", Input).value.strip() or None
        since = self.query_one("#since", Input).value.strip() or None
        self._load(action, since)

    @on(Button.Pressed, "#verify")
    def action_verify(self) -> None:
        self.query_one("#result", ResultLine).info("verifying …")
        self._verify()

    @work(thread=True, exclusive=True, group="audit-read", exit_on_error=False)
    def _load(self, action: str | None, since: str | None) -> None:
        argv = [
            "audit",
            "show",
            *(["--since", since] if since else []),
            *(["--action", action] if action else []),
        ]
        inv = self.session.invocation("audit.show", argv)
        outcome = perform(inv, lambda inv: list(ops.audit_records(inv, since=since, action=action)))
        to_ui(self.app, self._loaded, outcome)

    @work(thread=True, exclusive=True, group="audit-verify", exit_on_error=False)
    def _verify(self) -> None:
        inv = self.session.invocation("audit.verify", ["audit", "verify"])
        outcome = perform(inv, lambda inv: ops.audit_verify(inv))
        to_ui(self.app, self._verified, outcome)

    def _loaded(self, outcome: Outcome[list[dict[str, Any]]]) -> None:
        table = self.query_one("#records", DataTable)
        table.clear()
        if outcome.value is None:
            self.query_one("#result", ResultLine).fail(outcome.failures)
            self.records = []
            return
        self.records = outcome.value
        for record in self.records:
            table.add_row(*record_row(record), key=str(record["seq"]))
        if self.records:
            table.move_cursor(row=len(self.records) - 1)
        self.query_one("#count", Label).update(f"  {len(self.records)} records")

    def _verified(self, outcome: Outcome[Summary]) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(verified_line(outcome.value))

    @on(DataTable.RowHighlighted, "#records")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        index = event.cursor_row
        if 0 <= index < len(self.records):
            self.query_one("#detail", Static).update(record_detail(self.records[index]))
