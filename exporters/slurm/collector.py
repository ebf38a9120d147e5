"""One scrape: run squeue/sinfo/sdiag at once, parse, render. Never raises for a Slurm problem."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Callable

from vigil.exporters._expo import Family, render
from vigil.exporters.slurm import commands as _cmd
from vigil.exporters.slurm.parse import parse_sdiag, parse_sinfo, parse_squeue

log = logging.getLogger("vigil.exporters.slurm")

DEFAULT_PORT = 9341
DEFAULT_TIMEOUT = 10.0

#: sdiag key -> (metric, type, help, scale)
_SDIAG_METRICS = (
    ("server_threads", "slurm_scheduler_threads", "gauge", "slurmctld server threads (sdiag).", 1.0),
    (
        "agent_queue_size",
        "slurm_scheduler_agent_queue_size",
        "gauge",
        "Outgoing RPCs queued in slurmctld's agent (sdiag).",
        1.0,
    ),
    (
        "dbd_agent_queue_size",
        "slurm_scheduler_dbd_agent_queue_size",
        "gauge",
        "Messages queued for slurmdbd (sdiag).",
        1.0,
    ),
    (
        "jobs_submitted",
        "slurm_scheduler_jobs_submitted_total",
        "counter",
        "Jobs submitted since the statistics were last reset (sdiag; resets at midnight UTC).",
        1.0,
    ),
    ("jobs_started", "slurm_scheduler_jobs_started_total", "counter", "Jobs started (sdiag).", 1.0),
    ("jobs_completed", "slurm_scheduler_jobs_completed_total", "counter", "Jobs completed (sdiag).", 1.0),
    ("jobs_canceled", "slurm_scheduler_jobs_canceled_total", "counter", "Jobs canceled (sdiag).", 1.0),
    ("jobs_failed", "slurm_scheduler_jobs_failed_total", "counter", "Jobs failed (sdiag).", 1.0),
    (
        "main_last_cycle_us",
        "slurm_scheduler_last_cycle_seconds",
        "gauge",
        "Duration of the main scheduler's last cycle (sdiag).",
        1e-6,
    ),
    (
        "main_max_cycle_us",
        "slurm_scheduler_max_cycle_seconds",
        "gauge",
        "Longest main scheduler cycle since the statistics were reset (sdiag).",
        1e-6,
    ),
    (
        "main_mean_cycle_us",
        "slurm_scheduler_mean_cycle_seconds",
        "gauge",
        "Mean main scheduler cycle (sdiag).",
        1e-6,
    ),
    ("main_cycles", "slurm_scheduler_cycles_total", "counter", "Main scheduler cycles (sdiag).", 1.0),
    (
        "main_cycles_per_minute",
        "slurm_scheduler_cycles_per_minute",
        "gauge",
        "Main scheduler cycles per minute (sdiag).",
        1.0,
    ),
    (
        "main_mean_depth",
        "slurm_scheduler_mean_depth",
        "gauge",
        "Mean jobs examined per main scheduler cycle (sdiag).",
        1.0,
    ),
    (
        "main_last_queue_length",
        "slurm_scheduler_queue_length",
        "gauge",
        "Jobs in the main scheduler's queue at its last cycle (sdiag).",
        1.0,
    ),
    (
        "backfill_last_cycle_us",
        "slurm_backfill_last_cycle_seconds",
        "gauge",
        "Duration of the backfill scheduler's last cycle (sdiag).",
        1e-6,
    ),
    (
        "backfill_max_cycle_us",
        "slurm_backfill_max_cycle_seconds",
        "gauge",
        "Longest backfill cycle since the statistics were reset (sdiag).",
        1e-6,
    ),
    (
        "backfill_mean_cycle_us",
        "slurm_backfill_mean_cycle_seconds",
        "gauge",
        "Mean backfill cycle (sdiag).",
        1e-6,
    ),
    ("backfill_cycles", "slurm_backfill_cycles_total", "counter", "Backfill scheduler cycles (sdiag).", 1.0),
    (
        "backfill_jobs_since_start",
        "slurm_backfill_jobs_total",
        "counter",
        "Jobs started by the backfill scheduler since slurmctld started (sdiag).",
        1.0,
    ),
    (
        "backfill_last_depth",
        "slurm_backfill_last_depth",
        "gauge",
        "Jobs examined by the last backfill cycle (sdiag).",
        1.0,
    ),
    (
        "backfill_last_queue_length",
        "slurm_backfill_queue_length",
        "gauge",
        "Jobs in the backfill queue at its last cycle (sdiag).",
        1.0,
    ),
)


class SlurmCollector:
    """Scrapes Slurm. Concurrent scrapes are serialised: each one is its own consistent snapshot."""

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        marks: Callable[[], _cmd.Marks] = _cmd.new_marks,
    ) -> None:
        self.timeout = timeout
        self.commands = _cmd.COMMAND_NAMES
        self.env = env
        self._marks = marks
        self._clock = clock
        self._lock = threading.Lock()
        self.errors: dict[str, int] = {name: 0 for name in self.commands}

    def scrape(self) -> str:
        with self._lock:
            start = self._clock()
            marks = self._marks()  # fresh for each scrape: see commands.Marks
            results = _cmd.run_all(_cmd.commands(marks), timeout=self.timeout, env=self.env)
            fams = self._families(results, marks)
            for r in results.values():
                if not r.ok:
                    self.errors[r.command] = self.errors.get(r.command, 0) + 1
                    log.warning("%s failed: %s", r.command, r.error)
            fams.extend(self._self_metrics(results, self._clock() - start))
            return render(fams)

    def _families(self, results: Mapping[str, _cmd.Result], marks: _cmd.Marks) -> list[Family]:
        fams: list[Family] = []
        sq = results.get("squeue")
        if sq is not None and sq.ok:
            jobs = parse_squeue(sq.stdout, marks)
            if jobs.bad_lines:
                log.warning("squeue: %d of %d records not understood", jobs.bad_lines, jobs.lines)
            f = Family(
                "slurm_jobs",
                "gauge",
                "Jobs (array tasks counted one by one) by state, account and partition (squeue).",
            )
            for (state, account, partition), n in sorted(jobs.by_state.items()):
                f.add((("state", state), ("account", account), ("partition", partition)), n)
            fams.append(f)
            f = Family("slurm_jobs_pending", "gauge", "Pending jobs by reason and partition (squeue).")
            for (reason, partition), n in sorted(jobs.pending_reasons.items()):
                f.add((("reason", reason), ("partition", partition)), n)
            fams.append(f)
            f = Family("slurm_account_cpus_allocated", "gauge", "CPUs held by each account's running jobs.")
            for account, n in sorted(jobs.account_cpus.items()):
                f.add((("account", account),), n)
            fams.append(f)
            f = Family("slurm_account_gpus_allocated", "gauge", "GPUs held by each account's running jobs.")
            for account, n in sorted(jobs.account_gpus.items()):
                f.add((("account", account),), n)
            fams.append(f)
        si = results.get("sinfo")
        if si is not None and si.ok:
            nodes, bad = parse_sinfo(si.stdout, marks)
            if bad:
                log.warning("sinfo: %d records not understood", bad)
            by_state: dict[str, int] = {}
            for node in nodes.values():
                by_state[node.state] = by_state.get(node.state, 0) + 1
            f = Family("slurm_nodes", "gauge", "Nodes by state (sinfo; flags such as `*` dropped).")
            for st, count in sorted(by_state.items()):
                f.add((("state", st),), count)
            fams.append(f)
            f = Family(
                "slurm_node_state",
                "gauge",
                "1 for each node, with its state and the flags sinfo appends (* not responding, ...).",
            )
            for node in sorted(nodes.values()):
                f.add(
                    (
                        ("node", node.name),
                        ("state", node.state),
                        ("flags", node.flags),
                        ("partitions", ",".join(node.partitions)),
                    ),
                    1,
                )
            fams.append(f)
            cpu = {"allocated": 0, "idle": 0, "other": 0}
            gpu = {"allocated": 0, "idle": 0}
            cpus_total = gpus_total = 0
            nc = Family("slurm_node_cpus", "gauge", "CPUs of each node by state (sinfo).")
            ng = Family("slurm_node_gpus", "gauge", "GPUs of each node by state (sinfo Gres/GresUsed).")
            for node in sorted(nodes.values()):
                cpu["allocated"] += node.cpus_alloc
                cpu["idle"] += node.cpus_idle
                cpu["other"] += node.cpus_other
                cpus_total += node.cpus_total
                g_idle = max(0, node.gpus_total - node.gpus_alloc)
                gpu["allocated"] += node.gpus_alloc
                gpu["idle"] += g_idle
                gpus_total += node.gpus_total
                for st, v in (
                    ("allocated", node.cpus_alloc),
                    ("idle", node.cpus_idle),
                    ("other", node.cpus_other),
                ):
                    nc.add((("node", node.name), ("state", st)), v)
                if node.gpus_total:
                    ng.add((("node", node.name), ("state", "allocated")), node.gpus_alloc)
                    ng.add((("node", node.name), ("state", "idle")), g_idle)
            f = Family("slurm_cpus", "gauge", "CPUs in the cluster by state (sinfo).")
            for st, v in cpu.items():
                f.add((("state", st),), v)
            fams.append(f)
            fams.append(_one("slurm_cpus_configured", "CPUs in the cluster.", cpus_total))
            f = Family("slurm_gpus", "gauge", "GPUs in the cluster by state (sinfo Gres/GresUsed).")
            for st, v in gpu.items():
                f.add((("state", st),), v)
            fams.append(f)
            fams.append(_one("slurm_gpus_configured", "GPUs in the cluster (sinfo Gres).", gpus_total))
            fams.extend([nc, ng])
        sd = results.get("sdiag")
        if sd is not None and sd.ok:
            values = parse_sdiag(sd.stdout)
            for key, name, type_, help_, scale in _SDIAG_METRICS:
                if key in values:
                    f = Family(name, type_, help_)
                    f.add((), values[key] * scale)
                    fams.append(f)
        return fams

    def _self_metrics(self, results: Mapping[str, _cmd.Result], seconds: float) -> list[Family]:
        up = Family(
            "slurm_up",
            "gauge",
            "1 when the Slurm command answered in this scrape, 0 when it failed or timed out.",
        )
        dur = Family(
            "slurm_exporter_command_duration_seconds",
            "gauge",
            "How long each Slurm command took in this scrape.",
        )
        for name in self.commands:
            r = results[name]
            up.add((("command", name),), 1 if r.ok else 0)
            dur.add((("command", name),), round(r.seconds, 6))
        err = Family(
            "slurm_exporter_scrape_errors_total",
            "counter",
            "Slurm commands that failed or timed out, since the exporter started.",
        )
        for name in self.commands:
            err.add((("command", name),), self.errors.get(name, 0))
        return [
            up,
            dur,
            err,
            _one("slurm_exporter_scrape_duration_seconds", "How long this scrape took.", round(seconds, 6)),
        ]


def _one(name: str, help_: str, value: float) -> Family:
    f = Family(name, "gauge", help_)
    f.add((), value)
    return f
