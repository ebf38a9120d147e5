"""Counter increases: resets counted, boundaries split by time, nothing extrapolated."""

from __future__ import annotations

import math

import pytest

from vigil.installer.reports import counter_increase


def test_a_steady_counter() -> None:
    samples = [(t, 10.0 * t) for t in range(0, 101, 10)]
    inc = counter_increase(samples, 0, 100)
    assert inc.value == pytest.approx(1000.0) and inc.resets == 0 and inc.covered_s == 100


def test_a_reset_counts_the_new_value_not_a_negative_step() -> None:
    # 0..50: +10/s up to 500; replaced at 55 (reads 0 at 60 would lose the gap's energy: it reads 50)
    samples = [(0, 1000.0), (10, 1100.0), (20, 1200.0), (30, 50.0), (40, 150.0)]
    inc = counter_increase(samples, 0, 40)
    assert inc.value == pytest.approx(100 + 100 + 50 + 100)
    assert inc.resets == 1


def test_two_resets_and_a_reset_to_exactly_zero() -> None:
    samples = [(0, 5.0), (1, 7.0), (2, 0.0), (3, 3.0), (4, 1.0), (5, 2.0)]
    inc = counter_increase(samples, 0, 5)
    assert inc.value == pytest.approx(2 + 0 + 3 + 1 + 1)
    assert inc.resets == 2


def test_a_boundary_inside_a_gap_takes_its_share() -> None:
    """A month boundary at 15 between samples at 10 and 20: each side gets half of that step."""
    samples = [(0, 0.0), (10, 100.0), (20, 200.0), (30, 300.0)]
    before = counter_increase(samples, 0, 15)
    after = counter_increase(samples, 15, 30)
    assert before.value == pytest.approx(150.0) and after.value == pytest.approx(150.0)
    assert before.value + after.value == pytest.approx(counter_increase(samples, 0, 30).value)


def test_a_reset_in_the_boundary_gap_is_counted_once() -> None:
    samples = [(0, 100.0), (10, 200.0), (20, 40.0), (30, 140.0)]
    left, right = counter_increase(samples, 0, 15), counter_increase(samples, 15, 30)
    assert left.value + right.value == pytest.approx(100 + 40 + 100)
    assert left.resets + right.resets == 1


def test_nothing_is_extrapolated_past_the_samples() -> None:
    samples = [(40, 0.0), (60, 20.0)]
    inc = counter_increase(samples, 0, 100)
    assert inc.value == pytest.approx(20.0) and inc.covered_s == 20


def test_nan_samples_and_duplicates_are_skipped() -> None:
    samples = [(0, 0.0), (10, math.nan), (10, 10.0), (10, 10.0), (20, 20.0)]
    assert counter_increase(samples, 0, 20).value == pytest.approx(20.0)


def test_no_samples_is_no_coverage() -> None:
    inc = counter_increase([], 0, 10)
    assert (inc.value, inc.covered_s) == (0.0, 0.0)
