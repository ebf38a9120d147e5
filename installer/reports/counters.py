"""The increase of a cumulative counter over a window, across resets, from its raw samples.

A meter counter only grows; a value below the one before is a reset (a meter replaced, an exporter
restarted): the counter started again from zero, so the increase over that gap is the new value.
Each gap between two samples is spread evenly over its time, so a window boundary that falls
inside a gap takes the share of the gap that lies inside the window (exact boundaries, to the
resolution of the samples). Nothing is extrapolated past the first or the last sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Increase:
    value: float
    #: resets seen inside the window
    resets: int
    #: seconds of the window that lie between two samples (the rest had no data)
    covered_s: float


def counter_increase(samples: Sequence[tuple[float, float]], start: float, end: float) -> Increase:
    """The increase over ``(start, end]`` of a counter sampled at ``samples`` (``(time, value)``,
    ascending time). Non-finite values are skipped (a scrape that returned NaN)."""
    total = 0.0
    resets = 0
    covered = 0.0
    prev: tuple[float, float] | None = None
    for t, v in samples:
        if not (math.isfinite(t) and math.isfinite(v)):
            continue
        if prev is not None and t > prev[0]:
            t0, v0 = prev
            lo, hi = max(t0, start), min(t, end)
            if hi > lo:
                reset = v < v0
                delta = v if reset else v - v0
                share = (hi - lo) / (t - t0)
                total += delta * share
                covered += hi - lo
                if reset and start < t <= end:
                    resets += 1
        if prev is None or t > prev[0]:
            prev = (t, v)
        if t >= end:
            break
    return Increase(total, resets, covered)
