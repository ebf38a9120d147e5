"""The Deploy screen: the board (events in, grid out) without Ansible, the live grid fed through a queue,
and a plan that fails, in the CLI's words and with the CLI's audit record."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, RichLog
from tui_helpers import Signed, audit_lines, cli_fail_line, drive, settle

from vigil.tui import VigilApp
from vigil.tui.screens import DeployScreen
from vigil.tui.screens.deploy import LOG_MAX, TASK_WIDTH
from vigil.tui.widgets import ResultLine
from vigil.tui.widgets.deploy import DeployBoard, HostGrid


def ev(kind: str, host: str | None = None, task: str = "", stdout: str = "", **data: Any) -> dict[str, Any]:
    """An event as ansible-runner's event_handler gets it (the fields the board reads)."""
    event_data: dict[str, Any] = {"task": task, **data}
    if host:
        event_data["host"] = host
    return {"event": kind, "event_data": event_data, "stdout": stdout}


#: a small run: two hosts, mon01 changes something, gpu01 fails its second task, gpu02 is unreachable
RUN = [
    ev("playbook_on_play_start", play="monitoring", stdout="PLAY [monitoring] ****"),
    ev("playbook_on_task_start", task="Install node_exporter", stdout="TASK [node_exporter : Install] ****"),
    ev("runner_on_start", "mon01", "Install node_exporter"),
    ev("runner_on_start", "gpu01", "Install node_exporter"),
    ev("runner_on_ok", "mon01", "Install node_exporter", "changed: [mon01]", res={"changed": True}),
    ev("runner_on_ok", "gpu01", "Install node_exporter", "ok: [gpu01]", res={"changed": False}),
    ev(
        "runner_on_unreachable",
        "gpu02",
        "Install node_exporter",
        "fatal: [gpu02]: UNREACHABLE!",
        res={"msg": "ssh: no route"},
    ),
    ev("playbook_on_task_start", task="Start node_exporter"),
    ev("runner_on_start", "gpu01", "Start node_exporter"),
    ev(
        "runner_on_failed",
        "gpu01",
        "Start node_exporter",
        "fatal: [gpu01]: FAILED!",
        res={"msg": "unit not found"},
    ),
    ev("runner_on_skipped", "mon01", "Start node_exporter", "skipping: [mon01]"),
]


def test_the_board_scores_events_as_the_run_does() -> None:
    board = DeployBoard(["mon01", "gpu01", "gpu02", "ctl01"])
    assert [r.state for r in board.take_dirty()] == ["waiting"] * 4
    board.apply_all(RUN[:6])
    assert [r.host for r in board.take_dirty()] == ["gpu01", "mon01"]  # only what changed
    board.apply_all(RUN[6:])
    grid = {r.host: (r.cells(), r.state) for r in board.rows()}
    assert grid == {
        "ctl01": (("0", "0", "0", "0", "0", ""), "waiting"),
        "gpu01": (("1", "0", "1", "0", "0", "Start node_exporter"), "failed"),
        "gpu02": (("0", "0", "0", "1", "0", "Install node_exporter"), "unreachable"),
        "mon01": (("1", "1", "0", "0", "1", "Install node_exporter"), "changed"),
    }
    assert board.totals() == {"hosts": 4, "ok": 2, "changed": 1, "failed": 1, "unreachable": 1, "skipped": 1}
    assert board.task == "Start node_exporter" and board.tasks_started == 2 and board.play == "monitoring"
    assert board.status_line(75.2) == (
        "01:15  task 2: Start node_exporter  |  ok 2  changed 1  failed 1  unreachable 1"
    )
    assert board.take_log()[:2] == ["PLAY [monitoring] ****", "TASK [node_exporter : Install] ****"]
    assert board.take_log() == []  # each line once
    # the failures are the run's own scoring (vigil.installer.deploy.Progress), as the CLI lists them
    assert [(f.host, f.task, f.message) for f in board.progress.failures] == [
        ("gpu02", "Install node_exporter", "ssh: no route"),
        ("gpu01", "Start node_exporter", "unit not found"),
    ]


def test_the_final_stats_are_the_authority() -> None:
    board = DeployBoard()
    board.apply_all(RUN)
    board.take_dirty()
    board.apply(
        ev(
            "playbook_on_stats",
            ok={"mon01": 7, "gpu01": 3},
            changed={"mon01": 2},
            failures={"gpu01": 1},
            dark={"gpu02": 1},
            skipped={},
        )
    )
    assert {r.host: r.ok for r in board.take_dirty()} == {"gpu01": 3, "gpu02": 0, "mon01": 7}
    assert board.totals()["changed"] == 2


