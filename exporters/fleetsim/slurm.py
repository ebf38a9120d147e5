"""The fleet's Slurm exporter page: vigil's own Slurm exporter, reading the fleet's Slurm.

The schedule's jobs are printed as squeue, sinfo and sdiag print them with the exporter's format
strings and marks, and the exporter's own parsers and renderer make the page — so the page is the
one the real exporter serves for such a cluster, down to its self-metrics.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Callable

from vigil.exporters._expo import render
from vigil.exporters.fleetsim.schedule import ACCOUNTS, PARTITION, Schedule
from vigil.exporters.slurm import commands as _cmd
from vigil.exporters.slurm.collector import SlurmCollector


class FleetSlurm(SlurmCollector):
    """The Slurm exporter of a fleet whose nodes are NAMES, jobs from SCHEDULE."""

    def __init__(
        self,
        schedule: Schedule,
        names: Sequence[str],
        *,
        cpus: int,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.schedule = schedule
        self.names = list(names)
        self.cpus = cpus
        self._wall = wall
        self._started = wall()

    def outputs(self, t: float, marks: _cmd.Marks) -> dict[str, str]:
        f, end = marks.field, marks.end + "\n"
        squeue: list[str] = []
        sinfo: list[str] = []
        gpus = self.schedule.gpus
        cpus_per_gpu = max(1, self.cpus // gpus)
        for node, name in enumerate(self.names):
            jobs = self.schedule.jobs(node, t)
            used = 0
            for j in jobs:
                n = len(j.gpus)
                used += n
                squeue.append(
                    f.join(
                        (
                            "RUNNING",
                            j.account,
                            j.partition,
                            j.user,
                            "1",
                            str(n * cpus_per_gpu),
                            f"gres/gpu:{n}",
                            "None",
                        )
                    )
                    + end
                )
            a = used * cpus_per_gpu
            state = "allocated" if used == gpus else "mixed" if used else "idle"
            idx = f"(IDX:0-{used - 1})" if used else "(IDX:N/A)"
            sinfo.append(
                f.join(
                    (
                        name,
                        state,
                        f"{a}/{self.cpus - a}/0/{self.cpus}",
                        f"gpu:{gpus}",
                        f"gpu:{used}{idx}",
                        PARTITION + "*",
                    )
                )
                + end
            )
        pending = self.schedule.pending(t)
        for account, users in ACCOUNTS:
            for i in range(pending[account]):
                squeue.append(
                    f.join(
                        (
                            "PENDING",
                            account,
                            PARTITION,
                            users[i % len(users)],
                            "1",
                            str(cpus_per_gpu * gpus),
                            f"gres/gpu:{gpus}",
                            "Resources" if i == 0 else "Priority",
                        )
                    )
                    + end
                )
        up = int(t - self._started)
        started = int(up / self.schedule.job_seconds * len(self.names) * 2)
        sdiag = (
            "*******************************************************\n"
            f"Server thread count:  3\nAgent queue size:     0\nDBD Agent queue size: 0\n"
            f"Jobs submitted: {started + sum(pending.values())}\nJobs started:   {started}\n"
            f"Jobs completed: {max(0, started - len(squeue))}\nJobs canceled:  0\nJobs failed:    0\n\n"
            "Main schedule statistics (microseconds):\n"
            f"\tLast cycle:   {800 + 3 * len(self.names)}\n\tMax cycle:    {4000 + 10 * len(self.names)}\n"
            f"\tTotal cycles: {up // 30 + 1}\n\tMean cycle:   {900 + 3 * len(self.names)}\n"
            "\tMean depth cycle:  12\n\tCycles per minute: 2\n\tLast queue length: 4\n"
        )
        return {"squeue": "".join(squeue), "sinfo": "".join(sinfo), "sdiag": sdiag}

    def scrape(self) -> str:
        with self._lock:
            start = self._clock()
            marks = self._marks()
            texts = self.outputs(self._wall(), marks)
            results = {name: _cmd.Result(name, True, texts[name], "", 0.0) for name in self.commands}
            fams = self._families(results, marks)
            fams.extend(self._self_metrics(results, self._clock() - start))
            return render(fams)
