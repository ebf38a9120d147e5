"""Reports: generate usage and energy reports (read from VictoriaMetrics, signed and stored), list
the stored ones, show, verify and export one — each the ``vigil report`` command of the same name,
with its audit record and its ``OK:`` or ``FAIL:`` line.

VictoriaMetrics is found as the CLI finds it: the VM field starts as ``$VIGIL_VM_URL``; left empty,
the monitoring host of the last successful deploy recorded in the audit log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Checkbox, DataTable, Input, Label, Static

from vigil.basics.errors import VigilError
from vigil.installer import ops
from vigil.installer.reports import ReportStore, Stored, Verified
from vigil.tui.screens._base import VigilScreen
from vigil.tui.session import Outcome, perform
from vigil.tui.untrusted import plain
from vigil.tui.widgets import ResultLine, to_ui

VM_ENV = "VIGIL_VM_URL"


def generated_line(gen: ops.Generated) -> str:
    """``vigil report usage|energy``'s OK line."""
    s = gen.stored
    state = "stored" if s.new else "already stored (same data)"
    return f"OK: {s.kind} report {s.label}: sha256 {s.sha256}, {state}, signed by key {gen.key_id}"


def verified_line(v: Verified) -> str:
    """``vigil report verify``'s OK line."""
    return (
        f"OK: {v.path}: {v.kind} report {v.label}, sha256 {v.sha256}, signed by key {v.key_id}; "
        f"{v.renderings_note}"
    )


def exported_line(ident: str, out: Path) -> str:
    """``vigil report export``'s OK line."""
    return (
        f"OK: report {ident}: exported to {out} "
        "(verify: minisign -V -m report.json -x report.json.minisig -p report.pub)"
    )


def entry_row(e: dict[str, Any]) -> tuple[str, ...]:
    """A line of ``vigil report list``."""
    return (str(e["sha256"])[:12], str(e["kind"]), str(e["period"]), str(e["generated"]), str(e["key_id"]))


