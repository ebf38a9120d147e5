"""Every shipped rule file passes promtool, and every alert has promtool unit tests that fire on
its fault, stay silent on a healthy series and on a flapping one — and fail when the rule breaks.

Rules as deployed with keep_firing_for (rulekit.deploy). vmalert's own parser: tests/integration
(`test_shipped_rules_pass_vmalert_dry_run`) and test_vmalert_dry_run below when a bundle's vmalert
is at hand.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.rules import rulekit

ALERTS = rulekit.rules_by_alert()
TEST_FILES = {p.stem: p for p in sorted((rulekit.HERE / "alerts").glob("*.yml"))}
# Flapping cases that are not about `for:` (a counter reset, a sticky field, spikes between hour
# marks, a level that swings without filling): dropping `for:` leaves them silent, rightly.
FLAP_NOT_ABOUT_FOR = {
    "GpuEccDoubleBitError",
    "GpuXidError",
    "GpuIdleWhileAllocated",
    "NodeFilesystemFillingUp",
    "AccountEnergyBudgetExceeded",
    "AccountEnergyBudgetForecast",
    "PairQueueDropped",
}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return rulekit.deploy(tmp_path_factory.mktemp("rules"))


def run_tests(test_file: Path, rule_files: list[Path], tmp: Path) -> subprocess.CompletedProcess[str]:
    path, _ = rulekit.complete(test_file, rule_files, tmp)
    return rulekit.promtool("test", "rules", str(path))


def test_promtool_accepts_every_rule_file_as_deployed(deployed: list[Path]) -> None:
    res = rulekit.promtool("check", "rules", *map(str, deployed))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(deployed)


def test_promtool_accepts_the_shipped_files_too() -> None:
    res = rulekit.promtool("check", "rules", *map(str, rulekit.shipped()))
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_alert_has_severity_for_runbook_and_keep_firing_for() -> None:
    assert len(ALERTS) >= 20
    for name, rule in ALERTS.items():
        assert re.fullmatch(r"[A-Z][A-Za-z]+", name), name
        assert rule["labels"]["severity"] in {"P0", "P1", "P2"}, name
        assert rule.get("for"), f"{name}: no for:"
        assert name in rulekit.KEEP_FIRING_FOR, f"{name}: not in files/keep-firing-for.yml"
        ann = rule["annotations"]
        assert ann["runbook_url"] == f"docs/runbooks/{name}.md", name
        assert (rulekit.REPO / ann["runbook_url"]).is_file(), f"{name}: runbook missing"
        assert ann.get("summary") and ann.get("description"), name
    assert set(rulekit.KEEP_FIRING_FOR) == set(ALERTS)


def test_every_gpu_alert_carries_the_job_and_team() -> None:
    gpu = [n for n in ALERTS if n.startswith("Gpu")]
    assert len(gpu) >= 12
    for name in gpu:
        expr = ALERTS[name]["expr"]
        assert "group_left (user, account, node)" in expr, name
        assert "last_over_time(slurm_job_info[10m])" in expr, name
        assert "{{ $labels.hpc_job }}" in ALERTS[name]["annotations"]["description"], name


def test_alerts_are_documented() -> None:
    doc = (rulekit.REPO / "docs" / "alerts.md").read_text()
    for name in ALERTS:
        assert f"`{name}`" in doc, name


def test_every_alert_has_fault_healthy_and_flapping_tests() -> None:
    assert set(TEST_FILES) == set(ALERTS)
    for name, path in TEST_FILES.items():
        cases = [t["case"] for t in yaml.safe_load(path.read_text())["tests"]]
        assert {"fault", "healthy", "flapping"} <= set(cases), f"{name}: {cases}"


@pytest.mark.parametrize("alert", sorted(TEST_FILES))
def test_promtool_unit_tests_pass(alert: str, deployed: list[Path], tmp_path: Path) -> None:
    res = run_tests(TEST_FILES[alert], deployed, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def _mutated(tmp: Path, alert: str, change: Any) -> list[Path]:
    def mutate(rule: dict[str, Any]) -> None:
        if rule.get("alert") == alert:
            change(rule)

    kff = {k: v for k, v in rulekit.KEEP_FIRING_FOR.items() if k != alert}
    return rulekit.deploy(tmp / "rules", mutate=mutate, keep_firing_for=kff)


@pytest.mark.parametrize("alert", sorted(TEST_FILES))
def test_a_rule_that_never_fires_fails_its_tests(alert: str, tmp_path: Path) -> None:
    """Mutation: the expression matches nothing -> the fault case must fail."""
    files = _mutated(tmp_path, alert, lambda r: r.update(expr='up{job="vigil-never"} == 2'))
    res = run_tests(TEST_FILES[alert], files, tmp_path)
    assert res.returncode != 0, f"{alert}: tests still pass with a rule that never fires"


@pytest.mark.parametrize("alert", sorted(set(TEST_FILES) - FLAP_NOT_ABOUT_FOR))
def test_a_rule_without_for_fails_its_flapping_test(alert: str, tmp_path: Path) -> None:
    """Mutation: `for: 0s` -> the flapping case must page, and the test must catch it."""
    files = _mutated(tmp_path, alert, lambda r: r.update({"for": "0s"}))
    res = run_tests(TEST_FILES[alert], files, tmp_path)
    assert res.returncode != 0, f"{alert}: flapping test passes without for:"
    assert "exp:[]" in (res.stdout + res.stderr).replace(" ", "").replace("\n", ""), res.stdout + res.stderr


@pytest.mark.parametrize("alert", ["GpuTemperatureCritical", "GpuEccDoubleBitError", "GpuIdleWhileAllocated"])
def test_a_gpu_alert_without_the_job_join_fails_its_tests(alert: str, tmp_path: Path) -> None:
    """Mutation: drop the slurm_job_info join -> the job and team labels are missing."""

    def drop_join(rule: dict[str, Any]) -> None:
        expr = rule["expr"]
        rule["expr"] = re.sub(
            r"\s*\* on \(instance, hpc_job\) group_left \(user, account, node\)\s*"
            r"max by \(instance, hpc_job, user, account, node\) \(last_over_time\(slurm_job_info\[10m\]\)\)",
            "",
            expr,
        )
        assert rule["expr"] != expr

    files = _mutated(tmp_path, alert, drop_join)
    res = run_tests(TEST_FILES[alert], files, tmp_path)
    assert res.returncode != 0


def test_keep_firing_for_holds_an_alert_after_its_fault_clears(deployed: list[Path], tmp_path: Path) -> None:
    test = {
        "tests": [
            {
                "case": "fault",
                "interval": "30s",
                "input_series": [
                    {"series": 'up{instance="gpu01",job="node_exporter"}', "values": "0x10 1x20"}
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "4m",
                        "alertname": "NodeExporterDown",
                        "exp_alerts": [{"exp_labels": {"instance": "gpu01", "job": "node_exporter"}}],
                    },
                    {
                        "eval_time": "6m",
                        "alertname": "NodeExporterDown",
                        "exp_alerts": [{"exp_labels": {"instance": "gpu01", "job": "node_exporter"}}],
                    },
                    {"eval_time": "8m", "alertname": "NodeExporterDown", "exp_alerts": []},
                ],
            }
        ]
    }
    src = tmp_path / "kff.yml"
    src.write_text(yaml.safe_dump(test))
    res = run_tests(src, deployed, tmp_path / "out") if (tmp_path / "out").mkdir() is None else None
    assert res is not None and res.returncode == 0, res.stdout + res.stderr if res else ""


def _vmalert() -> Path | None:
    files = os.environ.get("VIGIL_BUNDLE_FILES")
    if files and (Path(files) / "components/victoria-metrics/bin/vmalert").is_file():
        return Path(files) / "components/victoria-metrics/bin/vmalert"
    return None


@pytest.mark.skipif(
    _vmalert() is None, reason="set VIGIL_BUNDLE_FILES to an imported bundle's files/ for vmalert"
)
def test_vmalert_dry_run_accepts_the_files_as_deployed_without_keep_firing_for(tmp_path: Path) -> None:
    vmalert = _vmalert()
    assert vmalert
    for path in rulekit.deploy(tmp_path, keep_firing_for={}):
        res = subprocess.run(
            [str(vmalert), f"-rule={path}", "-dryRun", "-loggerLevel=ERROR"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, f"{path.name}: {res.stderr}"
