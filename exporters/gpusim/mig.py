"""MIG instances of the simulated GPUs: ``--mig GPU:PROFILE[@ID][,PROFILE[@ID]...]``.

A GPU given here is in MIG mode: like dcgm-exporter 4.8.2 in its default (flex) mode, the
simulator then emits its series once per GPU instance, labelled ``GPU_I_PROFILE`` (the profile, e.g.
``3g.40gb``) and ``GPU_I_ID`` (the GPU instance id), and only a job map file named
``<gpu>.<GPU instance id>`` tags them with ``hpc_job``.

Without ``@ID``, ids are given as NVML gives them on a 7-slice GPU (A100, H100) when the instances
are created in the order listed, for the usual layouts: 7g → 0; 4g → 1; 3g → 1, 2; 2g → 3, 4, 5;
1g → 7 … 13 (the first of those not taken yet). ``@ID`` pins an id where a site's differ (compare
``nvidia-smi mig -lgi``). The slices of one GPU add up to at most 7.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: GPU slices of a 7-slice GPU
SLICES = 7
_PROFILE = re.compile(r"^([1-7])g\.([0-9]{1,4})gb(\+[a-z]{1,8})?$")
_AUTO_IDS: dict[int, tuple[int, ...]] = {
    7: (0,),
    4: (1,),
    3: (1, 2),
    2: (3, 4, 5),
    1: (7, 8, 9, 10, 11, 12, 13),
}


class MigInstance(NamedTuple):
    profile: str
    gi: int
    slices: int
    fb_mib: int


def parse_mig(spec: str) -> tuple[int, list[MigInstance]]:
    """``"2:3g.40gb,3g.40gb"`` -> ``(2, [MigInstance("3g.40gb", 1, 3, 40960), ...(…, 2, …)])``.

    Raises ValueError naming the spec and what is wrong with it.
    """
    gpu_s, sep, rest = spec.partition(":")
    if not sep or not gpu_s.strip().isdigit() or not rest.strip():
        raise ValueError(
            f"--mig {spec!r}: expected GPU:PROFILE[@ID][,PROFILE[@ID]...], e.g. 2:3g.40gb,3g.40gb"
        )
    gpu = int(gpu_s)
    out: list[MigInstance] = []
    taken: set[int] = set()
    for item in rest.split(","):
        profile, at, gi_s = item.strip().partition("@")
        m = _PROFILE.match(profile)
        if not m:
            raise ValueError(f"--mig {spec!r}: {profile!r} is not a MIG profile like 1g.10gb or 3g.40gb")
        slices = int(m.group(1))
        if at:
            if not gi_s.isdigit() or int(gi_s) > 14:
                raise ValueError(f"--mig {spec!r}: GPU instance id {gi_s!r} is not 0..14")
            gi = int(gi_s)
        else:
            free = [i for i in _AUTO_IDS.get(slices, ()) if i not in taken]
            if not free:
                raise ValueError(f"--mig {spec!r}: no GPU instance id left for {profile}; give one with @ID")
            gi = free[0]
        if gi in taken:
            raise ValueError(f"--mig {spec!r}: GPU instance id {gi} given twice")
        taken.add(gi)
        out.append(MigInstance(profile, gi, slices, int(m.group(2)) * 1024))
    if sum(i.slices for i in out) > SLICES:
        raise ValueError(f"--mig {spec!r}: the instances take more than the GPU's {SLICES} slices")
    return gpu, out