class ReportsScreen(VigilScreen):
    MODE = "reports"
    LABEL = "Reports"
    HELP = "Generate, list, show, verify and export the signed usage and energy reports"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+g", "usage", "Usage", id="report-usage", tooltip="Generate the usage report for the period"
        ),
        Binding(
            "ctrl+n",
            "energy",
            "Energy",
            id="report-energy",
            tooltip="Generate the energy report for the year",
        ),
        Binding("ctrl+r", "reload", "List", id="report-list", tooltip="List the stored reports again"),
        Binding("ctrl+t", "show", "Show", id="report-show", tooltip="Show the highlighted report's JSON"),
        Binding("ctrl+y", "verify", "Verify", id="report-verify", tooltip="Verify the file's signature"),
        Binding("ctrl+o", "export", "Export", id="report-export", tooltip="Export the highlighted report"),
    ]

    DEFAULT_CSS = """
    ReportsScreen .row { height: 1; margin: 0 1; }
    ReportsScreen .row Label { width: 8; }
    ReportsScreen .row Label.short { width: 8; margin-left: 1; }
    ReportsScreen .row Input { width: 1fr; }
    ReportsScreen .row #period, ReportsScreen .row #year { width: 10; }
    ReportsScreen .row Button { margin-right: 1; }
    ReportsScreen .row Checkbox { margin-left: 1; }
    ReportsScreen #reports { height: 1fr; min-height: 3; margin: 0 1; }
    ReportsScreen #detail-box { height: 1fr; min-height: 6; margin: 0 1; border-top: solid $panel; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: list[dict[str, Any]] = []

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Period")
            yield Input(placeholder="YYYY-MM, YYYY-Qn or YYYY", id="period", compact=True)
            yield Label("Account", classes="short")
            yield Input(placeholder="all", id="account", compact=True)
            yield Label("VM", classes="short")
            yield Input(os.environ.get(VM_ENV, ""), placeholder="from the last deploy", id="vm", compact=True)
        with Horizontal(classes="row"):
            yield Label("Year")
            yield Input(placeholder="YYYY", id="year", compact=True)
            yield Label("Site", classes="short")
            yield Input(placeholder="site.yaml", id="site", compact=True)
            yield Checkbox("strict", id="strict", compact=True)
        with Horizontal(classes="row"):
            yield Label("File")
            yield Input(placeholder="report.json to verify", id="file", compact=True)
            yield Label("Out", classes="short")
            yield Input(placeholder="export directory (new)", id="out", compact=True)
        with Horizontal(classes="row"):
            yield Button("Usage", id="usage", compact=True, variant="primary")
            yield Button("Energy", id="energy", compact=True, variant="primary")
            yield Button("List", id="reload", compact=True)
            yield Button("Show", id="show", compact=True)
            yield Button("Verify", id="verify", compact=True)
            yield Button("Export", id="export", compact=True)
        yield ResultLine(id="result")
        yield DataTable(id="reports", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="detail-box"):
            yield Static("", id="detail", markup=False)

    def on_mount(self) -> None:
        self.query_one("#reports", DataTable).add_columns("id", "kind", "period", "generated", "key")
        self.action_reload()

    # -- what was asked ------------------------------------------------------------------------
    def _value(self, name: str) -> str:
        return self.query_one(f"#{name}", Input).value.strip()

    def _vm(self) -> tuple[str | None, list[str]]:
        """The VictoriaMetrics URL to pass (None: the ops resolve it), and its part of the command line
        (none when it is the environment's default, as the CLI records it)."""
        vm = self._value("vm") or None
        return vm, ["--vm", vm] if vm and vm != os.environ.get(VM_ENV) else []

    def _fail(self, line: str) -> None:
        self.query_one("#result", ResultLine).fail([line])

    def _highlighted(self) -> dict[str, Any] | None:
        table = self.query_one("#reports", DataTable)
        index = table.cursor_row
        if not self.entries or not 0 <= index < len(self.entries):
            self._fail("FAIL: report: none chosen (list them with ctrl+r, choose one with the arrows)")
            return None
        return self.entries[index]

    # -- actions -------------------------------------------------------------------------------
    @on(Button.Pressed, "#usage")
    def action_usage(self) -> None:
        period = self._value("period")
        if not period:
            # the console's words: it has a Period box, not the CLI's --from/--to
            self._fail("FAIL: usage report: give the Period (YYYY-MM, YYYY-Qn or YYYY)")
            return
        account = self._value("account") or None
        vm, vm_argv = self._vm()
        argv = ["report", "usage", "--period", period, *(["--account", account] if account else []), *vm_argv]
        self.query_one("#result", ResultLine).info(f"reading usage for {period} …")
        self._generate(argv, lambda inv: ops.report_usage(inv, period=period, account=account, vm=vm))

    @on(Button.Pressed, "#energy")
    def action_energy(self) -> None:
        year, site = self._value("year"), self._value("site")
        if not year or not site:
            self._fail("FAIL: energy report: give the Year (YYYY) and the Site file (site.yaml)")
            return
        strict = self.query_one("#strict", Checkbox).value
        vm, vm_argv = self._vm()
        argv = [
            "report",
            "energy",
            "--year",
            year,
            "--site",
            site,
            *(["--strict"] if strict else []),
            *vm_argv,
        ]
        path = Path(site).expanduser()
        self.query_one("#result", ResultLine).info(f"reading energy for {year} …")
        self._generate(argv, lambda inv: ops.report_energy(inv, year=year, site=path, vm=vm, strict=strict))

    @on(Button.Pressed, "#reload")
    def action_reload(self) -> None:
        self._list()

    @on(DataTable.RowSelected, "#reports")
    @on(Button.Pressed, "#show")
    def action_show(self) -> None:
        if (entry := self._highlighted()) is not None:
            self._show(str(entry["sha256"]))

    @on(Input.Submitted, "#file")
    @on(Button.Pressed, "#verify")
    def action_verify(self) -> None:
        text = self._value("file")
        if not text:
            self._fail(
                "FAIL: report verify: give the report.json to verify (choose a report: its file is filled in)"
            )
            return
        self.query_one("#result", ResultLine).info("verifying …")
        self._verify(Path(text).expanduser())

    @on(Input.Submitted, "#out")
    @on(Button.Pressed, "#export")
    def action_export(self) -> None:
        out = self._value("out")
        if not out:
            self._fail("FAIL: --out: give the directory to create")
            return
        if (entry := self._highlighted()) is not None:
            self._export(str(entry["sha256"])[:12], Path(out).expanduser())

    # -- the work, on a thread -----------------------------------------------------------------
    @work(thread=True, exclusive=True, group="report-generate", exit_on_error=False)
    def _generate(self, argv: list[str], action: Any) -> None:
        action_name = f"report.{argv[1]}"
        inv = self.session.invocation(action_name, argv, self._steps)
        outcome: Outcome[ops.Generated] = perform(inv, action)
        to_ui(self.app, self._generated, outcome)

    def _steps(self, event: ops.Event) -> None:
        if isinstance(event, ops.Step):
            to_ui(self.app, self.query_one("#result", ResultLine).info, f"{event.text} …")

    @work(thread=True, exclusive=True, group="report-read", exit_on_error=False)
    def _list(self) -> None:
        inv = self.session.invocation("report.list", ["report", "list"])
        to_ui(self.app, self._listed, perform(inv, ops.report_list))

    @work(thread=True, exclusive=True, group="report-read", exit_on_error=False)
    def _show(self, ident: str) -> None:
        inv = self.session.invocation("report.show", ["report", "show", ident[:12]])
        to_ui(self.app, self._shown, perform(inv, lambda inv: ops.report_show(inv, ident[:12])))

    @work(thread=True, exclusive=True, group="report-verify", exit_on_error=False)
    def _verify(self, file: Path) -> None:
        inv = self.session.invocation("report.verify", ["report", "verify", str(file)])
        to_ui(self.app, self._verified, perform(inv, lambda inv: ops.report_verify(inv, file)))

    @work(thread=True, exclusive=True, group="report-export", exit_on_error=False)
    def _export(self, ident: str, out: Path) -> None:
        inv = self.session.invocation("report.export", ["report", "export", ident, "--out", str(out)])
        outcome = perform(inv, lambda inv: ops.report_export(inv, ident, out))
        to_ui(self.app, self._exported, ident, outcome)

    # -- back on the UI thread -----------------------------------------------------------------
    def _generated(self, outcome: Outcome[ops.Generated]) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
            return
        result.ok(generated_line(outcome.value))
        doc = json.dumps(outcome.value.doc, indent=1, sort_keys=True)
        self.query_one("#detail", Static).update(plain(doc, newlines=True))
        self.query_one("#file", Input).value = str(outcome.value.stored.json_path)
        self._list()

    def _listed(self, outcome: Outcome[list[dict[str, Any]]]) -> None:
        table = self.query_one("#reports", DataTable)
        table.clear()
        if outcome.value is None:
            self.entries = []
            self.query_one("#result", ResultLine).fail(outcome.failures)
            return
        self.entries = outcome.value
        for n, e in enumerate(self.entries):
            table.add_row(*map(plain, entry_row(e)), key=str(n))
        if self.entries:
            table.move_cursor(row=len(self.entries) - 1)

    @on(DataTable.RowHighlighted, "#reports")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        """The highlighted report's stored file goes into the File field (what verify reads)."""
        if 0 <= event.cursor_row < len(self.entries):
            try:
                stored = ReportStore(self.session.home).find(str(self.entries[event.cursor_row]["sha256"]))
            except VigilError:
                return
            self.query_one("#file", Input).value = str(stored.json_path)

    def _shown(self, outcome: Outcome[tuple[Stored, bytes]]) -> None:
        if outcome.value is None:
            self.query_one("#result", ResultLine).fail(outcome.failures)
            return
        stored, data = outcome.value
        self.query_one("#result", ResultLine).info(f"{stored.kind} report {stored.label}: {stored.json_path}")
        try:
            text = json.dumps(json.loads(data), indent=1, sort_keys=True, ensure_ascii=False)
        except ValueError:
            text = data.decode("utf-8", "replace")
        self.query_one("#detail", Static).update(plain(text, newlines=True))  # a file's bytes: text
        self.query_one("#file", Input).value = str(stored.json_path)

    def _verified(self, outcome: Outcome[Verified]) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(verified_line(outcome.value))

    def _exported(self, ident: str, outcome: Outcome[Path]) -> None:
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(exported_line(ident, outcome.value))
