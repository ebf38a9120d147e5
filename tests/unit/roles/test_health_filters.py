"""The filters of the upgrade health checks, on answers as VictoriaMetrics, vmalert (1.79 and 1.112)
and Alertmanager give them."""

from __future__ import annotations

import importlib.util
from functools import cache
from types import ModuleType

import pytest

from tests.unit.roles.rendering import ROLES


def _load(role: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"{name}_under_test", ROLES / role / "filter_plugins" / f"{name}.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@cache
def vm_filters() -> ModuleType:
    return _load("victoriametrics", "victoriametrics_checks")


@cache
def vmalert_filters() -> ModuleType:
    return _load("vmalert", "vmalert_checks")


@cache
def am_filters() -> ModuleType:
    return _load("alertmanager", "alertmanager_checks")


def test_every_filter_module_is_registered_under_its_own_name() -> None:
    names = [set(m.FilterModule().filters()) for m in (vm_filters(), vmalert_filters(), am_filters())]
    assert sum(len(n) for n in names) == len(set().union(*names))
    files = [p.name for p in ROLES.glob("*/filter_plugins/*.py")]
    assert len(files) == len(set(files))  # Ansible loads plugins by file name


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("1m30s", 90), ("500ms", 0.5), (60, 60), ("10", 10)]
)
def test_durations(text: object, seconds: float) -> None:
    assert vm_filters().vigil_seconds(text) == seconds


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(ValueError):
        vm_filters().vigil_seconds("30 seconds")


def test_the_value_of_an_instant_query() -> None:
    f = vm_filters().vigil_vm_value
    assert f({"status": "success", "data": {"result": [{"value": [1, "7"]}]}}) == 7.0
    assert f({"status": "success", "data": {"result": []}}) is None
    assert f({"status": "error"}) is None and f(None) is None and f("text") is None


def _matrix(*series: tuple[str, list[tuple[float, str]]]) -> dict[str, object]:
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"job": j}, "values": [list(s) for s in v]} for j, v in series],
        },
    }


def test_target_problems_take_each_jobs_last_sample() -> None:
    f = vm_filters().vigil_vm_target_problems
    resp = _matrix(
        ("node_exporter", [(90, "0"), (110, "1")]),
        ("dcgm_exporter", [(95, "1"), (99, "1")]),
        ("x", [(120, "0")]),
    )
    problems = f(resp, ["node_exporter", "dcgm_exporter", "slurm_exporter"], 100)
    assert [p[0] for p in problems] == ["dcgm_exporter", "slurm_exporter"]
    assert problems[0][1].startswith(
        "not scraped since 1970-01-01T00:01:40Z (last scrape 1970-01-01T00:01:39Z)"
    )
    assert problems[1][1] == "not scraped (no `up` series for it)"
    down = f(_matrix(("node_exporter", [(110, "1"), (120, "0")])), ["node_exporter"], 100)
    assert down == [["node_exporter", "down: up == 0 at 1970-01-01T00:02:00Z"]]
    assert f({"status": "error"}, ["a"], 1)[0][1].startswith("VictoriaMetrics gave no answer")


def _rules(*groups: dict[str, object]) -> dict[str, object]:
    return {"status": "success", "data": {"groups": list(groups)}}


def test_vmalert_problems_from_a_1_112_answer() -> None:
    f = vmalert_filters().vigil_vmalert_problems
    since = 1_700_000_000
    resp = _rules(
        {
            "name": "ok",
            "interval": 30,
            "lastEvaluation": "2023-11-14T22:13:25.5+00:00",
            "rules": [{"name": "r", "lastError": "", "lastEvaluation": "2023-11-14T22:13:25.5+00:00"}],
        },
        {"name": "stale", "interval": 30, "lastEvaluation": "2023-11-14T22:13:10.123456789Z", "rules": []},
        {"name": "long", "interval": 300, "lastEvaluation": "0001-01-01T00:00:00Z", "rules": []},
        {
            "name": "bad",
            "interval": 30,
            "lastEvaluation": "2023-11-14T22:13:25Z",
            "rules": [
                {"name": "b", "lastError": "execution\n failed", "lastEvaluation": "2023-11-14T22:13:25Z"}
            ],
        },
    )
    assert f(resp, ["ok", "stale", "long", "bad", "gone"], since, 60) == [
        "group gone: not loaded",
        "group bad: rule b: lastError execution failed",
        "group stale: not evaluated since 2023-11-14T22:13:20Z (last 2023-11-14T22:13:10Z)",
    ]


