"""The lab's short timings are the lab inventory's alone: the roles ship the production ones.

The lab scrapes every 10 s, evaluates the rule groups as often (all but the accounting groups, which
the reports count on), caps every alert's `for:` at 20 s and lets Alertmanager notify within seconds
(installer/lab/inventory.py). A site deploys with the roles' defaults: the shipped rule intervals,
vmalert's 1m evaluation interval, Alertmanager's 30 s / 5 m / 4 h.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.unit.rules import rulekit
from vigil.installer.lab.inventory import inventory_data
from vigil.installer.lab.paths import LabPaths

ROLES = rulekit.REPO / "roles"
SHIPPED_INTERVALS = rulekit.SHIPPED_INTERVALS
ACCOUNTING = {"vigil_accounting", "vigil_accounting_30d", "vigil_accounts"}


def defaults(role: str) -> dict[str, Any]:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())  # type: ignore[no-any-return]


def lab_monitoring_vars() -> dict[str, Any]:
    return inventory_data(LabPaths.from_env())["all"]["children"]["monitoring"]["vars"]  # type: ignore[no-any-return]


def deployed_intervals(**settings: Any) -> dict[str, str | None]:
    files = rulekit.role_rule_files(**settings)
    return {g["name"]: g.get("interval") for text in files.values() for g in yaml.safe_load(text)["groups"]}


def test_the_roles_ship_the_production_timings() -> None:
    vmalert = defaults("vmalert")
    assert vmalert["vmalert_group_interval_cap"] == ""
    assert vmalert["vmalert_alert_duration_cap"] == ""
    assert vmalert["vmalert_evaluation_interval"] == "1m"
    am = defaults("alertmanager")
    assert (am["alertmanager_group_wait"], am["alertmanager_group_interval"]) == ("30s", "5m")
    assert am["alertmanager_repeat_interval"] == "4h"
    assert defaults("victoriametrics")["victoriametrics_scrape_interval"] == "30s"
    # VictoriaMetrics' own -search.latencyOffset (30 s): no flag of the role's changes it
    assert defaults("victoriametrics")["victoriametrics_extra_flags"] == []


def test_a_deploy_with_the_defaults_keeps_the_shipped_rule_files() -> None:
    files = rulekit.role_rule_files()
    for name, text in files.items():
        shipped = (rulekit.RULES / name).read_text()
        if name == "vigil-accounting.yml":  # the group's `params:` (nocache), added on every deploy
            shipped = rulekit.vigil_rule_file(shipped, group_params={"vigil_accounting": {"nocache": ["1"]}})
        assert text == shipped, name
    assert deployed_intervals() == SHIPPED_INTERVALS


def test_the_lab_inventory_sets_the_short_timings() -> None:
    lab = lab_monitoring_vars()
    assert {k: v for k, v in lab.items() if not k.startswith("redfish_")} == {
        "victoriametrics_scrape_interval": "10s",
        "victoriametrics_scrape_timeout": "5s",
        "victoriametrics_extra_flags": ["-search.latencyOffset=10s"],
        "vmalert_group_interval_cap": "10s",
        "vmalert_evaluation_interval": "10s",
        "vmalert_alert_duration_cap": "20s",
        "alertmanager_group_wait": "5s",
        "alertmanager_group_interval": "30s",
    }
    # the groups are evaluated as often as the targets are scraped
    assert lab["vmalert_group_interval_cap"] == lab["victoriametrics_scrape_interval"]


def test_a_deploy_with_the_lab_inventory_evaluates_all_but_the_accounting_groups_every_10s() -> None:
    lab = {k: v for k, v in lab_monitoring_vars().items() if k.startswith("vmalert_")}
    got = deployed_intervals(**lab)
    assert got == {
        name: (every if name in ACCOUNTING else "10s") for name, every in SHIPPED_INTERVALS.items()
    }
    files = rulekit.role_rule_files(**lab)
    for name in ("vigil-accounting.yml", "vigil-accounts.yml"):
        assert "group intervals capped" not in files[name], name


def test_every_lab_rule_file_still_passes_promtool(tmp_path: Path) -> None:
    lab = {k: v for k, v in lab_monitoring_vars().items() if k.startswith("vmalert_")}
    paths = []
    # without the accounting group's `params:`, which promtool 2.42 refuses (vmalert -dryRun checks
    # the files with them: tests/integration/test_roles_config.py)
    for name, text in rulekit.role_rule_files(**lab, _vmalert_group_params={}).items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    res = rulekit.promtool("check", "rules", *paths)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(paths), res.stdout
