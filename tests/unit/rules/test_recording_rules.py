"""The recording rules on known inputs (promtool test rules files under recording/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.unit.rules import rulekit

#: the rule files the recording tests load
RULE_FILES = ("vigil-gpu.yml", "vigil-accounting.yml")


@pytest.mark.parametrize(
    "test_file", sorted((rulekit.HERE / "recording").glob("*.yml")), ids=lambda p: p.name
)
def test_recording_rules(test_file: Path, tmp_path: Path) -> None:
    files = rulekit.deploy(tmp_path / "rules")
    doc = test_file.read_text()
    out = tmp_path / test_file.name
    out.write_text(
        f"rule_files: [{', '.join(str(p) for p in files if p.name in RULE_FILES)}]\n"
        "evaluation_interval: 1m\n" + doc
    )
    res = rulekit.promtool("test", "rules", str(out))
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_accounting_rules_are_the_reports_expressions() -> None:
    """The reports read raw series with the expressions the rules record (installer/reports/usage.py):
    each rule's text is built from the same parts, so a change to one is a change to both."""
    from vigil.installer.reports import usage

    groups = {
        g["name"]: g for g in yaml.safe_load((rulekit.RULES / "vigil-accounting.yml").read_text())["groups"]
    }
    rules = {r["record"]: " ".join(r["expr"].split()) for r in groups["vigil_accounting"]["rules"]}
    assert rules == usage.accounting_rules()
    assert list(rules) == list(usage.accounting_rules())
    # the hourly series the reports read are the reports' raw queries over the rules' hour
    raw = usage.raw_queries(3600, "")
    w = "[3600s:1m]"
    for name, key in (
        ("account_user:gpu_hours:sum1h", "gpu_hours"),
        ("account_user:gpu_energy_joules:increase1h", "joules"),
        ("account_user:gpu_active_hours:sum1h", "active_hours"),
        ("cluster:gpu_hours:sum1h", "cluster_gpu_hours"),
        ("cluster:gpu_unallocated_hours:sum1h", "unallocated_gpu_hours"),
        ("cluster:gpu_energy_joules:increase1h", "cluster_joules"),
        ("cluster:gpu_unallocated_energy_joules:increase1h", "unallocated_joules"),
    ):
        assert rules[name].replace(f"[{usage.HOUR_WINDOW}:1m]", w) == raw[key], name
    # the reports' probe: an hour is recorded once the group's last rule has its sample
    assert list(rules)[-1] == "cluster:gpu_energy_joules:increase1h"
    assert usage.RECORDED_PROBE.startswith("count(last_over_time(cluster:gpu_energy_joules:increase1h[")


def test_no_accounting_rule_reads_a_series_its_group_records() -> None:
    """vmalert runs a group's rules in order but writes each result asynchronously (its documentation,
    "Limitations"), so a rule reading another rule of its group at the same evaluation finds that
    rule's previous minute, or nothing: an hour read from it would end a minute early, or late, by
    how the write raced the query. A group may read what other groups record, never its own."""
    for group in yaml.safe_load((rulekit.RULES / "vigil-accounting.yml").read_text())["groups"]:
        recorded = {r["record"] for r in group["rules"] if "record" in r}
        for rule in group["rules"]:
            names = set(re.findall(r"[a-z_]+:[a-z_0-9]+:[a-z_0-9]+", rule["expr"]))
            assert not names & recorded, (group["name"], rule.get("record"), names & recorded)
