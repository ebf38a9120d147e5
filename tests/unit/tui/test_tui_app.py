"""The app as a whole: keys, help, the command palette, `vigil tui`, and the layering of the package."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_helpers import drive, settle

from vigil.installer import cli
from vigil.installer.cli import tui as tui_cli
from vigil.tui import VigilApp
from vigil.tui.screens import (
    SCREENS,
    AuditScreen,
    BuildScreen,
    DeployScreen,
    HelpScreen,
    ImportScreen,
    InventoryScreen,
    OverviewScreen,
    ReportsScreen,
)
from vigil.tui.screens._base import NAV

TUI = Path(__file__).resolve().parents[3] / "tui"


def test_function_keys_help_and_quit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_VM_URL", "http://127.0.0.1:1")  # the overview reads nothing real here
    monkeypatch.setenv("VIGIL_ALERTMANAGER_URL", "http://127.0.0.1:1")
    seen: list[Any] = []

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        for key in ("f3", "f4", "f5", "f6", "f7", "f8", "f2"):
            await pilot.press(key)
            await settle(app, pilot)
            seen.append(type(app.screen))
        await pilot.press("f1")
        await pilot.pause()
        seen.append(type(app.screen))
        await pilot.press("escape")
        await pilot.pause()
        seen.append(type(app.screen))
        await pilot.press("ctrl+q")
        await pilot.pause()
        seen.append(app.is_running)

    drive(tmp_path / "home", scenario)
    assert seen == [
        DeployScreen,
        AuditScreen,
        OverviewScreen,
        BuildScreen,
        InventoryScreen,
        ReportsScreen,
        ImportScreen,
        HelpScreen,
        ImportScreen,
        False,
    ]
    assert [(s.MODE, s.LABEL) for s in SCREENS] == list(NAV)


def test_every_action_is_in_the_command_palette(tmp_path: Path) -> None:
    titles: dict[str, list[str]] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        keys = ("f2", "f3", "f4", "f6", "f7", "f8")
        screens = (ImportScreen, DeployScreen, AuditScreen, BuildScreen, InventoryScreen, ReportsScreen)
        for key, screen in zip(keys, screens, strict=True):
            await pilot.press(key)
            await settle(app, pilot)
            titles[screen.LABEL] = [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("ctrl+p")  # the palette opens over the screen
        await pilot.pause()
        titles["palette"] = [type(app.screen).__name__]

    drive(tmp_path / "home", scenario)
    goto = ["Go to " + s.LABEL for s in SCREENS] + ["Help", "Quit"]
    assert set(goto) <= set(titles["Import"])
    assert {"Import: Verify", "Import: Inspect", "Import: Import"} <= set(titles["Import"])
    assert {"Deploy: Plan", "Deploy: Deploy", "Deploy: Discard", "Deploy: Cancel run"} <= set(
        titles["Deploy"]
    )
    assert {"Audit: Reload", "Audit: Verify", "Audit: Checkpoint", "Audit: Export"} <= set(titles["Audit"])
    assert {"Bundle: Build", "Bundle: Split", "Bundle: Channels"} <= set(titles["Bundle"])
    assert {"Inventory: Check", "Inventory: Reach hosts"} <= set(titles["Inventory"])
    assert {
        "Reports: Usage",
        "Reports: Energy",
        "Reports: List",
        "Reports: Show",
        "Reports: Verify",
        "Reports: Export",
    } <= set(titles["Reports"])
    assert titles["palette"] == ["CommandPalette"]


def test_vigil_tui_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tui", "--help"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("usage: vigil tui [-h]")
        and "{import,deploy,audit,overview,bundle,inventory,reports}" in out
    )


def test_bare_vigil_opens_the_console_only_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_HOME", str(tmp_path / "home"))
    opened: list[tuple[Path, str | None, str]] = []
    monkeypatch.setattr(tui_cli, "run_app", lambda *a: opened.append(a))
    # not a terminal (a pipe, a script, this test's capture): the usage error, as before
    assert cli.main([]) == 1
    assert capsys.readouterr().err == "FAIL: vigil: the following arguments are required: COMMAND\n"
    assert opened == []
    monkeypatch.setattr(cli, "on_terminal", lambda: True)
    monkeypatch.setenv("VIGIL_OPERATOR", "carol")
    assert cli.main([]) == 0
    assert opened == [(tmp_path / "home", "carol", "overview")]


def vigil_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vigil."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("vigil.")}
    return found


def test_the_tui_renders_over_the_operations_layer() -> None:
    """The TUI's modules call vigil.installer.ops for the work; below it they read only result types
    (the store's ImportResult, the verifier's VerifiedHead, the deploy's plan, run and Progress, the
    report store's Stored and Verified), the error base classes and the audit Summary, and the few
    read-only functions listed. Never the CLI."""
    allowed = {
        "vigil.installer",
        "vigil.installer.ops",
        "vigil.basics.errors",
        "vigil.basics.printable",  # outside text made visible, as the command line prints it
        "vigil.installer.audit",
        "vigil.installer.audit.errors",
        "vigil.installer.deploy",
        "vigil.bundle.store",
        "vigil.bundle.verify",
        # read for display, with no operation of their own in vigil.installer.ops (yet): a channel's
        # catalog and lock, the inventory check deploy runs first and its pre-flight ping, and where a
        # stored report's file is
        "vigil.bundle.catalog",
        "vigil.installer.deploy.inventory",
        "vigil.installer.deploy.runner",
        "vigil.installer.reports",
    }
    offenders = {
        f"{path.relative_to(TUI)}: {module}"
        for path in sorted(TUI.rglob("*.py"))
        for module in vigil_imports(path)
        if module not in allowed and not module.startswith("vigil.tui")
    }
    assert offenders == set()


def test_the_clis_screen_names_are_the_apps() -> None:
    from vigil.installer.cli.tui import SCREENS as CLI_SCREENS
    from vigil.tui.screens import SCREENS

    assert tuple(cls.MODE for cls in SCREENS) == CLI_SCREENS
