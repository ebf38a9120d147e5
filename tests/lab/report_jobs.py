"""The report module's two jobs, started once per session by whichever module asks first.

tests/lab/test_usage_and_energy_reports.py checks both reports against two jobs of accounts of their
own (the other modules' jobs, under physics and chemistry, are not in those rows). The jobs run for
150 s and 120 s, and a report of the month in progress only reaches past them a minute after they
end: minutes of the lab's time spent waiting. The alert module's quiet period is ordinary job churn
with no fault for about five minutes, so it starts these two among its own jobs and waits for them
to end as for its own; by the time the report module runs they are long over. Run by itself, the
report module starts them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: (account, user, GPUs, seconds)
JOBS = [("report-physics", "alice", 2, 150), ("report-chemistry", "bob", 3, 120)]


class ReportJobs:
    """The jobs of JOBS, submitted on the first ``start()`` with VIGIL (the deployed stack's `vigil`)."""

    def __init__(self, vigil: Callable[..., Any]) -> None:
        self._vigil = vigil
        self.jobs: dict[str, tuple[str, str, int, int]] = {}
        #: (job id, node) of a job whose node's exporters the alert module stopped while it ran
        #: (`lab fault node-down`): the reconciliation with Slurm must name it
        self.node_down: tuple[str, str] | None = None

    def start(self) -> dict[str, tuple[str, str, int, int]]:
        """Job id -> (account, user, GPUs, seconds); submitted now unless they already were."""
        if not self.jobs:
            for account, user, gpus, seconds in JOBS:
                argv = ["lab", "job", "--account", account, "--user", user, "--gpus", str(gpus)]
                res = self._vigil(*argv, "--seconds", str(seconds), "--json", timeout=120)
                self.jobs[str(json.loads(res.stdout)["job_id"])] = (account, user, gpus, seconds)
        return dict(self.jobs)


def in_slurm(ssh: Callable[..., Any], ids: list[str]) -> list[str]:
    """Those of IDS that Slurm still has pending or running (squeue on ctl01)."""
    out = ssh("ctl01", "squeue -h -o %i").stdout.split()
    return [i for i in ids if i in out]
