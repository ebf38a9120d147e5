"""An editor of an inventory's ``group_vars/all.yml``: saved by ``vigil inventory edit`` (the file is
written only if the whole inventory still passes the check with it, and only over the file as it
was read), or left with escape. A refusal is the CLI's ``FAIL:`` line; the text stays for fixing."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Label, TextArea

from vigil.installer import ops
from vigil.installer.deploy.inventory import SharedVars
from vigil.tui.session import Outcome, Session, perform
from vigil.tui.untrusted import plain
from vigil.tui.widgets import ResultLine, to_ui


class SharedVarsEditor(ModalScreen[bool]):
    """Dismissed with True once saved, False when left unsaved."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+s", "save", "Save", id="vars-save", tooltip="Check the inventory with it, then write it"
        ),
        # priority: the text area would take the first escape for itself (it lets go of the focus)
        Binding("escape", "leave", "Leave unsaved", id="vars-leave", priority=True),
    ]

    DEFAULT_CSS = """
    SharedVarsEditor { align: center middle; }
    SharedVarsEditor > Vertical { width: 95%; height: 90%; border: thick $primary; background: $surface; }
    SharedVarsEditor #vars-path { height: 1; margin: 0 1; text-style: bold; }
    SharedVarsEditor TextArea { height: 1fr; margin: 0 1; }
    SharedVarsEditor .row { height: 1; margin: 0 1; }
    SharedVarsEditor .row Button { margin-right: 2; }
    """

    def __init__(self, session: Session, inventory: Path, current: SharedVars) -> None:
        super().__init__()
        self.session = session
        self.inventory = inventory
        self.current = current
        self.saving = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(plain(f"{self.current.path} (every host's variables)"), id="vars-path")
            yield TextArea(self.current.text, id="vars-text", show_line_numbers=True, tab_behavior="indent")
            yield ResultLine(id="vars-result")
            with Horizontal(classes="row"):
                yield Button("Save", id="vars-save", compact=True, variant="primary")
                yield Button("Leave unsaved", id="vars-leave", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#vars-text", TextArea).focus()

    @on(Button.Pressed, "#vars-leave")
    def action_leave(self) -> None:
        if not self.saving:
            self.dismiss(False)

    @on(Button.Pressed, "#vars-save")
    def action_save(self) -> None:
        if self.saving:
            return
        self.saving = True
        self.query_one("#vars-result", ResultLine).info("checking the inventory with these variables …")
        self._save(self.query_one("#vars-text", TextArea).text)

    @work(thread=True, exclusive=True, group="inventory-edit", exit_on_error=False)
    def _save(self, text: str) -> None:
        argv = [
            "inventory",
            "edit",
            "-i",
            str(self.inventory),
            "--vars",
            "(the console's editor)",
            "--expect-sha256",
            self.current.sha256,
        ]
        outcome = perform(
            self.session.invocation("inventory.edit", argv),
            lambda inv: ops.edit_shared_vars(
                inv, inventory=self.inventory, text=text, expected_sha256=self.current.sha256
            ),
        )
        to_ui(self.app, self._saved, outcome)

    def _saved(self, outcome: Outcome[ops.InventoryCheck]) -> None:
        self.saving = False
        if outcome.ok:
            self.dismiss(True)
            return
        self.query_one("#vars-result", ResultLine).fail(outcome.failures)
