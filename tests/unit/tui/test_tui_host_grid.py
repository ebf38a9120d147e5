"""The Deploy screen's grid: one line per host, a changed host draws only its own line again, text is
never read as markup, and the header stays on top while the rows scroll."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from vigil.tui.widgets.deploy import HostGrid

COLUMNS: list[tuple[str, str, int | None]] = [("host", "host", None), ("ok", "ok", 5), ("task", "task", 12)]


class GridApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HostGrid(COLUMNS, id="grid")


def lines(app: App[None]) -> list[str]:
    """The screen as text, line by line (right-trimmed)."""
    grid = app.query_one(HostGrid)
    return [grid.render_line(y).text.rstrip() for y in range(grid.size.height)]


def drive(scenario: Any, size: tuple[int, int] = (40, 8)) -> None:
    async def run() -> None:
        app = GridApp()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scenario(app, pilot)

    asyncio.run(run())


def test_rows_show_under_a_header_and_a_change_draws_only_its_line() -> None:
    seen: dict[str, Any] = {}

    async def scenario(app: App[None], pilot: Any) -> None:
        grid = app.query_one(HostGrid)
        for i in range(5):
            grid.set_row(f"gpu{i:02d}", [Text(f"gpu{i:02d}"), Text("0"), Text("Install")])
        await pilot.pause()
        seen["first"] = lines(app)
        drawn = grid.repaints
        grid.set_row("gpu03", [Text("gpu03"), Text("1"), Text("Start the service now")])
        await pilot.pause()
        seen["second"] = lines(app)
        seen["redrawn"] = grid.repaints - drawn
        grid.set_row("gpu03", [Text("gpu03"), Text("1"), Text("Start the service now")])  # the same
        await pilot.pause()
        seen["unchanged"] = grid.repaints - drawn
        seen["text"] = grid.row_text("gpu03")

    drive(scenario)
    assert seen["first"][:3] == [
        " host   ok     task",
        " gpu00  0      Install",
        " gpu01  0      Install",
    ]
    assert seen["second"][4] == " gpu03  1      Start the s…"  # cut at the column's width
    assert seen["redrawn"] == 1 and seen["unchanged"] == 1  # one line drawn again, once
    assert seen["text"] == ["gpu03", "1", "Start the service now"]  # kept whole


def test_markup_in_a_task_name_is_shown_as_it_is() -> None:
    seen: dict[str, Any] = {}

    async def scenario(app: App[None], pilot: Any) -> None:
        grid = app.query_one(HostGrid)
        grid.set_row("mon01", [Text("mon01"), Text("1"), Text("[bold]x[/]")])
        await pilot.pause()
        seen["line"] = lines(app)[1]

    drive(scenario)
    assert seen["line"] == " mon01  1      [bold]x[/]"


def test_a_long_host_name_widens_its_column_for_every_row() -> None:
    seen: dict[str, Any] = {}

    async def scenario(app: App[None], pilot: Any) -> None:
        grid = app.query_one(HostGrid)
        grid.set_row("a", [Text("a"), Text("1"), Text("t")])
        grid.set_row("compute-node-17", [Text("compute-node-17"), Text("2"), Text("t")])
        await pilot.pause()
        seen["lines"] = lines(app)[:3]

    drive(scenario)
    assert seen["lines"] == [
        " host             ok     task",
        " a                1      t",
        " compute-node-17  2      t",
    ]


def test_the_header_stays_while_the_rows_scroll() -> None:
    seen: dict[str, Any] = {}

    async def scenario(app: App[None], pilot: Any) -> None:
        grid = app.query_one(HostGrid)
        for i in range(30):
            grid.set_row(f"n{i:02d}", [Text(f"n{i:02d}"), Text(str(i)), Text("t")])
        grid.focus()
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        seen["lines"] = lines(app)
        seen["count"] = grid.row_count

    drive(scenario)
    assert seen["count"] == 30
    assert seen["lines"][0].startswith(" host")
    assert seen["lines"][-1].startswith(" n29")


def test_a_row_of_the_wrong_width_is_refused() -> None:
    grid = HostGrid(COLUMNS)
    with pytest.raises(ValueError, match="row x: 2 cells for 3 columns"):
        grid.set_row("x", [Text("x"), Text("1")])
