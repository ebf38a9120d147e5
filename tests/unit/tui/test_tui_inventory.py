"""The Inventory screen: the deploy's own inventory check (hosts by group, addresses, the variables
every host shares), its refusal in the CLI's words, and reachability only when asked."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_helpers import Signed, audit_lines, cli_fail_line, drive, settle

from vigil.tui import VigilApp
from vigil.tui.widgets import ResultLine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_inventory(root: Path, *, extra_group: bool = False, unreachable_port: int = 0) -> Path:
    """mon01 (this host, local connection) and gpu01 (ssh to a closed port on 127.0.0.1), with
    group_vars/all.yml, a group var and a host var."""
    gpu: dict[str, Any] = {"ansible_host": "127.0.0.1", "ansible_port": unreachable_port or 1}
    children: dict[str, Any] = {
        "monitoring": {"hosts": {"mon01": {"ansible_host": "127.0.0.1", "ansible_connection": "local"}}},
        "gpu_nodes": {"hosts": {"gpu01": gpu}, "vars": {"dcgm_exporter_enabled": True}},
    }
    if extra_group:
        children["login"] = {"hosts": {"login01": {"ansible_host": "10.0.0.5"}}}
    root.mkdir(parents=True)
    (root / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": children}}))
    (root / "group_vars").mkdir()
    (root / "group_vars" / "all.yml").write_text(
        "node_exporter_port: 9100\ncommon_require_time_sync: false\n"
        "ansible_python_interpreter: /usr/bin/python3\n"
    )
    return root


def rows(app: VigilApp) -> list[list[str]]:
    table = app.screen.query_one("#hosts", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def test_check_shows_hosts_by_group_and_shared_variables(tmp_path: Path) -> None:
    inventory = make_inventory(tmp_path / "site")
    home = tmp_path / "home"
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f7")
        await settle(app, pilot)
        app.screen.query_one("#inventory", Input).value = str(inventory)
        app.screen.query_one("#limit", Input).value = "gpu_nodes"
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).text
        seen["rows"] = rows(app)
        seen["vars"] = str(app.screen.query_one("#vars").render())
        seen["counts"] = str(app.screen.query_one("#counts").render())

    drive(home, scenario)
    assert seen["result"] == f"OK: {inventory}: 2 hosts, every one placed and addressed; limit selects 1"
    assert seen["rows"] == [
        ["monitoring", "mon01", "127.0.0.1", "no", ""],
        ["gpu_nodes", "gpu01", "127.0.0.1", "yes", ""],
    ]
    assert seen["counts"] == "monitoring:1 slurm_controller:0 gpu_nodes:1"
    shared = seen["vars"].splitlines()
    # no bundle imported: the roles' argument specs cannot be read, and the screen says so
    assert shared[0].startswith("roles' argument specs: not checked (no bundle imported")
    assert shared[1].startswith("variables every host shares (ctrl+g edits group_vars/all.yml)")
    assert "  node_exporter_port = 9100" in shared and "  common_require_time_sync = false" in shared
    # a group's or a host's own variable is not shared by every host
    assert not any("dcgm_exporter_enabled" in line or "ansible_port" in line for line in shared)
    # the check is `vigil inventory check`, recorded as the CLI records it; no host contacted
    (record,) = audit_lines(home)
    assert (record["action"], record["outcome"], record["object"]) == (
        "inventory.check",
        "ok",
        str(inventory),
    )
    assert record["details"]["argv"] == ["inventory", "check", "-i", str(inventory), "--limit", "gpu_nodes"]  # type: ignore[index]
    assert not (home / "runs").exists()


def test_an_invalid_inventory_is_refused_as_deploy_refuses_it(
    signed: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = make_inventory(signed.tmp / "site", extra_group=True)
    expected = cli_fail_line(capsys, "deploy", "--inventory", str(inventory), "--trust", str(signed.trust))
    assert "group 'login' is not one vigil knows" in expected
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f7")
        await settle(app, pilot)
        field = app.screen.query_one("#inventory", Input)
        field.value = str(inventory)
        field.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).lines
        seen["rows"] = rows(app)

    drive(signed.home, scenario)
    assert seen["result"] == [expected]
    assert seen["rows"] == []


def test_reachability_only_on_request(tmp_path: Path) -> None:
    port = free_port()
    inventory = make_inventory(tmp_path / "site", unreachable_port=port)
    home = tmp_path / "home"
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f7")
        await settle(app, pilot)
        app.screen.query_one("#inventory", Input).value = str(inventory)
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).lines
        seen["rows"] = rows(app)

    drive(home, scenario)
    assert seen["rows"][0][:2] == ["monitoring", "mon01"] and seen["rows"][0][4] == "yes"
    assert seen["rows"][1][:2] == ["gpu_nodes", "gpu01"] and seen["rows"][1][4] not in ("", "yes")
    assert len(seen["result"]) == 1 and seen["result"][0].startswith("FAIL: host gpu01: unreachable: ")
    # the deploy's pre-flight: its artifacts are kept under runs/, as deploy keeps them
    assert [p.name.endswith("-preflight") for p in (home / "runs").iterdir()] == [True]


async def open_editor(app: VigilApp, pilot: Pilot[None], inventory: Path) -> tuple[Any, Any]:
    """The Inventory screen on INVENTORY, its shared-variables editor opened (ctrl+g): the editor
    and its text area."""
    from textual.widgets import TextArea

    await pilot.press("f7")
    await settle(app, pilot)
    app.screen.query_one("#inventory", Input).value = str(inventory)
    await pilot.press("ctrl+g")
    await pilot.pause()
    editor = app.screen
    return editor, editor.query_one("#vars-text", TextArea)


def test_shared_variables_are_edited_in_place_and_a_bad_edit_keeps_the_file(tmp_path: Path) -> None:
    """ctrl+g opens group_vars/all.yml; text that is not a mapping is refused in the CLI's words with
    the file untouched and the editor still open; a good edit is written and the check runs again."""
    inventory = make_inventory(tmp_path / "site")
    all_yml = inventory / "group_vars" / "all.yml"
    original = all_yml.read_text()
    home = tmp_path / "home"
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        editor, area = await open_editor(app, pilot, inventory)
        seen["opened"] = area.text
        area.text = "- not\n- a mapping\n"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        seen["refused"] = editor.query_one("#vars-result", ResultLine).lines
        seen["still_open"] = app.screen is editor
        area.text = original.replace("node_exporter_port: 9100", "node_exporter_port: 9105")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        await settle(app, pilot)
        seen["closed"] = app.screen is not editor
        seen["vars"] = str(app.screen.query_one("#vars").render())

    drive(home, scenario)
    assert seen["opened"] == original
    assert seen["refused"] == [
        f"FAIL: {all_yml}: must be a mapping of variable names, not a list; nothing was written"
    ]
    assert seen["still_open"] and seen["closed"]
    assert all_yml.read_text() == original.replace("node_exporter_port: 9100", "node_exporter_port: 9105")
    assert "  node_exporter_port = 9105" in seen["vars"].splitlines()
    actions = [(r["action"], r["outcome"]) for r in audit_lines(home)]
    assert ("inventory.edit", "failed") in actions or ("inventory.edit", "refused") in actions
    assert actions[-2:] == [("inventory.edit", "ok"), ("inventory.check", "ok")]


def test_one_escape_leaves_the_editor_unsaved(tmp_path: Path) -> None:
    """The footer says "esc Leave unsaved": one press, with the cursor in the text, leaves it, and the
    file is as it was (the text area took the first escape for itself before)."""
    inventory = make_inventory(tmp_path / "site")
    all_yml = inventory / "group_vars" / "all.yml"
    original = all_yml.read_text()
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        editor, area = await open_editor(app, pilot, inventory)
        seen["focused"] = app.focused is area
        await pilot.press("x")
        await pilot.press("escape")
        await settle(app, pilot)
        seen["left"] = app.screen is not editor

    drive(tmp_path / "home", scenario)
    assert seen == {"focused": True, "left": True}
    assert all_yml.read_text() == original
