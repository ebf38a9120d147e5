"""How the key screens look, at 80x24 and 120x40: Textual's own SVG screenshot of each, compared with
the one kept in tests/unit/tui/snapshots/ (open them in a browser to see them).

A screen that changes on purpose gets its new picture with ``VIGIL_SNAPSHOT_UPDATE=1`` (then look at
it before committing it). The pictures depend on Textual's rendering, so the test extra pins Textual's
version; pytest-textual-snapshot is not used: it pins syrupy 4.8.0, which requires pytest < 9.
The Overview and Audit screens show the time they read their data, so they have no picture here;
their Pilot tests check what they show.
"""

from __future__ import annotations

import os
import queue
import re
from pathlib import Path
from typing import Any

import pytest
from test_tui_deploy import RUN
from textual.pilot import Pilot
from tui_helpers import Signed, drive

from vigil.tui import VigilApp
from vigil.tui.screens import DeployScreen

SNAPSHOTS = Path(__file__).parent / "snapshots"
SIZES = ((80, 24), (120, 40), (200, 50))
SCREENS = ("import", "deploy", "bundle", "inventory", "reports", "help")


def _texts(svg: str) -> list[str]:
    """The text runs of a screenshot, for a readable difference."""
    return [t.replace("&#160;", " ") for t in re.findall(r">([^<]*)</text>", svg)]


def _check(svg: str, name: str, tmp_path: Path) -> None:
    want = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("VIGIL_SNAPSHOT_UPDATE") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        want.write_text(svg)
        return
    assert want.is_file(), f"no snapshot {want}; make it with VIGIL_SNAPSHOT_UPDATE=1 and look at it"
    expected = want.read_text()
    if svg == expected:
        return
    got = tmp_path / f"{name}.svg"
    got.write_text(svg)
    old, new = _texts(expected), _texts(svg)
    changed = [f"- {a!r}\n+ {b!r}" for a, b in zip(old, new, strict=False) if a != b][:5]
    pytest.fail(
        f"{name}: the screen differs from {want} (now: {got}); text runs {len(old)} -> {len(new)}"
        + ("".join(f"\n{c}" for c in changed) or " (the same text; colours or layout differ)")
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", SCREENS)
def test_the_screen_looks_as_it_did(
    screen: str, size: tuple[int, int], signed: Signed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)  # the pictures are in colour
    shot: dict[str, str] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        if screen == "help":
            await pilot.press("f1")
        if screen == "deploy":  # a small run on the grid: ok, changed, failed, unreachable
            deploy = app.screen
            assert isinstance(deploy, DeployScreen)
            events: queue.Queue[dict[str, Any]] = queue.Queue()
            deploy.follow(events, ["mon01", "gpu01", "gpu02"])
            for event in RUN:
                events.put(event)
            await pilot.pause(0.3)
            deploy.unfollow()
            deploy.query_one("#status").update("00:42  task 2: Start node_exporter")  # type: ignore[attr-defined]
        for widget in app.screen.query("*"):  # a blinking cursor is there or not by the clock
            if hasattr(widget, "cursor_blink"):
                widget.cursor_blink = False
        await pilot.pause(0.2)
        shot["svg"] = app.export_screenshot()

    drive(signed.home, scenario, start="import" if screen == "help" else screen, size=size)
    _check(shot["svg"], f"{screen}-{size[0]}x{size[1]}", tmp_path)


@pytest.mark.parametrize("screen", SCREENS[:-1])
def test_every_control_fits_at_80_columns(screen: str, signed: Signed) -> None:
    """A control pushed past the right edge at 80x24 is not there for the operator (the Deploy screen's
    "no admin" box once was): every button, box, field and list lies inside the screen."""
    out: dict[str, list[str]] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.pause(0.2)
        controls = [w for w in app.screen.query("Button, Checkbox, Input, Select") if w.region.width]
        out["outside"] = [
            f"{w.id or type(w).__name__} ends at column {w.region.right}"
            for w in controls
            if w.display and w.region.right > 80
        ]
        out["seen"] = [str(w.id) for w in controls]

    drive(signed.home, scenario, start=screen, size=(80, 24))
    assert out["seen"], f"{screen}: no control was laid out"
    assert out["outside"] == [], f"{screen}: {out['outside']}"


@pytest.mark.parametrize(
    ("screen", "pane"), [("deploy", "#log"), ("inventory", "#vars-box"), ("reports", "#detail-box")]
)
def test_a_large_terminal_gives_the_bottom_pane_the_room(screen: str, pane: str, signed: Signed) -> None:
    """At 200x50 the table above left about 30 blank lines and the log or detail below got 4 to 6:
    the two now share the height (the pane keeps its least height at 80x24)."""
    out: dict[str, int] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.pause(0.2)
        out["pane"] = app.screen.query_one(pane).region.height
        out["screen"] = app.screen.region.height

    drive(signed.home, scenario, start=screen, size=(200, 50))
    assert out["pane"] >= 15, out
