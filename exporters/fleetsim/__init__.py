"""A simulated fleet: the exporters of hundreds of virtual GPU nodes from one process (``vigil-fleetsim``).

For capacity measurements and the course's capstone: dcgm-exporter's series with job labels,
node_exporter's core series with the prolog's ``slurm_job_info``, and the Slurm exporter's page for
jobs of six accounts, behind the exporters' TLS and Basic auth. See :mod:`.fleet`.
"""

from __future__ import annotations
