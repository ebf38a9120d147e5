"""Inventory: an inventory checked as ``vigil deploy`` checks it before any change (groups vigil knows,
every host placed, required variables, the limit, and each host's variables against the roles'
argument specs), its hosts by group with their addresses, the variables every host shares — which
the operator can edit here — and, on an explicit key press only, since it contacts the hosts,
whether each is reachable, by the deploy's own pre-flight ping.

The check is ``vigil inventory check`` and the edit ``vigil inventory edit``: the same operations,
with the same audit records. The ping is step 3 of ``vigil deploy`` and no command of its own: it
is not recorded, and leaves its ansible-runner artifacts under ``$VIGIL_HOME/runs/<id>-preflight``,
as the deploy's does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, DataTable, Input, Label, Static

from vigil.basics.errors import VigilError, one_line
from vigil.installer import ops
from vigil.installer.deploy.inventory import KNOWN_GROUPS, Inventory, load_inventory
from vigil.installer.deploy.runner import ping_hosts
from vigil.tui.inventory import HostVars, read_host_vars
from vigil.tui.screens._base import VigilScreen
from vigil.tui.session import Session, perform
from vigil.tui.untrusted import plain, plain_lines
from vigil.tui.widgets import ResultLine, to_ui
from vigil.tui.widgets.inventory import SharedVarsEditor


@dataclass(frozen=True)
class Loaded:
    inventory: Inventory
    hostvars: HostVars
    #: what `inventory check` found: the argument specs' verdict, and the refusals
    check: ops.InventoryCheck


def check_argv(path: Path, limit: str | None) -> list[str]:
    return ["inventory", "check", "-i", str(path), *(["--limit", limit] if limit else [])]


def load(session: Session, path: Path, limit: str | None) -> tuple[Loaded | None, list[str]]:
    """``vigil inventory check`` (recorded as the CLI records it), then what the screen shows: what was
    loaded (also when a role refused a variable) and the ``FAIL:`` lines, if any."""
    found: list[ops.InventoryCheck] = []

    def action(inv: ops.Invocation) -> ops.InventoryCheck:
        check = ops.check_inventory(inv, inventory=path, limit=limit)
        found.append(check)
        ops.inventory_failure(check, path)
        return check

    outcome = perform(session.invocation("inventory.check", check_argv(path, limit)), action)
    if not found:
        return None, outcome.failures
    try:
        check = found[0]
        return Loaded(check.inventory, read_host_vars(check.inventory.path, check.inventory.hosts), check), (
            outcome.failures
        )
    except VigilError as exc:
        return None, [f"FAIL: {exc}"]
    except Exception as exc:  # Ansible's own errors are many: one line, never a traceback
        return None, [f"FAIL: {path}: {one_line(f'{type(exc).__name__}: {exc}')}"]


def reach(home: Path, path: Path, limit: str | None) -> dict[str, str] | list[str]:
    """The deploy's pre-flight (step 3): {host: why unreachable} for the hosts that failed."""
    try:
        source = load_inventory(path, limit=limit).path
        return ping_hosts(runs_dir=home / "runs", inventory=source, limit=limit)
    except VigilError as exc:
        return [f"FAIL: {exc}"]
    except Exception as exc:
        return [f"FAIL: {path}: {one_line(f'{type(exc).__name__}: {exc}')}"]


