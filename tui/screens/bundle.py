"""Import (admin host): a bundle file verified with live progress, inspected, imported into the store.

A split bundle's parts index (``NAME.parts.json``) is joined first (``vigil bundle join``: the index's
signature, then each part's size and sha256, in order), and the joined bundle takes its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Button, Checkbox, DataTable, Input, Label, ProgressBar, Static

from vigil.bundle.store import ImportResult
from vigil.bundle.verify import VerifiedHead
from vigil.installer import ops
from vigil.tui.screens._base import VigilScreen
from vigil.tui.session import Outcome, perform
from vigil.tui.untrusted import plain, plain_lines
from vigil.tui.widgets import EventRelay, ResultLine, to_ui

#: a split bundle's parts index, as `vigil bundle split` names it
PARTS_SUFFIX = ".parts.json"


def verified_line(path: Path, head: VerifiedHead) -> str:
    """``vigil bundle verify``'s OK line."""
    return f"OK: {path.name}: {ops.verified_message(head, deep=False)}"


def imported_line(path: Path, result: ImportResult) -> str:
    """``vigil bundle import``'s OK line."""
    if result.already_imported:
        return f"OK: {path.name}: version {result.version} already imported ({result.path}); nothing changed"
    note = " (downgrade, allowed by --allow-downgrade)" if result.downgrade else ""
    return f"OK: {path.name}: version {result.version} imported into {result.path}{note}"


def summary_lines(info: dict[str, Any]) -> list[str]:
    """The head of ``vigil bundle inspect``: version, dates, payload, signers, SBOM."""
    lines = [
        f"version {info['version']}  channel {info['channel']}  arch {info['arch']}  "
        f"created {info['created']}  expires {info['expires']}",
        f"payload {info['payload']['size']} bytes zstd, {info['files']} files, {info['bytes']} bytes unpacked"
        f"; needs vigil >= {info['min_vigil_version']}",
    ]
    lines += [f"signer {s['key_id']}  {s['trusted_comment']}" for s in info["signers"]]
    sbom = info["sbom"]
    if sbom:
        lic = ", ".join(f"{k} {v}" for k, v in sbom["licenses"].items())
        lines.append(f"sbom {sbom['format']}, {sbom['components']} components; licences: {lic}")
    else:
        lines.append("sbom missing or unreadable")
    return lines