def test_a_long_group_that_met_the_store_restarting_is_not_vmalerts_problem() -> None:
    """The upgrade's store step restarts VictoriaMetrics; a 5-minute group evaluated meanwhile keeps
    that error for up to 5 minutes, and the check does not wait for such a group. Its other errors,
    and a short group's of any kind, still fail the check."""
    f = vmalert_filters().vigil_vmalert_problems
    since = 1_700_000_000
    down = (
        'failed to execute query "sum_over_time(x[30d:1h])": error getting response from '
        "https://198.18.0.10:8428/api/v1/query: dial tcp 198.18.0.10:8428: connect: connection refused"
    )
    when = "2023-11-14T22:13:25Z"
    resp = _rules(
        {
            "name": "long",
            "interval": 300,
            "rules": [{"name": "a", "lastError": down, "lastEvaluation": when}],
        },
        {
            "name": "long2",
            "interval": 300,
            "rules": [{"name": "b", "lastError": "bad_data: parse", "lastEvaluation": when}],
        },
        {
            "name": "short",
            "interval": 30,
            "lastEvaluation": when,
            "rules": [{"name": "c", "lastError": down, "lastEvaluation": when}],
        },
    )
    assert f(resp, ["long", "long2", "short"], since, 60) == [
        "group long2: rule b: lastError bad_data: parse",
        "group short: rule c: lastError " + down,
    ]


def test_vmalert_problems_from_a_1_79_answer_without_the_groups_last_evaluation() -> None:
    f = vmalert_filters().vigil_vmalert_problems
    since = 1_700_000_000
    resp = _rules(
        {
            "name": "a",
            "interval": 30,
            "rules": [{"name": "r", "lastError": "", "lastEvaluation": "2023-11-14T23:13:25+01:00"}],
        },
        {
            "name": "b",
            "interval": 30,
            "alerting_rules": [{"name": "x", "lastEvaluation": "0001-01-01T00:00:00Z"}],
        },
    )
    assert f(resp, ["a", "b"], since, 60) == ["group b: never evaluated"]
    assert f({"error": "x"}, ["a"], since, 60) == ["no answer from /api/v1/rules"]


def test_group_names_of_rule_files_and_of_an_answer() -> None:
    names = vmalert_filters().vigil_rule_group_names(
        ["groups:\n  - name: b\n    rules: []\n  - name: a\n    rules: []\n", "groups: []\n", ""]
    )
    assert names == ["a", "b"]
    assert vmalert_filters().vigil_vmalert_group_names(_rules({"name": "z"}, {"name": "y"}, "junk")) == [
        "y",
        "z",
    ]


def test_silences() -> None:
    ids, problems = am_filters().vigil_am_silence_ids, am_filters().vigil_am_silence_problems
    resp = [
        {"id": "a", "status": {"state": "active"}, "updatedAt": "2023-11-14T22:00:00.000Z"},
        {"id": "p", "status": {"state": "pending"}, "updatedAt": "2023-11-14T22:00:00Z"},
        {"id": "e", "status": {"state": "expired"}, "updatedAt": "2023-11-14T22:00:00Z"},
        {"id": "x", "status": {"state": "expired"}, "updatedAt": "2023-11-14T22:20:00Z"},
        "junk",
    ]
    assert ids(resp) == ["a", "p"]
    since = 1_700_000_000  # 2023-11-14T22:13:20Z
    assert problems(resp, ["a", "p", "e", "x", "gone"], since) == [
        "silence x was expired during the upgrade",
        "silence gone is gone",
    ]
    assert problems({"not": "a list"}, ["a"], since) == ["no answer from /api/v2/silences"]


def _targets(*targets: dict[str, object]) -> dict[str, object]:
    return {"status": "success", "data": {"activeTargets": list(targets), "droppedTargets": []}}


def test_vmagent_target_problems_read_its_own_targets() -> None:
    f = vm_filters().vigil_vmagent_target_problems
    since = 1796604800  # 2026-12-07T00:53:20Z
    answer = _targets(
        {
            "labels": {"instance": "gpu01", "job": "node_exporter"},
            "health": "up",
            "lastScrape": "2026-12-07T00:53:30.123Z",
            "lastError": "",
        },
        {
            "labels": {"instance": "gpu01", "job": "dcgm_exporter"},
            "health": "down",
            "lastScrape": "2026-12-07T00:53:31Z",
            "lastError": "cannot read: connection refused",
        },
        {
            "labels": {"instance": "gpu01", "job": "slurm_exporter"},
            "health": "up",
            "lastScrape": "2026-12-07T00:50:00Z",
            "lastError": "",
        },
        {
            "labels": {"instance": "gpu02", "job": "redfish_exporter"},
            "health": "up",
            "lastScrape": "2026-12-07T00:53:30Z",
            "lastError": "",
        },
    )
    jobs = ["node_exporter", "dcgm_exporter", "slurm_exporter", "redfish_exporter"]
    assert f(answer, jobs, "gpu01", since) == [
        ["dcgm_exporter", "down: down (cannot read: connection refused)"],
        ["slurm_exporter", "not scraped since 2026-12-07T00:53:20Z"],
        ["redfish_exporter", "not scraped (vmagent has no such target)"],
    ]
    assert f(answer, ["node_exporter"], "gpu01", since) == []
    assert f({"status": "error"}, ["node_exporter"], "gpu01", since) == [
        ["node_exporter", "vmagent gave no answer to the query of its targets"]
    ]
    # a time without its zone, or none at all, is no scrape
    odd = _targets(
        {"labels": {"instance": "gpu01", "job": "node_exporter"}, "health": "up", "lastScrape": "yesterday"}
    )
    assert f(odd, ["node_exporter"], "gpu01", since) == [
        ["node_exporter", "not scraped since 2026-12-07T00:53:20Z"]
    ]
