"""The vmalert role's `vigil_rule_file` filter: what a shipped rule file becomes on deploy."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.unit.rules import rulekit

f = rulekit.vigil_rule_file


def alerts(text: str) -> dict[str, dict]:
    return {r["alert"]: r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r}


@pytest.mark.parametrize("path", rulekit.shipped(), ids=lambda p: p.name)
def test_nothing_to_change_gives_the_shipped_text_byte_for_byte(path) -> None:
    assert f(path.read_text(), keep_firing_for={}) == path.read_text()


def test_keep_firing_for_is_added_from_the_table() -> None:
    text = (rulekit.RULES / "vigil-nodes.yml").read_text()
    out = alerts(f(text, keep_firing_for=rulekit.KEEP_FIRING_FOR))
    assert out["NodeExporterDown"]["keep_firing_for"] == rulekit.KEEP_FIRING_FOR["NodeExporterDown"]
    assert all("keep_firing_for" in a for a in out.values())
    assert "keep_firing_for" not in alerts(text)["NodeExporterDown"]


def test_duration_cap_lowers_for_and_keep_firing_for_never_raises() -> None:
    text = (rulekit.RULES / "vigil-gpu-alerts.yml").read_text()
    out = alerts(f(text, keep_firing_for=rulekit.KEEP_FIRING_FOR, duration_cap="90s"))
    assert out["GpuTemperatureCritical"]["for"] == "1m"  # already below
    assert out["GpuIdleWhileAllocated"]["for"] == "90s"
    assert out["GpuEccDoubleBitError"]["keep_firing_for"] == "90s"
    assert f(text, duration_cap="20s").splitlines()[1].startswith("# As deployed:")


def test_runbook_base_prefixes_relative_urls() -> None:
    text = (rulekit.RULES / "vigil-targets.yml").read_text()
    out = alerts(f(text, runbook_base="http://docs.site.internal/vigil/runbooks/"))
    assert out["VigilTargetDown"]["annotations"]["runbook_url"] == (
        "http://docs.site.internal/vigil/runbooks/VigilTargetDown.md"
    )


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not a duration: 'soon'"):
        f((rulekit.RULES / "vigil-targets.yml").read_text(), duration_cap="soon")


ROLE_PARAMS = yaml.safe_load((rulekit.ROLE / "vars" / "main.yml").read_text())["_vmalert_group_params"]


def test_the_role_asks_for_exact_evaluation_times_in_the_accounting_group() -> None:
    assert ROLE_PARAMS == {"vigil_accounting": {"nocache": ["1"]}}


def test_group_params_go_under_the_group_and_the_comments_stay() -> None:
    text = (rulekit.RULES / "vigil-accounting.yml").read_text()
    out = f(text, group_params=ROLE_PARAMS)
    groups = {g["name"]: g for g in yaml.safe_load(out)["groups"]}
    assert groups["vigil_accounting"]["params"] == {"nocache": ["1"]}
    assert "params" not in groups["vigil_accounting_30d"]
    added = [line for line in out.splitlines() if line not in text.splitlines()]
    assert added == ["    params:  # added on deploy (vmalert only)", '      "nocache": ["1"]']
    assert [g | {"params": None} for g in yaml.safe_load(out)["groups"]] == [
        g | {"params": None} for g in yaml.safe_load(text)["groups"]
    ]


def test_group_params_of_another_file_change_nothing() -> None:
    text = (rulekit.RULES / "vigil-targets.yml").read_text()
    assert f(text, group_params=ROLE_PARAMS) == text


def test_group_params_survive_the_other_settings() -> None:
    text = (rulekit.RULES / "vigil-nodes.yml").read_text()
    name = yaml.safe_load(text)["groups"][0]["name"]
    out = f(text, keep_firing_for=rulekit.KEEP_FIRING_FOR, group_params={name: {"nocache": ["1"]}})
    assert yaml.safe_load(out)["groups"][0]["params"] == {"nocache": ["1"]}
    assert all("keep_firing_for" in a for a in alerts(out).values())


@pytest.mark.parametrize(
    ("text", "params", "reason"),
    [
        (
            "groups:\n  - name: a\n    rules: []\n  - name: a\n    rules: []\n",
            {"a": {"nocache": ["1"]}},
            "no single `- name: a` line",
        ),
        ("groups:\n  - {name: a, rules: []}\n", {"a": {"nocache": ["1"]}}, "no single `- name: a` line"),
        ("groups:\n  - name: a\n    rules: []\n", {"a": {"nocache": "1"}}, "lists of strings"),
        ("groups:\n  - name: a\n    rules: []\n", {"a": ["nocache"]}, "lists of strings"),
        (
            "groups:\n  - name: a\n    params: {x: ['2']}\n    rules: []\n",
            {"a": {"nocache": ["1"]}},
            "did not land",
        ),
    ],
    ids=["two groups of one name", "flow style", "a bare value", "a list", "params already there"],
)
def test_group_params_that_cannot_be_placed_are_refused(text: str, params: dict, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        f(text, group_params=params)


# --- rule group intervals (`vmalert_group_interval_cap`) ---------------------------------------------

KEPT = yaml.safe_load((rulekit.ROLE / "vars" / "main.yml").read_text())["_vmalert_interval_kept_groups"]
SHIPPED_INTERVALS = rulekit.SHIPPED_INTERVALS
ACCOUNTING_FILES = ("vigil-accounting.yml", "vigil-accounts.yml")


def intervals(texts: list[str]) -> dict[str, str | None]:
    return {g["name"]: g.get("interval") for t in texts for g in yaml.safe_load(t)["groups"]}


def test_the_role_keeps_the_accounting_groups_and_they_are_the_shipped_ones() -> None:
    assert KEPT == ["vigil_accounting", "vigil_accounting_30d", "vigil_accounts"]
    in_files = intervals([(rulekit.RULES / name).read_text() for name in ACCOUNTING_FILES])
    assert set(KEPT) == set(in_files), "a kept group is not (or no longer) in the accounting files"
    assert intervals([p.read_text() for p in rulekit.shipped()]) == SHIPPED_INTERVALS


def test_interval_cap_lowers_every_group_but_the_accounting_ones() -> None:
    out = {p.name: f(p.read_text(), interval_cap="10s", interval_kept=KEPT) for p in rulekit.shipped()}
    assert intervals(list(out.values())) == {
        name: (every if name in KEPT else "10s") for name, every in SHIPPED_INTERVALS.items()
    }
    for name in ACCOUNTING_FILES:  # not even re-dumped: the shipped text, comments and all
        assert out[name] == (rulekit.RULES / name).read_text(), name
    assert out["vigil-gpu-alerts.yml"].splitlines()[1] == (
        "# As deployed: keep_firing_for not added, durations capped at nothing, "
        "group intervals capped at 10s, runbooks under docs/runbooks."
    )


def test_interval_cap_never_raises_an_interval() -> None:
    out = [f(p.read_text(), interval_cap="45s", interval_kept=KEPT) for p in rulekit.shipped()]
    got = intervals(out)
    assert got["vigil_gpu_alerts"] == got["vigil_targets"] == "30s"
    assert got["vigil_certificates"] == "45s"
    assert got["vigil_accounting"] == "1m"
    for path in rulekit.shipped():  # above every interval: nothing to change, the text as shipped
        assert f(path.read_text(), interval_cap="1h", interval_kept=KEPT) == path.read_text(), path.name


def test_interval_cap_with_the_lab_settings_leaves_the_accounting_intervals_alone() -> None:
    """The lab's other settings still reach the accounting files (the group params, the alerts'
    `for:`); their intervals stay the shipped ones and their header says nothing of intervals."""
    for name in ACCOUNTING_FILES:
        text = (rulekit.RULES / name).read_text()
        settings = {"duration_cap": "20s", "group_params": ROLE_PARAMS}
        out = f(text, **settings, interval_cap="10s", interval_kept=KEPT)
        assert out == f(text, **settings), name
        assert "group intervals" not in out


def test_a_group_without_its_own_interval_is_left_to_the_evaluation_interval() -> None:
    text = "groups:\n  - name: site\n    rules:\n      - record: a:b\n        expr: vector(1)\n"
    assert f(text, interval_cap="10s", interval_kept=KEPT) == text


def test_without_the_kept_list_the_cap_would_reach_the_accounting_group() -> None:
    """What `interval_kept` is there for: the filter itself knows no group names."""
    text = (rulekit.RULES / "vigil-accounting.yml").read_text()
    assert intervals([f(text, interval_cap="10s")])["vigil_accounting"] == "10s"


@pytest.mark.parametrize(
    ("cap", "kept", "reason"),
    [
        ("soon", KEPT, "not a duration: 'soon'"),
        ("10", KEPT, "not a duration: '10'"),
        ("-10s", KEPT, "not a duration: '-10s'"),
        ("10s\n    rules: []", KEPT, "not a duration"),
        ("0s", KEPT, "interval cap '0s': a group interval must be at least 1s"),
        ("500ms", KEPT, "interval cap '500ms': a group interval must be at least 1s"),
        ("10s", "vigil_accounting", "a list of group names, not one string"),
    ],
    ids=["a word", "no unit", "negative", "a YAML line", "zero", "under a second", "kept as a string"],
)
def test_a_bad_interval_cap_is_refused(cap: str, kept: object, reason: str) -> None:
    text = (rulekit.RULES / "vigil-targets.yml").read_text()
    with pytest.raises(ValueError, match=re.escape(reason)):
        f(text, interval_cap=cap, interval_kept=kept)  # type: ignore[arg-type]
