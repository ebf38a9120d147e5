"""vigil's exporters: what runs on cluster nodes.

- :mod:`vigil.exporters.gpusim` — a GPU simulator that stands in for NVIDIA's dcgm-exporter in the lab
  (same ``DCGM_FI_*`` names, types and labels, same job map semantics);
- :mod:`vigil.exporters.slurm` — a Slurm exporter for the controller (``squeue``/``sinfo``/``sdiag``).

Everything here runs on the target's system ``python3`` (3.9 or newer) with the standard library
only, so a node needs nothing but the wheel (or its unpacked tree on ``PYTHONPATH``).
"""

from __future__ import annotations

__version__ = "0.1.0"
