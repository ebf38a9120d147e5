"""Slurm exporter for the controller: cluster, queue and account figures from squeue/sinfo/sdiag."""

from __future__ import annotations

from vigil.exporters.slurm.collector import DEFAULT_PORT, SlurmCollector

__all__ = ["DEFAULT_PORT", "SlurmCollector"]
