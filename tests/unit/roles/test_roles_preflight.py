"""Preflight fails early and names the variable to fix — run for real, on the controller only."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.rendering import run_tasks


def preflight(role: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"{role} preflight",
            "ansible.builtin.import_role": {"name": role, "tasks_from": "preflight"},
        }
    ]


def fails_with(tmp: Path, tasks: list[dict[str, Any]], **extra: Any) -> str:
    res = run_tasks(tmp, tasks, extra_vars=extra)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    return " ".join(out.split())


def test_receiver_outside_the_site_is_refused(tmp_path: Path) -> None:
    out = fails_with(
        tmp_path, preflight("alertmanager"), alertmanager_webhook_url="https://hooks.example.com/x"
    )
    assert "receiver URL https://hooks.example.com/x points at hooks.example.com" in out
    assert "`alertmanager_webhook_url`" in out and "`alertmanager_site_hosts`" in out


def _sub(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir()
    return tmp / name


def test_page_webhook_or_smtp_relay_outside_the_site_is_refused(tmp_path: Path) -> None:
    out = fails_with(
        _sub(tmp_path, "page"),
        preflight("alertmanager"),
        alertmanager_page_webhook_url="https://pager.example.com/hook",
    )
    assert "receiver URL https://pager.example.com/hook points at pager.example.com" in out
    out = fails_with(
        _sub(tmp_path, "smtp"),
        preflight("alertmanager"),
        alertmanager_page_email_to=["a@b.c"],
        alertmanager_smtp_smarthost="smtp.example.com:25",
    )
    assert "points at smtp.example.com" in out


def test_email_without_a_relay_names_the_variable(tmp_path: Path) -> None:
    out = fails_with(tmp_path, preflight("alertmanager"), alertmanager_digest_email_to=["hpc@site.internal"])
    assert "`alertmanager_smtp_smarthost`" in out


def test_bad_energy_budget_or_duration_cap_is_refused(tmp_path: Path) -> None:
    out = fails_with(
        _sub(tmp_path, "b"), preflight("vmalert"), vmalert_account_energy_budgets={"physics": -5}
    )
    assert "`vmalert_account_energy_budgets` is a positive number of kWh" in out
    out = fails_with(_sub(tmp_path, "c"), preflight("vmalert"), vmalert_alert_duration_cap="soon")
    assert "`vmalert_alert_duration_cap` is empty or a duration" in out


@pytest.mark.parametrize("cap", ["0s", "500ms", "ten seconds"])
def test_bad_group_interval_cap_is_refused(tmp_path: Path, cap: str) -> None:
    out = fails_with(tmp_path, preflight("vmalert"), vmalert_group_interval_cap=cap)
    want = f'`vmalert_group_interval_cap` is "{cap}": set it empty (the shipped intervals) or to a duration'
    assert want in out


def test_the_lab_group_interval_cap_passes_its_check(tmp_path: Path) -> None:
    res = run_tasks(tmp_path, preflight("vmalert"), extra_vars={"vmalert_group_interval_cap": "10s"})
    out = " ".join((res.stdout + res.stderr).split())
    after = out.split("TASK [vmalert : Check the rule group interval cap]")[1]
    assert after.lstrip("* ").startswith("ok: [mon01]"), after[:500]


def test_missing_artifact_names_the_variable(tmp_path: Path) -> None:
    out = fails_with(tmp_path, preflight("vmalert"), vmalert_artifact="bin/vmalert-prod")
    assert "vmalert: the bundle has no usable `bin/vmalert-prod` (from `vmalert_artifact`)" in out
    assert "bin/vmalert" in out  # what the bundle does ship


def test_bad_retention_names_the_variable(tmp_path: Path) -> None:
    out = fails_with(tmp_path, preflight("victoriametrics"), victoriametrics_retention_period="one year")
    assert "`victoriametrics_retention_period` (a number with h, d, w or y: one year)" in out


def test_without_the_bundle_vars_the_role_says_how_to_run(tmp_path: Path) -> None:
    out = fails_with(tmp_path, preflight("node_exporter"), vigil_artifacts=None)
    assert "`vigil_artifacts` is not set. Run the playbook through `vigil deploy`" in out


def test_argument_specs_refuse_a_wrong_type(tmp_path: Path) -> None:
    tasks = [{"name": "node_exporter", "ansible.builtin.import_role": {"name": "node_exporter"}}]
    out = fails_with(tmp_path, tasks, node_exporter_port="not-a-port")
    assert "node_exporter_port" in out and "int" in out


def test_common_internal_role_refuses_to_run(tmp_path: Path) -> None:
    tasks = [{"name": "_common", "ansible.builtin.import_role": {"name": "_common"}}]
    out = fails_with(tmp_path, tasks)
    assert "_common is an internal role of vigil's component roles" in out


@pytest.mark.parametrize("role", ["victoriametrics", "alertmanager", "vmalert", "node_exporter"])
def test_preflight_passes_with_the_defaults(tmp_path: Path, role: str) -> None:
    """The same runs pass with sane values: the failures above come from the checks, not the harness.

    The port check runs `ss` on this machine, so the port is moved to one nothing listens on.
    """
    res = run_tasks(tmp_path, preflight(role), extra_vars={f"{role}_port": 1})
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]


def test_a_port_held_by_another_service_is_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        out = fails_with(tmp_path, preflight("node_exporter"), node_exporter_port=port)
    assert f"node_exporter: port(s) {port} already held by" in out
    assert "move vigil-node-exporter with node_exporter_port" in out
