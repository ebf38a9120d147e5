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
from tui_helpers import Signed, cli_fail_line, drive, settle

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
    assert shared[0].startswith("variables every host shares (read-only here")
    assert "  node_exporter_port = 9100" in shared and "  common_require_time_sync = false" in shared
    # a group's or a host's own variable is not shared by every host
    assert not any("dcgm_exporter_enabled" in line or "ansible_port" in line for line in shared)
    # checking changes nothing and is no command: nothing recorded, no host contacted (no run dir)
    assert not (home / "audit" / "log.jsonl").exists()
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
