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
