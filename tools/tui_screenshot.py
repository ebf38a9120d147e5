#!/usr/bin/env python3
"""The README's pictures of the TUI, drawn from what real lab runs recorded.

The Deploy screen at the end of a first deploy: the screen is fed the recorded ansible-runner
events of a first deploy of the lab's four hosts (benchmarks/data/deploy-events-lab.jsonl.gz, with
the time of each event since the first), as a live run feeds it. With --explain, a job's
explanation as Home shows it on Enter: `vigil explain job N --json` of the lab's staged incident
(benchmarks/data/incident-explain-lab.json, tests/lab/test_incident.py), drawn by the console's own
lines. Textual's own screenshot is written as SVG.

Usage: python tools/tui_screenshot.py [--out docs/tui-deploy.svg]
       python tools/tui_screenshot.py --explain [--out docs/tui-explain-incident.svg]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import queue
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "benchmarks" / "data" / "deploy-events-lab.jsonl.gz"
EXPLAINED = REPO / "benchmarks" / "data" / "incident-explain-lab.json"
SIZE = (120, 40)


def recorded() -> list[dict[str, Any]]:
    with gzip.open(RECORDED, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


async def _shot(home: Path, events: list[dict[str, Any]]) -> str:
    from textual.widgets import Input, Label

    from vigil.tui import make_app
    from vigil.tui.screens import DeployScreen

    app = make_app(home, "operator", start="deploy")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        if not isinstance(screen, DeployScreen):
            raise SystemExit(f"FAIL: tui: the app opened {type(screen).__name__}, not the Deploy screen")
        screen.query_one("#inventory", Input).value = "inventories/lab"
        hosts = sorted({e["event_data"]["host"] for e in events if e["event_data"].get("host")})
        q: queue.Queue[dict[str, Any]] = queue.Queue()
        screen.follow(q, hosts)
        for event in events:
            q.put(event)
        while not q.empty():
            await pilot.pause(0.1)
        await pilot.pause(0.2)
        screen.unfollow()
        # the run's own elapsed time, from the recording (the replay took a fraction of it)
        screen.query_one("#status", Label).update(screen.board.status_line(events[-1]["t"]))
        for widget in screen.query("*"):
            if hasattr(widget, "cursor_blink"):
                widget.cursor_blink = False
        await pilot.pause(0.2)
        return app.export_screenshot(title="vigil tui: a deploy of the lab's four hosts")


async def _explain_shot(home: Path, doc: dict[str, Any]) -> str:
    from vigil.installer import ops
    from vigil.tui import make_app
    from vigil.tui.screens.explain import ExplainScreen

    app = make_app(home, "operator", start="overview")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await app.push_screen(ExplainScreen(f"job {doc['job']}", ops.explain_lines(doc)))
        await pilot.pause(0.3)
        return app.export_screenshot(title=f"vigil tui: job {doc['job']} explained")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--explain", action="store_true", help=f"draw the explanation in {EXPLAINED.name}")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    default = "tui-explain-incident.svg" if args.explain else "tui-deploy.svg"
    args.out = args.out or REPO / "docs" / default
    home = Path(tempfile.mkdtemp(prefix="vigil-shot-"))
    try:
        if args.explain:
            svg = asyncio.run(_explain_shot(home, json.loads(EXPLAINED.read_text())))
        else:
            svg = asyncio.run(_shot(home, recorded()))
    finally:  # the state root's audit log is append-only (chattr +a)
        chattr = shutil.which("chattr") or "/usr/bin/chattr"
        subprocess.run([chattr, "-R", "-a", str(home)], capture_output=True, check=False)  # noqa: S603
        shutil.rmtree(home, ignore_errors=True)
    args.out.write_text(svg)
    print(f"OK: {args.out}: {len(svg)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