def test_the_live_grid_drains_the_queue_on_a_timer(signed: Signed) -> None:
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, DeployScreen)
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        screen.follow(events, ["mon01", "gpu01", "gpu02"])
        for event in RUN:
            events.put(event)
        await pilot.pause(0.3)  # a few ticks of the drain timer
        grid = screen.query_one("#grid", HostGrid)
        seen["grid"] = {key: grid.row_text(key)[1:] for key in grid.keys}
        seen["status"] = str(screen.query_one("#status").render())
        seen["log"] = [str(line.text) for line in screen.query_one("#log", RichLog).lines]
        screen.unfollow()

    drive(signed.home, scenario, start="deploy")
    assert seen["grid"] == {
        "mon01": ["1", "1", "0", "0", "1", "Install node_exporter"],
        "gpu01": ["1", "0", "1", "0", "0", "Start node_exporter"],
        "gpu02": ["0", "0", "0", "1", "0", "Install node_exporter"],
    }
    assert seen["status"].endswith("task 2: Start node_exporter  |  ok 2  changed 1  failed 1  unreachable 1")
    assert "fatal: [gpu01]: FAILED!" in seen["log"]


def test_a_flood_is_coalesced_into_one_draw_per_tick_and_the_grid_stays_exact(signed: Signed) -> None:
    """Thousands of events between two ticks: the grid ends exactly as the board scores them, the log
    draws the newest LOG_MAX lines under a line that counts the rest, and a long task name is cut
    at the task column's fixed width instead of re-measuring the column over every row."""
    hosts = [f"gpu{i:03d}" for i in range(200)]
    long_task = "Install the very long named task " * 4
    flood = [ev("playbook_on_task_start", task=long_task, stdout=f"TASK [{long_task}]")]
    for round_ in range(10):
        for host in hosts:
            flood.append(ev("runner_on_start", host, long_task))
            line = f"ok: [{host}] {round_}"
            flood.append(ev("runner_on_ok", host, long_task, line, res={"changed": False}))
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, DeployScreen)
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        screen.follow(events, hosts)
        for event in flood:
            events.put(event)
        await pilot.pause(0.3)
        grid = screen.query_one("#grid", HostGrid)
        seen["rows"] = {key: grid.row_text(key)[1:] for key in grid.keys}
        seen["task_width"] = dict((k, w) for k, _, w in grid.columns)["task"]
        seen["log"] = [str(line.text) for line in screen.query_one("#log", RichLog).lines]
        screen.unfollow()

    drive(signed.home, scenario, start="deploy")
    assert len(seen["rows"]) == 200
    assert all(cells[:5] == ["10", "0", "0", "0", "0"] for cells in seen["rows"].values())
    assert {cells[5] for cells in seen["rows"].values()} == {long_task}
    assert seen["task_width"] == TASK_WIDTH
    log = seen["log"]
    assert len(log) == LOG_MAX + 1, len(log)
    assert log[0] == f"... {len(flood) // 2 + 1 - LOG_MAX} lines not drawn (all are in the run's artifacts)"
    assert log[-1] == "ok: [gpu199] 9"


def test_a_plan_that_fails_says_why_and_is_recorded_as_the_cli_records_it(
    signed: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = signed.tmp / "no-inventory"
    expected = cli_fail_line(capsys, "deploy", "--inventory", str(missing), "--trust", str(signed.trust))
    cli_record = audit_lines(signed.home)[-1]
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        app.screen.query_one("#inventory", Input).value = str(missing)
        app.screen.query_one("#trust", Input).value = str(signed.trust)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).lines
        seen["busy"] = app.screen.busy  # type: ignore[attr-defined]
        await pilot.press("ctrl+y")  # nothing planned: a warning, no run
        await pilot.pause()

    drive(signed.home, scenario, start="deploy")
    assert seen["result"] == [expected]
    assert not seen["busy"]
    record = audit_lines(signed.home)[-1]
    for key in ("action", "object", "outcome", "reason"):
        assert record[key] == cli_record[key], key
    assert record["details"]["argv"] == ["deploy", "--inventory", str(missing), "--trust", str(signed.trust)]
    assert not (signed.home / "runs").exists() or not any((signed.home / "runs").iterdir())


def test_the_inventory_field_starts_at_the_last_deploys(tmp_path: Path) -> None:
    """The Deploy screen's Inventory was empty even where one is the obvious one: it starts at the
    inventory of the last deploy the audit log records as done (not a --check, not a failed one)."""
    from vigil.installer import ops

    home = tmp_path / "home"
    for obj, outcome, check in (
        ("/site/a", "ok", False),
        ("/site/b", "ok", True),
        ("/site/c", "failed", False),
    ):
        inv = ops.Invocation(home=home, argv=["deploy"], action="deploy")
        try:
            with ops.audited(inv):
                inv.object = obj
                inv.details["check"] = check
                if outcome == "failed":
                    raise ops.StackError(obj, "a failed deploy")
        except ops.StackError:
            pass
    seen: dict[str, str] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        seen["inventory"] = app.screen.query_one("#inventory", Input).value

    drive(home, scenario, start="deploy")
    assert seen["inventory"] == "/site/a"
    assert ops.last_deployed_inventory(home, ok_only=False) == "/site/c"
    assert ops.last_deployed_inventory(tmp_path / "empty") is None
