"""The vmalert role's `vigil_rule_file` filter: what a shipped rule file becomes on deploy."""

from __future__ import annotations

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
