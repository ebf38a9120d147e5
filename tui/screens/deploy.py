"""Deploy, upgrade and rollback: the plan (what changes where), confirm, then the run live — hosts ×
counts, the current task per host, the log, elapsed time — fed by ansible-runner's events through a
queue drained on a timer, as ansible-navigator does. Cancel stops the run safely; a failure lists the
failed tasks.

One deploy is one action, as ``vigil deploy`` is: plan, confirmation and run go under one
Invocation, so the audit log gets the one ``deploy`` record the CLI leaves (a plan not confirmed is
recorded as refused). An upgrade or rollback is the two commands an operator runs: ``--check`` (the
plan, per host and component old -> new), then, confirmed, the rolling run; each leaves the record
the CLI's leaves. Cancel stops an upgrade between steps: the step under way finishes and is
health-checked, and a rerun finishes the rest.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Button, Checkbox, Input, Label, RichLog, Select, Static
from textual.worker import get_current_worker

from vigil.basics.errors import VigilError
from vigil.installer import ops
from vigil.installer.deploy import DeployPlan, PlaybookRun, RunResult
from vigil.tui.screens._base import VigilScreen
from vigil.tui.session import Outcome, perform
from vigil.tui.untrusted import plain, plain_lines
from vigil.tui.widgets import EventRelay, ResultLine, to_ui
from vigil.tui.widgets.deploy import COLUMNS, DeployBoard, HostGrid, HostRow

#: how often the live view drains the run's event queue (seconds): an event waits at most this
#: long before it is shown, however many arrive (benchmarks/tui_events.py)
REFRESH = 0.05
#: the most events taken in one drain; the rest wait for the next tick, so the UI never stalls
DRAIN_MAX = 5000
#: the most log lines drawn per drain (a flood's older lines are counted, not drawn: every line is
#: in the run's artifacts, stdout)
LOG_MAX = 100
#: the width of the grid's task column (a longer task name is cut there; the status line and the
#: log have it whole)
TASK_WIDTH = 48
#: the width of the grid's count columns
COUNT_WIDTH = 5


def grid_columns() -> list[tuple[str, str, int | None]]:
    """(key, label, width) of the grid: the host, as wide as the longest name; counts of five
    digits; the task at a fixed width (cut there; the status line and the log have it whole)."""
    out: list[tuple[str, str, int | None]] = [("host", "host", None)]
    for col in COLUMNS:
        label = col if col != "unreachable" else "unreach"
        out.append((col, label, TASK_WIDTH if col == "task" else max(len(label), COUNT_WIDTH)))
    return out


STATE_STYLE = {
    "waiting": "dim",
    "ok": "green",
    "changed": "yellow",
    "failed": "bold red",
    "unreachable": "bold magenta",
}


class NotConfirmed(VigilError):
    """The operator looked at the plan and did not go on."""

    outcome = "refused"


def plan_lines(plan: DeployPlan) -> list[str]:
    """What the plan will change where."""
    inv = plan.inventory
    hosts = inv.selected or inv.hosts
    mode = " in check mode (nothing is changed)" if plan.check else ""
    lines = [
        f"plan {plan.run_id}: bundle {plan.bundle.version} onto {len(hosts)} of {len(inv.hosts)} hosts{mode}",
        "  " + "  ".join(f"{g}: {', '.join(h)}" for g, h in sorted(inv.groups.items()) if h),
    ]
    extra = [f"limit {plan.limit}" if plan.limit else "", f"tags {plan.tags}" if plan.tags else ""]
    lines.append(f"  ansible content {plan.ansible_dir}  {'  '.join(e for e in extra if e)}".rstrip())
    return lines


#: what the screen can run: the CLI command of each
ACTIONS = ("deploy", "upgrade", "rollback")


def move_argv(
    action: str,
    inventory: Path,
    trust: Path | None,
    to: int | None,
    serial: int,
    keep_store: bool,
    admin: bool = True,
) -> list[str]:
    """The `vigil upgrade` / `vigil rollback` command line that does what the screen does."""
    argv = [action, "--inventory", str(inventory)]
    argv += ["--trust", str(trust)] if trust else []
    argv += ["--to", str(to)] if to is not None else []
    argv += ["--serial", str(serial)] if serial != 1 else []
    argv += ["--keep-store"] if keep_store and action == "rollback" else []
    argv += [] if admin else ["--no-admin"]
    return argv


def admin_lines(out: ops.Outcome) -> list[str]:
    """The admin host's line of an upgrade or rollback: its plan (what ``current`` moves to), or
    what the run did with it; none with --no-admin."""
    a = out.admin or {}
    if a.get("plan"):
        return [str(a["plan"])]
    if "switched" not in a:
        return []
    where = str(Path(str(a["root"])) / "current") if a.get("root") else "current"
    if a["switched"]:
        return [f"admin host: {where} -> {a.get('current')} (installed: {a.get('installed', '?')})"]
    return [f"admin host: {a.get('current')} installed beside, {where} not switched"]


class DeployScreen(VigilScreen):
    MODE = "deploy"
    LABEL = "Deploy"
    HELP = "Plan a deploy, upgrade or rollback of imported bundles, confirm it, and follow it live"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "plan", "Plan", id="deploy-plan", tooltip="Check inventory, bundle and hosts"),
        Binding("ctrl+y", "confirm", "Deploy", id="deploy-confirm", tooltip="Run the plan shown"),
        Binding("ctrl+n", "discard", "Discard", id="deploy-discard", tooltip="Drop the plan shown"),
        Binding("ctrl+b", "cancel_run", "Cancel run", id="deploy-cancel", tooltip="Stop the running deploy"),
    ]

    DEFAULT_CSS = """
    DeployScreen .row { height: 1; margin: 0 1; }
    DeployScreen .row Label { width: 10; }
    DeployScreen .row Input { width: 1fr; margin-right: 1; }
    DeployScreen .row Button { margin-right: 2; }
    DeployScreen .row Label.short { width: 7; margin-left: 1; }
    DeployScreen .row Select { width: 14; }
    DeployScreen .row Input.num { width: 10; }
    DeployScreen #confirm { width: 10; }
    DeployScreen #plan { height: auto; max-height: 3; margin: 0 1; color: $text-muted; }
    DeployScreen #status { height: 1; width: 1fr; margin: 0 1; text-style: bold; }
    DeployScreen #grid { height: 1fr; min-height: 4; margin: 0 1; }
    DeployScreen #log { height: 1fr; min-height: 5; margin: 0 1; border-top: solid $panel; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.board = DeployBoard()
        self.plan: DeployPlan | None = None
        self.run: PlaybookRun | None = None
        self.result: RunResult | None = None
        self._events: queue.Queue[dict[str, Any]] | None = None
        #: what the grid shows now, per host (state, then the cells): only what differs is redrawn
        self._shown: dict[str, tuple[str, ...]] = {}
        self._timer: Timer | None = None
        self._t0 = 0.0
        self._answer = threading.Event()
        self._confirmed = False
        self._cancel = threading.Event()
        self._busy = False
        #: the action under way: "deploy", "upgrade" or "rollback"
        self.action = "deploy"
        self.outcome: ops.Outcome | None = None

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Inventory")
            yield Input(placeholder="inventory directory or hosts.yml", id="inventory", compact=True)
        with Horizontal(classes="row"):
            yield Label("Trust")
            yield Input(placeholder="installed root", id="trust", compact=True)
            yield Label("Limit", classes="short")
            yield Input(placeholder="all hosts", id="limit", compact=True)
            yield Checkbox("check", id="check", compact=True)
            yield Checkbox("no admin", id="no-admin", compact=True)
        with Horizontal(classes="row"):
            yield Label("Action")
            yield Select(
                [(a, a) for a in ACTIONS], value="deploy", allow_blank=False, id="action", compact=True
            )
            yield Label("To", classes="short")
            yield Input(placeholder="default", id="to", classes="num", compact=True)
            yield Label("Serial", classes="short")
            yield Input("1", id="serial", classes="num", compact=True)
            yield Checkbox("keep store", id="keep-store", compact=True)
        with Horizontal(classes="row"):
            yield Button("Plan", id="plan-button", compact=True, variant="primary")
            yield Button("Deploy", id="confirm", compact=True, variant="warning", disabled=True)
            yield Button("Discard", id="discard", compact=True, disabled=True)
            yield Button("Cancel run", id="cancel", compact=True, variant="error", disabled=True)
        yield Static("", id="plan", markup=False)
        yield ResultLine(id="result")
        yield Label("", id="status")
        yield HostGrid(grid_columns(), id="grid")
        yield RichLog(id="log", max_lines=2000, wrap=False, markup=False)

    def on_mount(self) -> None:
        box = self.query_one("#inventory", Input)
        if not box.value:  # the obvious one: the inventory of the last deploy that went through
            box.value = ops.last_deployed_inventory(self.session.home) or ""
        box.focus()

    @property
    def busy(self) -> bool:
        """A deploy is being planned, waits for its confirmation, or runs."""
        return self._busy

    # -- the operator's keys ------------------------------------------------------------------
    @on(Input.Submitted)
    @on(Button.Pressed, "#plan-button")
    def action_plan(self) -> None:
        if self._busy:
            self.notify("a deploy is already under way", severity="warning")
            return
        text = self.query_one("#inventory", Input).value.strip()
        if not text:
            self.query_one("#result", ResultLine).fail(["FAIL: deploy: no inventory given"])
            return
        trust_text = self.query_one("#trust", Input).value.strip()
        trust = Path(trust_text).expanduser() if trust_text else None
        limit = self.query_one("#limit", Input).value.strip() or None
        check = self.query_one("#check", Checkbox).value
        action = str(self.query_one("#action", Select).value)
        to: int | None = None
        serial = 1
        if action != "deploy":
            to_text = self.query_one("#to", Input).value.strip()
            serial_text = self.query_one("#serial", Input).value.strip() or "1"
            if (to_text and not to_text.isdigit()) or not serial_text.isdigit():
                self.query_one("#result", ResultLine).fail(
                    [f"FAIL: {action}: To and Serial are whole numbers (To empty: the default)"]
                )
                return
            to, serial = (int(to_text) if to_text else None), int(serial_text)
            if limit:
                self.query_one("#result", ResultLine).fail(
                    [f"FAIL: {action}: moves every host of the inventory; clear Limit"]
                )
                return
        keep_store = self.query_one("#keep-store", Checkbox).value
        admin = not self.query_one("#no-admin", Checkbox).value
        self._busy = True
        self.action = action
        self._answer.clear()
        self._cancel.clear()
        self._confirmed = False
        self.plan = self.result = self.outcome = None
        self.query_one("#plan", Static).update("")
        self.query_one("#confirm", Button).label = action.capitalize()
        if action == "deploy":
            self.query_one("#result", ResultLine).info(
                "planning: inventory, bundle re-verified, every host reached …"
            )
            self._deploy(Path(text).expanduser(), trust, limit, check)
            return
        self.query_one("#result", ResultLine).info(
            f"planning the {action}: bundles re-verified, every host's facts read …"
        )
        self._move(action, Path(text).expanduser(), trust, to, serial, keep_store, check, admin)

    @on(Select.Changed, "#action")
    def _action_chosen(self, event: Select.Changed) -> None:
        """The confirm button says what it will run, whole ("Upgrade" was cut to "Upgrad"), and follows
        the choice until a plan is under way."""
        if not self._busy:
            self.query_one("#confirm", Button).label = str(event.value).capitalize()

    @on(Button.Pressed, "#confirm")
    def action_confirm(self) -> None:
        if (self.plan is None and self.outcome is None) or self._answer.is_set():
            self.notify("nothing planned to deploy: plan first (ctrl+r)", severity="warning")
            return
        self._confirmed = True
        self._answer.set()
        self._buttons(planned=False, running=True)

    @on(Button.Pressed, "#discard")
    def action_discard(self) -> None:
        if (self.plan is None and self.outcome is None) or self._answer.is_set():
            return
        self._confirmed = False
        self._answer.set()
        self._buttons(planned=False, running=False)

    @on(Button.Pressed, "#cancel")
    def action_cancel_run(self) -> None:
        if self.action != "deploy" and self._busy and self._confirmed:
            self._cancel.set()
            self.query_one("#result", ResultLine).info(
                f"stopping the {self.action} after the step under way and its health check …"
            )
            return
        if self.run is None or self.result is not None:
            self.notify("no deploy is running", severity="warning")
            return
        self._cancel.set()
        self.query_one("#result", ResultLine).info("cancelling: Ansible ends the play …")

    def stop(self) -> None:
        """Cancel whatever is under way (the app is quitting): a plan is dropped, a run cancelled."""
        self._cancel.set()
        self._answer.set()

    # -- the work, on a thread ----------------------------------------------------------------
    def _ui(self, callback: Callable[..., object], *args: Any) -> None:
        to_ui(self.app, callback, *args)

    @work(thread=True, exclusive=True, group="deploy", exit_on_error=False)
    def _deploy(self, inventory: Path, trust: Path | None, limit: str | None, check: bool) -> None:
        worker = get_current_worker()
        argv = ["deploy", "--inventory", str(inventory)]
        argv += [*(["--trust", str(trust)] if trust else []), *(["--limit", limit] if limit else [])]
        argv += ["--check"] if check else []
        inv = self.session.invocation("deploy", argv)

        def action(inv: ops.Invocation) -> RunResult:
            plan = ops.plan_deploy(inv, inventory=inventory, trust=trust, limit=limit, check=check)
            self._ui(self._planned, plan)
            while not self._answer.wait(0.1):
                if worker.is_cancelled:
                    break
            if not self._confirmed or self._cancel.is_set():
                raise NotConfirmed(
                    f"deploy {plan.run_id}", "not confirmed by the operator; nothing was changed"
                )
            events: queue.Queue[dict[str, Any]] = queue.Queue()
            run = ops.start_deploy(inv, plan, events)
            self._ui(self._started, plan, run, events)
            while not run.done():
                if self._cancel.is_set() or worker.is_cancelled:
                    run.cancel()
                with contextlib.suppress(TimeoutError):
                    run.wait(0.25)
            result = ops.finish_deploy(inv, run)
            self._ui(self._finished, result)
            failure = ops.deploy_failure(result)
            if failure is not None:
                raise failure
            return result

        self._ui(self._done, perform(inv, action))

    @work(thread=True, exclusive=True, group="deploy", exit_on_error=False)
    def _move(
        self,
        action: str,
        inventory: Path,
        trust: Path | None,
        to: int | None,
        serial: int,
        keep_store: bool,
        check: bool,
        admin: bool = True,
    ) -> None:
        """An upgrade or rollback: its plan (``--check``), then, confirmed, the run; two records.
        ADMIN: the admin host's vigil moves with the site (unticked "no admin"), as the CLI's."""
        worker = get_current_worker()
        argv = move_argv(action, inventory, trust, to, serial, keep_store, admin)

        def run(
            inv: ops.Invocation, *, check: bool, events: queue.Queue[dict[str, Any]] | None = None
        ) -> ops.Outcome:
            return ops.upgrade(
                inv,
                inventory=inventory,
                trust=trust,
                to=to,
                serial=serial,
                check=check,
                rollback=action == "rollback",
                allow_downgrade=action == "rollback",
                keep_store=keep_store and action == "rollback",
                admin=admin,
                events=events,
                stop=self._cancel,
            )

        planned = perform(
            self.session.invocation(action, [*argv, "--check"]), lambda inv: run(inv, check=True)
        )
        if planned.value is None or check:
            self._ui(self._moved, planned, True)
            return
        self._ui(self._move_planned, planned.value)
        while not self._answer.wait(0.1):
            if worker.is_cancelled:
                break
        if not self._confirmed or self._cancel.is_set():
            self._ui(self._move_discarded, planned.value)
            return
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        hosts = sorted({c.host for c in planned.value.changes})
        self._ui(self.follow, events, hosts)
        inv = self.session.invocation(action, argv, EventRelay(self.app, self._step))
        self._ui(self._moved, perform(inv, lambda inv: run(inv, check=False, events=events)), False)

    # -- back on the UI thread ----------------------------------------------------------------
    def _move_planned(self, out: ops.Outcome) -> None:
        self.outcome = out
        lines = ops.upgrade_plan_lines(out.changes, out.target, out.files, out.files_unknown)
        lines += admin_lines(out)
        self.query_one("#plan", Static).update(plain_lines(lines))
        self.query_one("#result", ResultLine).info(
            f"planned ({len(lines) - 1} lines): ctrl+y runs the {self.action}, ctrl+n discards"
        )
        self._buttons(planned=True, running=False)
        self._reset_grid(sorted({c.host for c in out.changes}))

    def _move_discarded(self, out: ops.Outcome) -> None:
        self._busy = False
        self._buttons(planned=False, running=False)
        self.query_one("#result", ResultLine).info(
            f"{self.action} to bundle {out.target} not run: nothing was changed"
        )

    def _step(self, event: ops.Event) -> None:
        if isinstance(event, ops.Step):
            self.query_one("#log", RichLog).write(plain(event.text))

    def _moved(self, outcome: Outcome[ops.Outcome], plan_only: bool) -> None:
        self._drain()
        self.unfollow()
        self._busy = False
        self._buttons(planned=False, running=False)
        result = self.query_one("#result", ResultLine)
        out = outcome.value
        if out is None:
            result.fail(list(outcome.failures))
            return
        if plan_only:
            self.outcome = out
            lines = ops.upgrade_plan_lines(out.changes, out.target, out.files, out.files_unknown)
            self.query_one("#plan", Static).update(plain_lines(lines + admin_lines(out)))
        else:
            for line in admin_lines(out):
                self.query_one("#log", RichLog).write(plain(line))
        result.ok(f"OK: {self.action} {out.upgrade_id}: {ops.upgrade_outcome_message(out)}")

    def _buttons(self, *, planned: bool, running: bool) -> None:
        self.query_one("#confirm", Button).disabled = not planned
        self.query_one("#discard", Button).disabled = not planned
        self.query_one("#cancel", Button).disabled = not running
        self.query_one("#plan-button", Button).disabled = planned or running

    def _planned(self, plan: DeployPlan) -> None:
        self.plan = plan
        self.query_one("#plan", Static).update(plain_lines(plan_lines(plan)))
        self.query_one("#result", ResultLine).info("planned: ctrl+y deploys, ctrl+n discards")
        self._buttons(planned=True, running=False)
        self._reset_grid(plan.inventory.selected or plan.inventory.hosts)

    def _started(self, plan: DeployPlan, run: PlaybookRun, events: queue.Queue[dict[str, Any]]) -> None:
        self.run = run
        self.query_one("#result", ResultLine).info(f"running {run.run_id} …  ctrl+b cancels")
        self.follow(events, plan.inventory.selected or plan.inventory.hosts)

    def _finished(self, result: RunResult) -> None:
        self.result = result
        self._drain()
        self.unfollow()

    def _done(self, outcome: Outcome[RunResult]) -> None:
        self._busy = False
        self._buttons(planned=False, running=False)
        result = self.query_one("#result", ResultLine)
        if outcome.value is not None:
            r = outcome.value
            changed = sum(s.changed for s in r.progress.hosts.values())
            result.ok(f"OK: deploy {r.run_id}: {len(r.progress.hosts)} hosts, {changed} changed")
            return
        lines = list(outcome.failures)
        if self.result is not None:
            lines += [f"  {f.host}: {f.task}: {f.message}" for f in self.result.progress.failures]
        result.fail(lines)

    # -- the live view: a queue of events drained on a timer ------------------------------------
    def _reset_grid(self, hosts: list[str]) -> None:
        self.board = DeployBoard(hosts)
        self._shown = {}
        self.query_one("#grid", HostGrid).clear()
        self.query_one("#log", RichLog).clear()
        self._render_rows(self.board.take_dirty())

    def follow(self, events: queue.Queue[dict[str, Any]], hosts: list[str]) -> None:
        """Show the run whose events arrive on EVENTS, from a fresh board of HOSTS."""
        self.unfollow()
        self._reset_grid(hosts)
        self._events = events
        self._t0 = time.monotonic()
        self._timer = self.set_interval(REFRESH, self._drain)

    def unfollow(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _drain(self) -> None:
        if self._events is None:
            return
        for _ in range(DRAIN_MAX):
            try:
                self.board.apply(self._events.get_nowait())
            except queue.Empty:
                break
        self._render_rows(self.board.take_dirty())
        lines = self.board.take_log()
        if lines:
            if len(lines) > LOG_MAX:
                skipped = len(lines) - LOG_MAX
                lines = [f"... {skipped} lines not drawn (all are in the run's artifacts)", *lines[-LOG_MAX:]]
            # Ansible's output holds what the hosts said: text, its control characters escaped
            self.query_one("#log", RichLog).write(plain_lines(lines))
        self.query_one("#status", Label).update(plain(self.board.status_line(time.monotonic() - self._t0)))

    def _render_rows(self, rows: list[HostRow]) -> None:
        grid = self.query_one("#grid", HostGrid)
        for row in rows:
            shown = (row.state, *row.cells())
            if self._shown.get(row.host) == shown:
                continue
            self._shown[row.host] = shown
            # cells as Text, never markup: a task name with brackets in it is shown as it is, and
            # the grid draws the text itself, so control characters are escaped here
            grid.set_row(row.host, [plain(row.host, STATE_STYLE[row.state]), *map(plain, row.cells())])
