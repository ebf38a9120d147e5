"""A fleet of virtual GPU nodes served from one process: each node's dcgm-exporter and node_exporter
page at a path of its own, and the cluster's Slurm exporter page.

Paths (exact; anything else is 404):

* ``/nodes/<name>/dcgm_exporter/metrics`` — the node's GPUs: vigil's GPU simulator, one per node,
  its job map taken from the schedule instead of files;
* ``/nodes/<name>/node_exporter/metrics`` — the node's core node_exporter series and the prolog's
  ``slurm_job_info`` for its jobs;
* ``/slurm_exporter/metrics`` — vigil's Slurm exporter over the fleet's queue and nodes;
* ``/metrics`` — the simulator's own: pages served and seconds spent rendering, per exporter.

:func:`scrape_configs` writes the scrape jobs that read it as VictoriaMetrics (or vmagent) reads
real nodes: the same job names, ``instance`` the node's name, one target per node and exporter.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable

from vigil.exporters._expo import Family, render
from vigil.exporters.fleetsim.node import NodeExporter
from vigil.exporters.fleetsim.schedule import Schedule
from vigil.exporters.fleetsim.slurm import FleetSlurm
from vigil.exporters.gpusim.sim import GpuSimulator, SimConfig

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
EXPORTERS = ("dcgm_exporter", "node_exporter", "slurm_exporter")
#: how long before the simulator started its nodes were booted (the GPUs' since-boot energy)
UPTIME_S = 86400.0


def node_names(nodes: int, prefix: str) -> list[str]:
    """NODES names PREFIX0000, PREFIX0001, ... (at least four digits, more where needed)."""
    if nodes < 1:
        raise ValueError("--nodes: a fleet has at least one node")
    width = max(4, len(str(nodes - 1)))
    names = [f"{prefix}{i:0{width}d}" for i in range(nodes)]
    if not NAME.match(names[-1]):
        raise ValueError(
            f"--name-prefix {prefix!r}: node names must be letters, digits, '.', '_' or '-' (63 at most)"
        )
    return names


def path(name: str | None, exporter: str) -> str:
    return f"/nodes/{name}/{exporter}/metrics" if name is not None else f"/{exporter}/metrics"


class Fleet:
    def __init__(
        self,
        *,
        nodes: int,
        gpus: int = 8,
        cpus: int = 64,
        prefix: str = "fleet",
        seed: int = 0,
        job_seconds: float = 1800.0,
        model: str = "NVIDIA H100 80GB HBM3",
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if cpus < 1:
            raise ValueError("--cpus-per-node: a node has at least one CPU")
        self.names = node_names(nodes, prefix)
        self.schedule = Schedule(nodes, gpus, seed=seed, job_seconds=job_seconds)
        self.gpus = gpus
        self.cpus = cpus
        self._wall = wall
        boot = wall() - UPTIME_S
        self._gpu = [
            GpuSimulator(
                SimConfig(hostname=name, gpus=gpus, model=model, seed=seed, uptime_s=UPTIME_S),
                clock=clock,
                jobmap=self._jobmap_of(i),
                faults=dict,
            )
            for i, name in enumerate(self.names)
        ]
        self._node = [NodeExporter(name, cpus=cpus, boot=boot) for name in self.names]
        self.slurm = FleetSlurm(self.schedule, self.names, cpus=cpus, wall=wall)
        self._lock = threading.Lock()
        self.served = {e: 0 for e in EXPORTERS}
        self.seconds = {e: 0.0 for e in EXPORTERS}
        self._clock = clock

    def _jobmap_of(self, node: int) -> Callable[[], dict[str, list[str]]]:
        return lambda: self.schedule.jobmap(node, self._wall())

    def _node_page(self, node: int) -> str:
        t = self._wall()
        jobs = [(j.id, j.user, j.account, j.partition) for j in self.schedule.jobs(node, t)]
        return self._node[node].render(t, jobs)

    def _timed(self, exporter: str, page: Callable[[], str]) -> Callable[[], str]:
        def serve() -> str:
            start = self._clock()
            try:
                return page()
            finally:
                with self._lock:
                    self.served[exporter] += 1
                    self.seconds[exporter] += self._clock() - start

        return serve

    def pages(self) -> dict[str, Callable[[], str]]:
        """Every page the fleet serves, by its exact path."""
        out: dict[str, Callable[[], str]] = {
            path(None, "slurm_exporter"): self._timed("slurm_exporter", self.slurm.scrape)
        }
        for i, name in enumerate(self.names):
            out[path(name, "dcgm_exporter")] = self._timed("dcgm_exporter", self._gpu[i].scrape)
            out[path(name, "node_exporter")] = self._timed(
                "node_exporter",
                lambda i=i: self._node_page(i),  # type: ignore[misc]
            )
        return out

    def own_metrics(self) -> str:
        nodes = Family("vigil_fleetsim_nodes", "gauge", "Virtual GPU nodes this simulator serves.")
        nodes.add((), len(self.names))
        gpus = Family("vigil_fleetsim_gpus", "gauge", "Virtual GPUs this simulator serves.")
        gpus.add((), len(self.names) * self.gpus)
        served = Family("vigil_fleetsim_pages_served_total", "counter", "Pages served, by exporter.")
        secs = Family(
            "vigil_fleetsim_render_seconds_total", "counter", "Seconds spent rendering pages, by exporter."
        )
        with self._lock:
            for e in EXPORTERS:
                served.add((("exporter", e),), self.served[e])
                secs.add((("exporter", e),), round(self.seconds[e], 6))
        return render([nodes, gpus, served, secs])


def scrape_configs(
    fleet_names: list[str],
    target: str,
    *,
    scheme: str = "https",
    ca_file: str | None = None,
    server_name: str | None = None,
    username: str | None = None,
    password_file: str | None = None,
    slurm: bool = True,
) -> list[dict[str, Any]]:
    """The scrape jobs that read a fleet served at TARGET (host:port) as the stack reads real nodes."""
    extra: dict[str, Any] = {"scheme": scheme}
    if scheme == "https":
        tls: dict[str, Any] = {}
        if ca_file:
            tls["ca_file"] = ca_file
        if server_name:
            tls["server_name"] = server_name
        if tls:
            extra["tls_config"] = tls
    if username:
        extra["basic_auth"] = {"username": username, "password_file": password_file or ""}
    jobs = []
    for exporter in ("node_exporter", "dcgm_exporter"):
        statics = [
            {"targets": [target], "labels": {"instance": name, "__metrics_path__": path(name, exporter)}}
            for name in fleet_names
        ]
        jobs.append({"job_name": exporter, "static_configs": statics, **extra})
    if slurm:
        statics = [
            {
                "targets": [target],
                "labels": {"instance": "fleet-slurmctld", "__metrics_path__": path(None, "slurm_exporter")},
            }
        ]
        jobs.append({"job_name": "slurm_exporter", "static_configs": statics, **extra})
    return jobs
