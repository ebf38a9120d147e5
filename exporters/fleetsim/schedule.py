"""The fleet's Slurm jobs: a pure function of the node and the wall-clock time.

Each node's time is cut into slots of ``job_seconds`` (shifted per node, so the fleet's jobs do
not all change at once). In each slot a hash of (seed, node, slot) decides how the node's GPUs are
split (one job on all of them, or jobs of a half, a quarter ... of them), which parts stay idle, and
each job's account and user. A job holds its GPUs for the whole slot, so the same (node, time)
always gives the same jobs: a restarted simulator, a test and a report all agree on who ran what.

Job ids are unique across the fleet for any slot: ``FIRST_JOB_ID + (slot * nodes + node) * gpus
+ first GPU``. Jobs span one node (a multi-node job is, for the accounting, the sum of its nodes'
parts: nothing the capacity figures depend on).
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

#: six accounts, each with its users, as the course's capstone cluster is shared
ACCOUNTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("physics", ("alice", "arnaud")),
    ("chemistry", ("bruno", "beatriz")),
    ("biology", ("chloe", "chen")),
    ("climate", ("dmitri", "dana")),
    ("ai-lab", ("emma", "eitan", "eva")),
    ("astro", ("farid", "fiona")),
)
PARTITION = "gpu"
FIRST_JOB_ID = 100000
#: the share of a node's GPU groups left without a job, in 1/256
IDLE_IN_256 = 40


class Job(NamedTuple):
    id: str
    user: str
    account: str
    partition: str
    node: int
    gpus: tuple[int, ...]
    start: float
    end: float


class Schedule:
    """Who runs what on a fleet of NODES nodes with GPUS GPUs each."""

    def __init__(self, nodes: int, gpus: int, *, seed: int = 0, job_seconds: float = 1800.0) -> None:
        if nodes < 1 or gpus < 1:
            raise ValueError("a fleet has at least one node and one GPU per node")
        if job_seconds < 60:
            raise ValueError("jobs last at least 60 s")
        self.nodes = nodes
        self.gpus = gpus
        self.seed = seed
        self.job_seconds = float(job_seconds)

    def _hash(self, *parts: object) -> bytes:
        return hashlib.sha256("/".join(str(p) for p in (self.seed, *parts)).encode()).digest()

    def _shift(self, node: int) -> float:
        return int.from_bytes(self._hash("shift", node)[:4], "big") % int(self.job_seconds)

    def jobs(self, node: int, t: float) -> list[Job]:
        """The jobs running on NODE at wall-clock time T (seconds since the epoch)."""
        if not 0 <= node < self.nodes:
            raise ValueError(f"node {node} is not in the fleet (0..{self.nodes - 1})")
        shift = self._shift(node)
        slot = int((t + shift) // self.job_seconds)
        start = slot * self.job_seconds - shift
        h = self._hash("slot", node, slot)
        # the size of each job: all GPUs, or 1/2, 1/4 ... of them (at least one GPU)
        sizes = [self.gpus]
        while sizes[-1] % 2 == 0 and sizes[-1] > 1:
            sizes.append(sizes[-1] // 2)
        size = sizes[h[0] % len(sizes)]
        out: list[Job] = []
        for part, first in enumerate(range(0, self.gpus - size + 1, size)):
            b = self._hash("job", node, slot, part)
            if b[0] < IDLE_IN_256:
                continue
            account, users = ACCOUNTS[b[1] % len(ACCOUNTS)]
            out.append(
                Job(
                    id=str(FIRST_JOB_ID + (slot * self.nodes + node) * self.gpus + first),
                    user=users[b[2] % len(users)],
                    account=account,
                    partition=PARTITION,
                    node=node,
                    gpus=tuple(range(first, first + size)),
                    start=start,
                    end=start + self.job_seconds,
                )
            )
        return out

    def jobmap(self, node: int, t: float) -> dict[str, list[str]]:
        """NODE's job map at T, as the prolog writes it for dcgm-exporter: GPU index -> job ids."""
        return {str(g): [j.id] for j in self.jobs(node, t) for g in j.gpus}

    def pending(self, t: float) -> dict[str, int]:
        """Jobs waiting per account at T (changes every slot): the queue squeue shows."""
        slot = int(t // self.job_seconds)
        return {
            account: self._hash("pending", account, slot)[0] % max(2, self.nodes // 8 + 2)
            for account, _ in ACCOUNTS
        }