class InventoryScreen(VigilScreen):
    MODE = "inventory"
    LABEL = "Inventory"
    HELP = "Check an inventory as deploy does; hosts by group, shared variables, reachability"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "load", "Check", id="inventory-check", tooltip="Load and check it as deploy does"),
        Binding(
            "ctrl+t", "reach", "Reach hosts", id="inventory-reach", tooltip="Ping every host (contacts them)"
        ),
        Binding(
            "ctrl+g",
            "edit",
            "Edit shared vars",
            id="inventory-edit",
            tooltip="Edit group_vars/all.yml; saved only if the inventory still passes the check",
        ),
    ]

    DEFAULT_CSS = """
    InventoryScreen .row { height: 1; margin: 0 1; }
    InventoryScreen .row Label { width: 10; }
    InventoryScreen .row Label.short { width: 6; margin-left: 1; }
    InventoryScreen .row Input { width: 1fr; }
    InventoryScreen .row #limit { width: 16; }
    InventoryScreen .row Button { margin-right: 2; }
    InventoryScreen .row #counts { width: 1fr; color: $text-muted; }
    InventoryScreen #hosts { height: 1fr; margin: 0 1; }
    InventoryScreen #vars-box { height: 1fr; min-height: 8; margin: 0 1; border-top: solid $panel; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loaded: Loaded | None = None
        #: host -> "yes" or why not, after a ping
        self.reached: dict[str, str] = {}

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Inventory")
            yield Input(placeholder="inventory directory or hosts.yml", id="inventory", compact=True)
            yield Label("Limit", classes="short")
            yield Input(placeholder="all hosts", id="limit", compact=True)
        with Horizontal(classes="row"):
            yield Button("Check", id="check", compact=True, variant="primary")
            yield Button("Reach hosts", id="reach", compact=True)
            yield Button("Edit shared vars", id="edit", compact=True)
            yield Label("", id="counts")
        yield ResultLine(id="result")
        yield DataTable(id="hosts", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="vars-box"):
            yield Static("", id="vars", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#hosts", DataTable)
        for col in ("group", "host", "ansible_host", "selected", "reachable"):
            table.add_column(col, key=col)
        self.query_one("#inventory", Input).focus()

    def _args(self) -> tuple[Path, str | None] | None:
        text = self.query_one("#inventory", Input).value.strip()
        if not text:
            self.query_one("#result", ResultLine).fail(
                ["FAIL: --inventory: give an inventory directory or file"]
            )
            return None
        limit = self.query_one("#limit", Input).value.strip() or None
        return Path(text).expanduser(), limit

    @on(Input.Submitted)
    @on(Button.Pressed, "#check")
    def action_load(self) -> None:
        if (args := self._args()) is not None:
            self.query_one("#result", ResultLine).info(f"checking {args[0]} …")
            self._load(*args)

    @on(Button.Pressed, "#reach")
    def action_reach(self) -> None:
        if (args := self._args()) is not None:
            self.query_one("#result", ResultLine).info(f"reaching the hosts of {args[0]} (ansible ping) …")
            self._reach(*args)

    @on(Button.Pressed, "#edit")
    def action_edit(self) -> None:
        if (args := self._args()) is None:
            return
        path = args[0]
        try:
            current = ops.read_shared_vars(path)
        except VigilError as exc:
            self.query_one("#result", ResultLine).fail([f"FAIL: {exc}"])
            return

        def saved(done: bool | None) -> None:
            if done:
                self.action_load()

        self.app.push_screen(SharedVarsEditor(self.session, path, current), saved)

    @work(thread=True, exclusive=True, group="inventory", exit_on_error=False)
    def _load(self, path: Path, limit: str | None) -> None:
        to_ui(self.app, self._loaded, path, *load(self.session, path, limit))

    @work(thread=True, exclusive=True, group="inventory", exit_on_error=False)
    def _reach(self, path: Path, limit: str | None) -> None:
        loaded, failures = load(self.session, path, limit)
        to_ui(self.app, self._loaded, path, loaded, failures)
        if loaded is not None and not failures:
            to_ui(self.app, self._reached, loaded, reach(self.session.home, path, limit))

    def _loaded(self, path: Path, loaded: Loaded | None, failures: list[str]) -> None:
        table = self.query_one("#hosts", DataTable)
        table.clear()
        result = self.query_one("#result", ResultLine)
        self.reached = {}
        if loaded is None:
            self.loaded = None
            result.fail(failures)
            self.query_one("#vars", Static).update("")
            self.query_one("#counts", Label).update("")
            return
        self.loaded = loaded
        self._fill()
        inv = loaded.inventory
        groups = " ".join(f"{g}:{len(inv.groups.get(g, []))}" for g in KNOWN_GROUPS)
        self.query_one("#counts", Label).update(plain(groups))
        note = f"; limit selects {len(inv.selected)}" if len(inv.selected) != len(inv.hosts) else ""
        if failures:
            result.fail(failures)
        else:
            result.ok(f"OK: {inv.path}: {len(inv.hosts)} hosts, every one placed and addressed{note}")
        lines = loaded.check.lines()[len(inv.groups) :]  # the argument specs' verdict and refusals
        lines.append("variables every host shares (ctrl+g edits group_vars/all.yml):")
        lines += [f"  {k} = {v}" for k, v in loaded.hostvars.common.items()] or ["  (none)"]
        self.query_one("#vars", Static).update(plain_lines(lines))

    def _fill(self) -> None:
        if self.loaded is None:
            return
        table = self.query_one("#hosts", DataTable)
        table.clear()
        inv = self.loaded.inventory
        addresses = self.loaded.hostvars.addresses
        for group in KNOWN_GROUPS:
            for host in inv.groups.get(group, []):
                reached = self.reached.get(host, "")
                style = "green" if reached == "yes" else "bold red" if reached else ""
                # the inventory's names and addresses, and what a host answered: text
                table.add_row(
                    plain(group),
                    plain(host),
                    plain(addresses.get(host, "")),
                    plain("yes" if host in inv.selected else "no"),
                    plain(reached, style),
                    key=f"{group}/{host}",
                )

    def _reached(self, loaded: Loaded, outcome: dict[str, str] | list[str]) -> None:
        result = self.query_one("#result", ResultLine)
        if isinstance(outcome, list):
            result.fail(outcome)
            return
        inv = loaded.inventory
        self.reached = {h: outcome.get(h, "yes") for h in inv.selected}
        self._fill()
        if outcome:
            # as the deploy says it: the first host, and how many more
            host = sorted(outcome)[0]
            more = f" (and {len(outcome) - 1} more)" if len(outcome) > 1 else ""
            result.fail([f"FAIL: host {host}: unreachable: {outcome[host]}{more}"])
        else:
            result.ok(f"OK: {inv.path}: all {len(inv.selected)} hosts reached")
