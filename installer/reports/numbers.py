"""Fixed number formatting for the signed JSON.

Every quantity is a JSON number rounded (half to even, Python's ``round``) to a fixed number of
decimals for its kind, then written in Python's shortest round-trip form by the canonical JSON
encoder: the same value gives the same bytes on every machine. ``-0.0`` is written ``0.0``; NaN and
infinity never reach the encoder (they are refused where they come in). Counts stay integers.
"""

from __future__ import annotations

import math

#: decimals per kind of quantity
DECIMALS = {
    "gpu_hours": 4,  # 0.36 s of one GPU
    "kwh": 3,  # 1 Wh
    "ratio": 4,  # PUE, ERF, REF, shares
    "l_per_kwh": 4,  # WUE
    "declared": 6,  # declared values, as given (to 1e-6)
}


def fixed(value: float, kind: str) -> float:
    """``value`` rounded for ``kind``; refuses NaN and infinity (a defect if one gets this far)."""
    if not math.isfinite(value):
        raise ValueError(f"{kind}: {value!r} is not a finite number")
    out = round(float(value), DECIMALS[kind])
    return 0.0 if out == 0 else out
