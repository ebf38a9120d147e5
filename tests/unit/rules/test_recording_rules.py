"""The recording rules on known inputs (promtool test rules files under recording/)."""

from __future__ import annotations

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

    rules = {
        r["record"]: " ".join(r["expr"].split())
        for g in yaml.safe_load((rulekit.RULES / "vigil-accounting.yml").read_text())["groups"]
        for r in g["rules"]
    }
    hourly = "sum_over_time(({})[59m30s:1m])"
    assert rules["job:gpus_allocated:count"] == usage.job_gpus("")
    assert rules["job:gpu_energy_joules:increase1h"] == hourly.format(usage.job_energy_1m(""))
    assert rules["cluster:gpus_scraped:count"] == usage.cluster_gpus()
    assert rules["cluster:gpus_unallocated:sum"] == usage.unallocated_gpus()
    assert rules["cluster:gpu_unallocated_energy_joules:increase1h"] == hourly.format(
        usage.unallocated_energy_1m()
    )
    assert rules["cluster:gpu_energy_joules:increase1h"] == hourly.format(usage.cluster_energy_1m())
    assert rules["account_user:gpus_active:count"] == usage.active_gpus("")
    assert rules["account_user:gpu_active_hours:sum1h"] == (
        "sum_over_time(account_user:gpus_active:count[59m30s]) / 60"
    )
    # the reports read every breakdown from the account_user series: they keep its labels
    for name in ("account_user:gpu_hours:sum1h", "account_user:gpu_energy_joules:increase1h"):
        assert rules[name].startswith(f"sum by ({usage.BY}) (job:"), name
    # the reports' probe: an hour is recorded once the group's last rule has its sample
    assert list(rules)[list(rules).index("cluster:gpu_energy_joules:increase1h") + 1] == (
        "account:gpu_energy_kwh:sum30d"
    )
