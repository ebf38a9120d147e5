"""GPU simulator for the lab: stands in for NVIDIA's dcgm-exporter.

It serves ``/metrics`` on port 9400 with the ``DCGM_FI_*`` names, types and labels dcgm-exporter
4.x emits, applies the Slurm job map dir with dcgm-exporter's ``--hpc-job-mapping-dir`` semantics,
draws power by whether a GPU is allocated, integrates it exactly into the energy counter, and takes
injected faults from a state file. See docs/exporters.md.
"""

from __future__ import annotations

from vigil.exporters.gpusim.jobmap import read_jobmap
from vigil.exporters.gpusim.sim import GpuSimulator, SimConfig

__all__ = ["GpuSimulator", "SimConfig", "read_jobmap"]
