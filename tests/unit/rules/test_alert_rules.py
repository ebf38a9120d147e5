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


#: alerts about a job rather than a GPU: the job, user and account are labels
JOB_ALERTS = {"GpuIdleWhileAllocated", "GpuMigInstanceContention"}


def test_every_gpu_alert_is_the_gpus_and_names_the_jobs_on_it() -> None:
    gpu = [n for n in ALERTS if n.startswith("Gpu") and n not in JOB_ALERTS]
    assert len(gpu) >= 10
    for name in gpu:
        rule = ALERTS[name]
        assert "group_left (user, account, node)" not in rule["expr"], name
        assert "slurm_job_info" not in rule["expr"], name
        ann = rule["annotations"]
        for field in ("hpc_job", "user", "account"):
            assert rulekit.is_queried(ann[field]), f"{name}: {field}"
            assert '(or $labels.GPU_I_ID "")' in ann[field], f"{name}: {field}"
        assert "last_over_time(slurm_job_info[10m])" in ann["user"] and "slurm_job_info" in ann["account"], (
            name
        )
        assert "hpc_job" not in ann["description"] + ann["summary"], name
    for name in JOB_ALERTS:
        assert "group_left (user, account, node)" in ALERTS[name]["expr"], name
        assert "last_over_time(slurm_job_info[10m])" in ALERTS[name]["expr"], name
        assert "{{ $labels.hpc_job }}" in ALERTS[name]["annotations"]["description"], name


def _durations_stated(rule: dict[str, Any]) -> list[str]:
    text = " ".join(str(v) for v in rule.get("annotations", {}).values())
    return re.findall(r"for (?:a|an|\d+) (?:second|minute|hour|day)s?\b", text)


def test_an_alert_that_states_its_for_states_its_own() -> None:
    words = rulekit.load_filter_module().duration_words
    stated = 0
    for name, rule in ALERTS.items():
        seconds = rulekit.seconds(rule["for"])
        for phrase in _durations_stated(rule):
            assert phrase == f"for {words(seconds)}", f"{name}: says {phrase!r}, its for: is {rule['for']}"
            stated += 1
    assert stated >= 15


def test_the_lab_s_lowered_for_is_the_one_its_pages_state(tmp_path: Path) -> None:
    """The lab caps every `for:` at 20 s: a page must not say "for 5 minutes" there."""
    capped = {}
    for path in rulekit.shipped():
        doc = yaml.safe_load(rulekit.vigil_rule_file(path.read_text(), duration_cap="20s"))
        for group in doc["groups"]:
            capped.update({r["alert"]: r for r in group["rules"] if "alert" in r})
    lowered = [n for n, r in ALERTS.items() if rulekit.seconds(r["for"]) > 20 and _durations_stated(r)]
    assert len(lowered) >= 15
    for name in lowered:
        assert capped[name]["for"] == "20s", name
        assert set(_durations_stated(capped[name])) == {"for 20 seconds"}, name


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


def test_a_job_alert_without_the_job_join_fails_its_tests(tmp_path: Path) -> None:
    """Mutation: drop GpuIdleWhileAllocated's slurm_job_info join -> the job and team labels are missing."""

    def drop_join(rule: dict[str, Any]) -> None:
        expr = rule["expr"]
        rule["expr"] = re.sub(
            r"\s*\* on \(instance, hpc_job\) group_left \(user, account, node\)\s*"
            r"max by \(instance, hpc_job, user, account, node\) \(last_over_time\(slurm_job_info\[10m\]\)\)",
            "",
            expr,
        )
        assert rule["expr"] != expr

    files = _mutated(tmp_path, "GpuIdleWhileAllocated", drop_join)
    res = run_tests(TEST_FILES["GpuIdleWhileAllocated"], files, tmp_path)
    assert res.returncode != 0


@pytest.mark.parametrize("alert", ["GpuTemperatureCritical", "GpuEccDoubleBitError", "GpuXidError"])
def test_a_gpu_alert_whose_annotations_lose_the_job_fails_its_tests(alert: str, tmp_path: Path) -> None:
    """Mutation: the annotations' queries find no job -> the tests that name the job fail."""

    def no_job(rule: dict[str, Any]) -> None:
        for field in ("hpc_job", "user", "account"):
            rule["annotations"][field] = rule["annotations"][field].replace(
                'hpc_job!=\\"\\"', 'hpc_job=\\"none\\"'
            )
            rule["annotations"][field] = rule["annotations"][field].replace('hpc_job!=""', 'hpc_job="none"')
        assert 'hpc_job="none"' in rule["annotations"]["hpc_job"]

    files = _mutated(tmp_path, alert, no_job)
    res = run_tests(TEST_FILES[alert], files, tmp_path)
    assert res.returncode != 0, f"{alert}: tests pass with annotations that name no job"


def test_an_alert_keyed_on_the_job_would_page_again_at_a_job_boundary(tmp_path: Path) -> None:
    """Mutation: GpuTemperatureCritical on the per-job series (as before the GPU was the alert's
    identity) -> the job-boundary case fails: a second alert goes pending when the next job starts."""
    files = _mutated(
        tmp_path, "GpuTemperatureCritical", lambda r: r.update(expr="DCGM_FI_DEV_GPU_TEMP >= 92")
    )
    res = run_tests(TEST_FILES["GpuTemperatureCritical"], files, tmp_path)
    assert res.returncode != 0
    assert (
        "job-boundary"
        in yaml.safe_load(TEST_FILES["GpuTemperatureCritical"].read_text())["tests"][-1]["case"]
    )


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
