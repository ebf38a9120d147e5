"""Drive a deploy from the console (`vigil tui`), as an operator at a 120x40 terminal would."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

#: the longest a lab deploy may take from the console
DEPLOY_S = 900


def deploy_from_the_console(home: Path, inventory: Path) -> dict[str, Any]:
    """Deploy screen: inventory typed in, ctrl+r (plan), ctrl+y (confirm), then wait for the end.
    Returns the result line, the grid, the run id, Ansible's own recap and the audit record."""
    from textual.widgets import Input

    from vigil.tui import make_app
    from vigil.tui.screens import DeployScreen
    from vigil.tui.widgets import ResultLine
    from vigil.tui.widgets.deploy import HostGrid

    app = make_app(home, "lab-operator", start="deploy")
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DeployScreen)
            screen.query_one("#inventory", Input).value = str(inventory)
            await pilot.press("ctrl+r")
            deadline = time.monotonic() + 300
            while screen.plan is None:  # inventory checked, bundle re-verified, hosts reached
                assert screen.busy, screen.query_one("#result", ResultLine).lines
                assert time.monotonic() < deadline, "the plan never came"
                await pilot.pause(0.5)
            await pilot.press("ctrl+y")
            deadline = time.monotonic() + DEPLOY_S
            while screen.busy:
                assert time.monotonic() < deadline, "the deploy from the console never ended"
                await pilot.pause(1.0)
            await app.workers.wait_for_complete()
            await pilot.pause(0.5)
            grid = screen.query_one("#grid", HostGrid)
            seen["grid"] = {key: grid.row_text(key)[1:] for key in grid.keys}
            seen["result"] = screen.query_one("#result", ResultLine).lines
            assert screen.result is not None
            seen["run_id"] = screen.result.run_id
            seen["run_dir"] = screen.result.run_dir

    asyncio.run(run())
    events = sorted((seen["run_dir"] / "artifacts" / "job_events").glob("*.json"))
    stats = next(
        json.loads(p.read_text())["event_data"]
        for p in reversed(events)
        if json.loads(p.read_text())["event"] == "playbook_on_stats"
    )
    seen["stats"] = {k: stats.get(k) or {} for k in ("ok", "changed", "failures", "dark", "skipped")}
    log = [json.loads(line) for line in (home / "audit" / "log.jsonl").read_text().splitlines()]
    seen["record"] = next(r for r in reversed(log) if r["action"] == "deploy")
    return seen
