"""Helpers for the TUI's Pilot tests: a real signed bundle, and the app driven at 80x24 as the CLI builds it.

No pytest-asyncio here: each test drives the app with ``asyncio.run(...)`` through :func:`drive`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot

from tests.factories import KeyPair, craft_bundle, make_key, make_trust, payload_offset
from vigil.tui import VigilApp, make_app

SIZE = (80, 24)


@dataclass
class Signed:
    home: Path
    trust: Path
    key: KeyPair
    bundle: Path
    tmp: Path

    def tampered(self) -> Path:
        """A copy of the bundle with one payload byte flipped (its signature still good)."""
        bad = self.tmp / "tampered" / self.bundle.name
        bad.parent.mkdir(exist_ok=True)
        data = bytearray(self.bundle.read_bytes())
        offset, size = payload_offset(self.bundle)
        data[offset + size // 2] ^= 0x01
        bad.write_bytes(bytes(data))
        return bad


def make_signed(tmp_path: Path) -> Signed:
    home = tmp_path / "home"
    key = make_key(tmp_path / "keys", "release")
    make_trust(tmp_path / "trust.json", [key])
    bundle = craft_bundle(tmp_path / "out", [key], version=3).path
    return Signed(home, tmp_path / "trust.json", key, bundle, tmp_path)


Scenario = Callable[[VigilApp, Pilot[None]], Awaitable[None]]


def drive(
    home: Path,
    scenario: Scenario,
    *,
    start: str = "import",
    operator: str | None = "alice",
    size: tuple[int, int] = SIZE,
) -> VigilApp:
    """Run the app at SIZE (80x24) through SCENARIO; return it (for what it holds after)."""
    app = make_app(home, operator, start=start)

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scenario(app, pilot)

    asyncio.run(run())
    return app


async def settle(app: VigilApp, pilot: Pilot[None]) -> None:
    """Wait for the workers, then for what they handed to the UI thread."""
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def cli_fail_line(capsys: object, *argv: str) -> str:
    """The FAIL line ``vigil ARGV`` prints (run in-process), for comparison with the screen's (the
    progress lines some commands print on stderr before it are skipped)."""
    from vigil.installer.cli import main

    assert main(list(argv)) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    return next(line for line in err.splitlines() if line.startswith("FAIL: "))


def audit_lines(home: Path) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in (home / "audit" / "log.jsonl").read_text().splitlines()]
