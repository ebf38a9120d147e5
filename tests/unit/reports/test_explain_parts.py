"""The parts of `vigil explain` that read VictoriaMetrics' answers: the XID table, a sticky field's
changes, a counter's rise, the throttle bits (the whole against a real VictoriaMetrics:
tests/integration/test_explain.py)."""

from __future__ import annotations

import re

from tests.unit.rules import rulekit
from vigil.installer.reports.explain import _changes, _rise, _throttle
from vigil.installer.reports.xid import GPU_FAULT, TABLE, describe


def test_every_xid_has_a_meaning_an_action_a_kind_and_an_nvidia_page() -> None:
    assert {13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120} <= set(TABLE)
    for code, x in TABLE.items():
        assert x.code == code and x.meaning and x.action, code
        assert x.kind in {"hardware", "program", "memory-repair", "firmware"}, code
        assert x.source.startswith("https://docs.nvidia.com/deploy/"), code
    assert describe(140).meaning == "not in vigil's table" and describe(140).kind == "unknown"


def test_the_xids_the_hardware_alert_pages_on_are_the_gpus_fault_in_the_table() -> None:
    rule = rulekit.rules_by_alert()["GpuXidHardwareError"]
    paged = {int(c) for c in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)", rule["expr"])}
    assert paged >= {48, 64, 74, 79, 92, 94, 95, 119, 120}
    for code in paged & set(TABLE):
        assert TABLE[code].kind in GPU_FAULT, code
    # and the program's XIDs are GpuXidError's, not a page
    assert not {c for c, x in TABLE.items() if x.kind == "program"} & paged


def test_a_sticky_field_changes_only_when_its_value_does() -> None:
    # the first point is the value from before the window (a GPU keeps its last XID): not a change
    assert _changes([(0, 13), (15, 13), (30, 48), (45, 48), (60, 0), (75, 79)]) == [(30, 48), (75, 79)]
    assert _changes([(0, 0)]) == [] and _changes([]) == []
    assert _changes([(0, 0), (15, float("nan")), (30, 0)]) == []


def test_a_counter_s_rise_skips_resets_and_says_whether_it_grows() -> None:
    growing = [(t * 60, float(n)) for t, n in enumerate([0, 0, 1, 3, 6, 10, 15, 21])]
    assert _rise(growing) == (21, 120.0, True)
    steady = [(t * 60, float(t * 5)) for t in range(8)]
    total, since, grows = _rise(steady)
    assert (total, since, grows) == (35, 60.0, False)
    reset = [(0, 100.0), (60, 110.0), (120, 2.0), (180, 5.0)]  # a GPU reset zeroes the counter
    assert _rise(reset)[0] == 13
    assert _rise([(0, 4.0), (60, 4.0)]) == (0, None, False)


def test_throttle_bits_are_named_and_garbage_is_ignored() -> None:
    assert _throttle([0, 8, 136]) == ["hardware slowdown", "hardware power brake"]
    assert _throttle([float("nan"), -1, 1]) == ["GPU idle"]


def test_the_days_before_say_when_nothing_was_recorded() -> None:
    """The lab's staged incident on a fresh lab: no sample of its GPUs before the job. The line says
    so instead of printing an empty list; with days recorded it gives their counts."""
    import copy
    import json
    from pathlib import Path

    from vigil.installer.ops import explain_lines

    doc = json.loads(
        (Path(__file__).resolve().parents[3] / "benchmarks/data/incident-explain-lab.json").read_text()
    )
    lines = explain_lines(doc)
    assert sum("the 7 days before: no samples of this GPU recorded" in x for x in lines) == 4
    assert not any("by day []" in x for x in lines)
    seen = copy.deepcopy(doc)
    seen["gpus"][3]["before"].update(ecc_single_bit=12, ecc_single_bit_by_day=[0, 0, 0, 0, 2, 4, 6])
    assert any(
        "the 7 days before: 12 single-bit ECC errors (by day [0, 0, 0, 0, 2, 4, 6])" in x
        for x in explain_lines(seen)
    )
