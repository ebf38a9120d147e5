"""Upgrade and rollback on the Deploy screen: the command line it stands for, the plan that fails in the
CLI's words with the CLI's audit record, and the refusals it makes before anything runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Select
from tui_helpers import Signed, audit_lines, cli_fail_line, drive, settle

from vigil.installer.cli import main
from vigil.tui import VigilApp
from vigil.tui.screens.deploy import admin_lines, move_argv
from vigil.tui.widgets import ResultLine


def test_the_screen_runs_the_command_an_operator_would_type() -> None:
    inv, trust = Path("/site"), Path("/t.json")
    assert move_argv("upgrade", inv, None, None, 1, False) == ["upgrade", "--inventory", "/site"]
    assert move_argv("upgrade", inv, trust, 4, 3, True) == [
        "upgrade", "--inventory", "/site", "--trust", "/t.json", "--to", "4", "--serial", "3"
    ]  # fmt: skip
    assert move_argv("rollback", inv, None, None, 1, True) == [
        "rollback", "--inventory", "/site", "--keep-store"
    ]  # fmt: skip
    assert move_argv("upgrade", inv, None, None, 1, False, admin=False) == [
        "upgrade", "--inventory", "/site", "--no-admin"
    ]  # fmt: skip


def test_the_admin_hosts_line_says_its_plan_or_what_the_run_did() -> None:
    def out(**admin: object) -> Any:
        return SimpleNamespace(admin=admin)

    plan = "admin host: vigil 0.9.0 (bundle 1) -> 0.10.0 (bundle 2) under /opt/vigil/admin"
    assert admin_lines(out(plan=plan)) == [plan]
    switched = out(root="/opt/vigil/admin", switched=True, current="0.10.0-bundle2", installed="new")
    assert admin_lines(switched) == [
        "admin host: /opt/vigil/admin/current -> 0.10.0-bundle2 (installed: new)"
    ]
    kept = out(root="/opt/vigil/admin", switched=False, current="0.10.0-bundle2")
    assert admin_lines(kept) == [
        "admin host: 0.10.0-bundle2 installed beside, /opt/vigil/admin/current not switched"
    ]
    assert admin_lines(out()) == []  # --no-admin, or a run that ended before the admin step


def unreachable_site(root: Path) -> Path:
    """One monitoring host behind a closed port on 127.0.0.1: never reached, nothing changed."""
    root.mkdir(parents=True)
    host = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "root"}
    doc = {"all": {"children": {"monitoring": {"hosts": {"mon01": host}}}}}
    (root / "hosts.yml").write_text(yaml.safe_dump(doc))
    return root


def fill(app: VigilApp, inventory: Path, trust: Path, action: str, **fields: str) -> None:
    app.screen.query_one("#inventory", Input).value = str(inventory)
    app.screen.query_one("#trust", Input).value = str(trust)
    app.screen.query_one("#action", Select).value = action
    for name, value in fields.items():
        app.screen.query_one(f"#{name}", Input).value = value


@pytest.mark.parametrize(("action", "no_admin"), [("upgrade", False), ("rollback", False), ("upgrade", True)])
def test_a_plan_that_cannot_reach_a_host_says_so_as_the_cli_does_and_changes_nothing(
    signed: Signed, capsys: pytest.CaptureFixture[str], action: str, no_admin: bool
) -> None:
    assert main(["bundle", "import", str(signed.bundle), "--trust", str(signed.trust)]) == 0
    site = unreachable_site(signed.tmp / "site")
    argv = [action, "--inventory", str(site), "--trust", str(signed.trust), "--to", "3"]
    argv += ["--no-admin"] if no_admin else []
    expected = cli_fail_line(capsys, *argv, "--check")
    assert expected.startswith("FAIL: host mon01: unreachable: ") and "nothing was changed" in expected
    cli_record = audit_lines(signed.home)[-1]
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        fill(app, site, signed.trust, action, to="3")
        app.screen.query_one("#no-admin", Checkbox).value = no_admin
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
    assert record["details"]["argv"] == [*argv, "--check"]  # type: ignore[index]
    assert record["details"]["front_end"] == "tui"  # type: ignore[index]
    assert not (signed.home / "site" / "history.jsonl").exists()  # no upgrade ran


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"to": "two"}, "To and Serial are whole numbers"),
        ({"serial": "-1"}, "To and Serial are whole numbers"),
        ({"limit": "gpu_nodes"}, "moves every host of the inventory; clear Limit"),
    ],
)
def test_bad_fields_are_refused_before_anything_runs(
    signed: Signed, fields: dict[str, str], reason: str
) -> None:
    site = unreachable_site(signed.tmp / "site")
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        fill(app, site, signed.trust, "upgrade", **fields)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).lines
        seen["busy"] = app.screen.busy  # type: ignore[attr-defined]

    drive(signed.home, scenario, start="deploy")
    assert len(seen["result"]) == 1 and seen["result"][0].startswith("FAIL: upgrade: "), seen
    assert reason in seen["result"][0]
    assert not seen["busy"]
    assert not (signed.home / "audit").exists()  # refused on the screen: no action began


def test_the_confirm_button_names_the_action_whole_and_follows_the_choice(tmp_path: Path) -> None:
    """ "Upgrade" was cut to "Upgrad", and kept after switching back to deploy until the next plan."""
    from textual.widgets import Button

    seen: list[tuple[str, int]] = []

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        button = app.screen.query_one("#confirm", Button)
        for action in ("upgrade", "rollback", "deploy"):
            app.screen.query_one("#action", Select).value = action
            await pilot.pause()
            await settle(app, pilot)
            seen.append((str(button.label), button.content_region.width))

    drive(tmp_path / "home", scenario, start="deploy")
    assert [label for label, _ in seen] == ["Upgrade", "Rollback", "Deploy"]
    for label, width in seen:
        assert width >= len(label), (label, width)
