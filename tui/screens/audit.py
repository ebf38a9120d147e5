"""Audit: the log's records with filters, and the verification of its chain and checkpoints."""

from __future__ import annotations

import json
import time
from pathlib import Path
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
from vigil.tui.untrusted import plain
from vigil.tui.widgets import ResultLine, to_ui


def verified_line(summary: Summary, witnessed: bool = False) -> str:
    """``vigil audit verify``'s OK line (with ``--witness``: what the witness covers)."""
    line = (
        f"OK: audit: {summary.records} records, {summary.checkpoints} checkpoints, head {summary.head[:12]}"
    )
    if witnessed:
        line += f"; witnessed: {summary.witnessed} checkpoints, up to record {summary.witnessed_records}"
        if summary.witnessed_records < summary.records:
            line += f" of {summary.records} (later ones not witnessed yet)"
        elif summary.witnessed_records > summary.records:
            line += f", beyond this copy's {summary.records} (later records are not in it)"
    return line


def checkpoint_line(cp: dict[str, Any], unsent: str | None) -> str:
    """``vigil audit checkpoint``'s OK line."""
    sent = "sent to syslog" if unsent is None else f"not sent to syslog ({unsent})"
    head = cp["head"][:12]
    return f"OK: audit: checkpoint over {cp['count']} records, head {head}, key {cp['key_id']}, {sent}"


def exported_line(out: Path, summary: Summary) -> str:
    """``vigil audit export``'s OK line."""
    return f"OK: audit: exported {summary.records} records, {summary.checkpoints} checkpoints to {out}"


def witness_paths(text: str) -> list[Path]:
    """Witness files, comma-separated (``--witness`` each)."""
    return [Path(p.strip()).expanduser() for p in text.split(",") if p.strip()]


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
            "ctrl+y",
            "verify",
            "Verify",
            id="audit-verify",
            tooltip="Verify the chain and the checkpoints (and the witness files given)",
        ),
        Binding(
            "ctrl+t",
            "checkpoint",
            "Checkpoint",
            id="audit-checkpoint",
            tooltip="Sign the head now, send it to syslog",
        ),
        Binding("ctrl+o", "export", "Export", id="audit-export", tooltip="Copy the log for off-host keeping"),
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
            yield Label("Witness")
            yield Input(placeholder="receiver's log file(s), comma-separated", id="witness", compact=True)
            yield Label("Out")
            yield Input(placeholder="export directory (new)", id="out", compact=True)
        with Horizontal(classes="row"):
            yield Button("Reload", id="reload", compact=True, variant="primary")
            yield Button("Verify", id="verify", compact=True)
            yield Button("Checkpoint", id="checkpoint", compact=True)
            yield Button("Export", id="export", compact=True)
            yield Label("", id="count")
        yield ResultLine(id="result")
        yield DataTable(id="records", cursor_type="row", zebra_stripes=True)
        yield Static("", id="detail", markup=False)

    def on_mount(self) -> None:
        self.query_one("#records", DataTable).add_columns(
            "seq", "time (UTC)", "who", "outcome", "action", "object"
        )
        self.action_reload()

    @on(Input.Submitted, "#action, #since")
    @on(Button.Pressed, "#reload")
    def action_reload(self) -> None:
        action = self.query_one("#action", Input).value.strip() or None
        since = self.query_one("#since", Input).value.strip() or None
        self._load(action, since)

    @on(Input.Submitted, "#witness")
    @on(Button.Pressed, "#verify")
    def action_verify(self) -> None:
        self.query_one("#result", ResultLine).info("verifying …")
        self._verify(witness_paths(self.query_one("#witness", Input).value))

    @on(Button.Pressed, "#checkpoint")
    def action_checkpoint(self) -> None:
        self.query_one("#result", ResultLine).info("signing a checkpoint …")
        self._checkpoint()

    @on(Input.Submitted, "#out")
    @on(Button.Pressed, "#export")
    def action_export(self) -> None:
        out = self.query_one("#out", Input).value.strip()
        if not out:
            self.query_one("#result", ResultLine).fail(["FAIL: --out: give the directory to create"])
            return
        self.query_one("#result", ResultLine).info(f"exporting to {out} …")
        self._export(Path(out).expanduser())

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
    def _verify(self, witness: list[Path]) -> None:
        argv = ["audit", "verify", *[a for w in witness for a in ("--witness", str(w))]]
        inv = self.session.invocation("audit.verify", argv)
        outcome = perform(inv, lambda inv: ops.audit_verify(inv, witness=witness))
        to_ui(self.app, self._verified, outcome, bool(witness))

    @work(thread=True, exclusive=True, group="audit-write", exit_on_error=False)
    def _checkpoint(self) -> None:
        inv = self.session.invocation("audit.checkpoint", ["audit", "checkpoint"])
        outcome = perform(inv, ops.audit_checkpoint)
        to_ui(self.app, self._checkpointed, outcome)

    @work(thread=True, exclusive=True, group="audit-write", exit_on_error=False)
    def _export(self, out: Path) -> None:
        inv = self.session.invocation("audit.export", ["audit", "export", "--out", str(out)])
        outcome = perform(inv, lambda inv: ops.audit_export(inv, out))
        to_ui(self.app, self._exported, outcome)

    def _loaded(self, outcome: Outcome[list[dict[str, Any]]]) -> None:
        table = self.query_one("#records", DataTable)
        if outcome.value is None:  # a bad filter: said, and the records read before stay shown
            self.query_one("#result", ResultLine).fail(outcome.failures)
            return
        table.clear()
        self.records = outcome.value
        for record in self.records:
            # who, object and reason come from whoever ran an action: a file's name, an --operator
            table.add_row(*map(plain, record_row(record)), key=str(record["seq"]))
        if self.records:
            table.move_cursor(row=len(self.records) - 1)
        # what the table holds as read then, not the log's size now: each action adds its own record
        # (verify counts the log itself); ctrl+r reads again
        self.query_one("#count", Label).update(
            plain(f"  {len(self.records)} records, as read at {time.strftime('%H:%M:%S')}")
        )

    def _verified(self, outcome: Outcome[Summary], witnessed: bool) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(verified_line(outcome.value, witnessed))

    def _checkpointed(self, outcome: Outcome[tuple[dict[str, Any], str | None]]) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(checkpoint_line(*outcome.value))

    def _exported(self, outcome: Outcome[tuple[Path, Summary]]) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(exported_line(*outcome.value))

    @on(DataTable.RowHighlighted, "#records")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        index = event.cursor_row
        if 0 <= index < len(self.records):
            self.query_one("#detail", Static).update(plain(record_detail(self.records[index]), newlines=True))