class ImportScreen(VigilScreen):
    MODE = "import"
    LABEL = "Import"
    HELP = "Verify, inspect and import a bundle into this host's store"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+r", "verify", "Verify", id="bundle-verify", tooltip="Verify the bundle, then inspect it"
        ),
        Binding(
            "ctrl+t", "inspect", "Inspect", id="bundle-inspect", tooltip="Show what it holds (no verify)"
        ),
        Binding("ctrl+g", "import", "Import", id="bundle-import", tooltip="Verify and add it to the store"),
    ]

    DEFAULT_CSS = """
    ImportScreen .row { height: 1; margin: 0 1; }
    ImportScreen .row Label { width: 8; }
    ImportScreen .row Input { width: 1fr; }
    ImportScreen #buttons { height: 1; margin: 1 1 0 1; }
    ImportScreen #buttons Button { margin-right: 2; }
    ImportScreen #progress-row { height: 1; margin: 0 1; }
    ImportScreen #step { width: 1fr; color: $text-muted; }
    ImportScreen #summary { height: auto; max-height: 5; margin: 0 1; }
    ImportScreen #components { height: 1fr; margin: 0 1; }
    """

    #: progress events that reached the screen (for the tests: progress is live, and coalesced)
    events_shown = 0

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Bundle")
            yield Input(
                placeholder="path to vigil-N-ARCH.bundle, or its parts index (.parts.json)",
                id="bundle",
                compact=True,
            )
        with Horizontal(classes="row"):
            yield Label("Trust")
            yield Input(placeholder="trust root (empty: the installed one)", id="trust", compact=True)
        with Horizontal(id="buttons"):
            yield Button("Verify", id="verify", compact=True, variant="primary")
            yield Button("Inspect", id="inspect", compact=True)
            yield Button("Import", id="import", compact=True, variant="success")
            yield Checkbox("allow downgrade", id="downgrade", compact=True)
        with Horizontal(id="progress-row"):
            yield Label("", id="step")
            yield ProgressBar(id="bar", show_eta=False)
        yield ResultLine(id="result")
        yield Static("", id="summary", markup=False)
        yield DataTable(id="components", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#components", DataTable)
        # the licence last: a long one pushed files, bytes and kind off the screen
        table.add_columns("component", "version", "files", "bytes", "kind", "licence")
        self.query_one("#bar", ProgressBar).display = False
        self.query_one("#bundle", Input).focus()

    # -- what was asked ------------------------------------------------------------------------
    def _paths(self) -> tuple[Path, Path | None] | None:
        text = self.query_one("#bundle", Input).value.strip()
        if not text:
            self.query_one("#result", ResultLine).fail(["FAIL: bundle: no path given"])
            return None
        trust = self.query_one("#trust", Input).value.strip()
        return Path(text).expanduser(), Path(trust).expanduser() if trust else None

    @staticmethod
    def _trust_argv(trust: Path | None) -> list[str]:
        return ["--trust", str(trust)] if trust else []

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_verify()

    @on(Button.Pressed, "#verify")
    def action_verify(self) -> None:
        if (paths := self._paths()) is not None:
            self._start("verifying")
            self._verify(*paths)

    @on(Button.Pressed, "#inspect")
    def action_inspect(self) -> None:
        if (paths := self._paths()) is not None:
            self._start("inspecting")
            self._inspect(paths[0])

    @on(Button.Pressed, "#import")
    def action_import(self) -> None:
        if (paths := self._paths()) is not None:
            self._start("importing")
            self._import(*paths, self.query_one("#downgrade", Checkbox).value)

    # -- the work, on a thread -----------------------------------------------------------------
    def _relay(self) -> EventRelay:
        return EventRelay(self.app, self._on_event)

    def _run_inspect(self, path: Path) -> Outcome[dict[str, Any]]:
        inv = self.session.invocation("bundle.inspect", ["bundle", "inspect", str(path)])
        return perform(inv, lambda inv: ops.inspect_bundle(inv, path))

    def _join(self, path: Path, trust: Path | None) -> Path | None:
        """A parts index is joined (recorded as `vigil bundle join`); the bundle to go on with, or None
        when the join was refused (said on screen)."""
        if not path.name.endswith(PARTS_SUFFIX):
            return path
        argv = ["bundle", "join", str(path), *self._trust_argv(trust)]
        inv = self.session.invocation("bundle.join", argv, self._relay())
        joined = perform(inv, lambda inv: ops.join_bundle(inv, path, trust))
        to_ui(self.app, self._joined, path, joined)
        return joined.value

    @work(thread=True, exclusive=True, group="bundle", exit_on_error=False)
    def _verify(self, given: Path, trust: Path | None) -> None:
        if (path := self._join(given, trust)) is None:
            return
        argv = ["bundle", "verify", str(path), *self._trust_argv(trust)]
        inv = self.session.invocation("bundle.verify", argv, self._relay())
        verified = perform(inv, lambda inv: ops.verify_bundle(inv, path, trust))
        inspected = self._run_inspect(path) if verified.ok else None
        to_ui(self.app, self._verified, path, verified, inspected)

    @work(thread=True, exclusive=True, group="bundle", exit_on_error=False)
    def _inspect(self, given: Path) -> None:
        if (path := self._join(given, None)) is None:
            return
        inspected = self._run_inspect(path)
        to_ui(self.app, self._inspected, inspected, True)

    @work(thread=True, exclusive=True, group="bundle", exit_on_error=False)
    def _import(self, given: Path, trust: Path | None, allow_downgrade: bool) -> None:
        if (path := self._join(given, trust)) is None:
            return
        argv = ["bundle", "import", str(path), *self._trust_argv(trust)]
        argv += ["--allow-downgrade"] if allow_downgrade else []
        inv = self.session.invocation("bundle.import", argv, self._relay())
        outcome = perform(
            inv, lambda inv: ops.import_bundle(inv, path, trust, allow_downgrade=allow_downgrade)
        )
        to_ui(self.app, self._imported, path, outcome)

    # -- back on the UI thread -----------------------------------------------------------------
    def _start(self, what: str) -> None:
        self.query_one("#result", ResultLine).info(f"{what} …")
        self.query_one("#step", Label).update(what)
        bar = self.query_one("#bar", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True

    def _end(self) -> None:
        self.query_one("#bar", ProgressBar).display = False
        self.query_one("#step", Label).update("")

    def _on_event(self, event: ops.Event) -> None:
        self.events_shown += 1
        if isinstance(event, ops.Step):
            self.query_one("#step", Label).update(plain(event.text))
        else:
            self.query_one("#step", Label).update(plain(event.label))
            self.query_one("#bar", ProgressBar).update(total=event.total, progress=event.done)

    def _joined(self, index: Path, joined: Outcome[Path]) -> None:
        if joined.value is None:
            self._end()
            self.query_one("#result", ResultLine).fail(joined.failures)
            self._show_info(None)
            return
        # the joined bundle takes the index's place in the field, for the next action too
        self.query_one("#bundle", Input).value = str(joined.value)
        self.query_one("#result", ResultLine).info(f"joined {index.name} into {joined.value} …")

    def _verified(
        self, path: Path, verified: Outcome[VerifiedHead], inspected: Outcome[dict[str, Any]] | None
    ) -> None:
        self._end()
        result = self.query_one("#result", ResultLine)
        if verified.value is None:
            result.fail(verified.failures)
            self._show_info(None)
            return
        result.ok(verified_line(path, verified.value))
        if inspected is not None:
            self._inspected(inspected, False)

    def _inspected(self, inspected: Outcome[dict[str, Any]], say: bool) -> None:
        self._end()
        result = self.query_one("#result", ResultLine)
        if inspected.value is None:
            result.fail(inspected.failures)
            self._show_info(None)
            return
        if say:
            name = inspected.value["bundle"]
            result.info(f"{name}: not verified by inspect: verify it (ctrl+r) before trusting this")
        self._show_info(inspected.value)

    def _imported(self, path: Path, outcome: Outcome[ImportResult]) -> None:
        self._end()
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(imported_line(path, outcome.value))

    def _show_info(self, info: dict[str, Any] | None) -> None:
        table = self.query_one("#components", DataTable)
        table.clear()
        summary = self.query_one("#summary", Static)
        if info is None:
            summary.update("")
            return
        # an inspected bundle is not verified: anyone can write its manifest; shown as text
        summary.update(plain_lines(summary_lines(info)))
        for c in info["components"]:
            table.add_row(*(plain(c[k]) for k in ("name", "version", "files", "bytes", "kind", "license")))
