"""``vigil plan``: the monitoring topology, capacity and deploy time a cluster of a given size needs.

Every figure is a formula over the inputs and the constants of :data:`MEASURED`; each constant says
the measurement it rests on (docs/plan.md explains the formulas, docs/benchmarks.md holds the runs).
Nothing here reads a host or a file: the same inputs give the same plan.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from vigil.basics.errors import VigilError


class PlanError(VigilError):
    """An input no cluster has."""


@dataclass(frozen=True)
class Measured:
    #: node_exporter 1.5.0 (Debian 12's, the bundle's) with its default collectors and the textfile
    #: collector, on this project's 2-CPU test machine: 507 series, 26 of them per CPU (13 a CPU:
    #: 8 CPU modes, 2 guest modes, 3 softnet counters); the rest (481) does not grow with the CPUs:
    #: 316 that name no device or mount point, and 165 for that machine's 4 network devices, 2 disks
    #: and its file systems (about 36 series a NIC, 18 a disk, 7 a file system)
    node_exporter_base: int = 481
    node_exporter_fixed: int = 316
    node_exporter_per_cpu: int = 13
    #: the fields of the dcgm_exporter role's counters file (roles/dcgm_exporter/files/vigil-counters.csv),
    #: one series each per GPU (per MIG instance on a MIG GPU)
    dcgm_series_per_gpu: int = 28
    #: the series VictoriaMetrics adds per target (up, scrape_duration_seconds, scrape_samples_scraped,
    #: scrape_samples_post_metric_relabeling, scrape_series_added)
    scrape_series_per_target: int = 5
    #: benchmarks/fleet.py at 4,096 GPUs (benchmarks/data/fleet-run.json): the active series beyond
    #: those one scrape returns, per GPU (what vmalert writes back, and the series new jobs replaced
    #: during the run: 733,779 against 686,922), and the samples a second vmalert wrote, per GPU
    #: (23,733.9 ingested against 22,897.4 scraped)
    rule_series_per_gpu: float = 11.4
    rule_samples_per_gpu_s: float = 0.204
    #: bytes on disk a sample, data and index, after VictoriaMetrics merged 6 h of 4 fleet nodes at 30 s
    #: with each value jittered by up to 0.1 % (benchmarks/fleet.py's disk phase; the simulator's own,
    #: smoother values take less): the pessimistic figure, for sizing
    bytes_per_sample: float = 2.06
    #: CPU cores of this machine that VictoriaMetrics used per 1,000 samples a second of ingest, and
    #: that vmalert used per 1,000 GPUs (all of vigil's rule files), at 4,096 GPUs (benchmarks/fleet.py)
    #: (0.792 and 0.022 cores; VictoriaMetrics' figure includes answering vmalert's rule queries)
    vm_cores_per_ksamples: float = 0.0334
    vmalert_cores_per_kgpu: float = 0.0054
    #: the admin host's CPU seconds for a deploy, a + b x GPU nodes: the least-squares lines over 2, 4, 8
    #: and 16 GPU nodes, fresh lab hosts each, with the per-role fingerprints (benchmarks/deploy.py,
    #: docs/benchmarks.md 2026-12-08; benchmarks/data/deploy-2-4-8-16-fingerprints.json)
    deploy_first_cpu: tuple[float, float] = (82.3, 19.19)
    deploy_rerun_cpu: tuple[float, float] = (14.1, 3.37)
    #: bytes a sample takes in vmagent's queue (the vmagent role's own figure: docs/ha.md)
    queue_bytes_per_sample: int = 16


MEASURED = Measured()

#: above this many GPUs, one VictoriaMetrics host is no longer enough for the evidence: the pair
PAIR_FROM_GPUS = 33
#: GPUs one scraper is planned for; past it the targets are sharded (docs/plan.md)
GPUS_PER_SCRAPER = 1024
SECONDS_PER_YEAR = 365.25 * 86400


@dataclass(frozen=True)
class Inputs:
    gpu_nodes: int
    gpus_per_node: int = 8
    cpus_per_node: int = 64
    retention_months: int = 13
    scrape_interval_s: int = 30
    admin_cores: int = 16

    def check(self) -> None:
        for name, value, low, high in (
            ("--gpu-nodes", self.gpu_nodes, 1, 100_000),
            ("--gpus-per-node", self.gpus_per_node, 1, 64),
            ("--cpus-per-node", self.cpus_per_node, 1, 4096),
            ("--retention-months", self.retention_months, 1, 120),
            ("--scrape-interval", self.scrape_interval_s, 5, 300),
            ("--admin-cores", self.admin_cores, 1, 1024),
        ):
            if not low <= value <= high:
                raise PlanError(name, f"{value}: give {low} to {high}")


def plan(inp: Inputs, m: Measured = MEASURED) -> dict[str, Any]:
    """The plan for INP: topology, per-replica capacity, admin-host deploy time, inventory variables."""
    inp.check()
    gpus = inp.gpu_nodes * inp.gpus_per_node
    hosts = inp.gpu_nodes + 2  # the GPU nodes, the Slurm controller, one monitoring host
    pair = gpus >= PAIR_FROM_GPUS
    scrapers = max(1, math.ceil(gpus / GPUS_PER_SCRAPER))
    if not pair:
        topology = "one monitoring host"
    elif scrapers == 1:
        topology = "the monitoring pair"
    else:
        # the roles do not deploy shards yet: each monitoring host's vmagent scrapes every target
        topology = (
            f"the monitoring pair; {scrapers} scrape shards advised (each target scraped by two), "
            "which this release does not deploy yet (docs/plan.md)"
        )
    node_series = m.node_exporter_base + m.node_exporter_per_cpu * inp.cpus_per_node
    scraped = (
        inp.gpu_nodes * (node_series + 2 * m.scrape_series_per_target)
        + gpus * m.dcgm_series_per_gpu
        + (inp.gpu_nodes + 1) * m.scrape_series_per_target  # the controller's node_exporter and Slurm
    )
    rules = gpus * m.rule_series_per_gpu
    samples_s = scraped / inp.scrape_interval_s + gpus * m.rule_samples_per_gpu_s
    year_bytes = samples_s * SECONDS_PER_YEAR * m.bytes_per_sample
    retained = year_bytes * inp.retention_months / 12
    queue = samples_s * 86400 * m.queue_bytes_per_sample
    first = m.deploy_first_cpu[0] + m.deploy_first_cpu[1] * inp.gpu_nodes
    rerun = m.deploy_rerun_cpu[0] + m.deploy_rerun_cpu[1] * inp.gpu_nodes
    forks = min(max(5, 2 * inp.admin_cores), max(5, hosts))
    cores = min(inp.admin_cores, hosts)
    variables: dict[str, Any] = {
        "victoriametrics_retention_period": f"{math.ceil(inp.retention_months * 31)}d",
        "victoriametrics_scrape_interval": f"{inp.scrape_interval_s}s",
    }
    if pair:
        variables["vmagent_queue_samples_per_second"] = math.ceil(samples_s / 1000) * 1000
    return {
        "inputs": asdict(inp),
        "gpus": gpus,
        "topology": topology,
        "monitoring_hosts": 2 if pair else 1,
        "scrapers": scrapers if pair else 1,
        "active_series": round(scraped + rules),
        "series_per_gpu_node": node_series
        + 2 * m.scrape_series_per_target
        + inp.gpus_per_node * m.dcgm_series_per_gpu,
        "samples_per_s": round(samples_s),
        "disk_per_replica_per_year_gb": round(year_bytes / 1e9, 1),
        "disk_per_replica_for_retention_gb": round(retained / 1e9, 1),
        "vmagent_queue_per_destination_gb": round(queue / 1e9, 1) if pair else None,
        "cores": {
            "victoriametrics": round(samples_s / 1000 * m.vm_cores_per_ksamples, 2),
            "vmalert": round(gpus / 1000 * m.vmalert_cores_per_kgpu, 3),
        },
        "deploy": {
            "forks": forks,
            "first_cpu_s": round(first),
            "rerun_cpu_s": round(rerun),
            "first_minutes": round(first / cores / 60, 1),
            "rerun_minutes": round(rerun / cores / 60, 1),
        },
        "inventory": {"group_vars/all.yml": variables},
        "measured": asdict(m),
    }


def plan_lines(doc: dict[str, Any]) -> list[str]:
    inp = doc["inputs"]
    d = doc["deploy"]
    lines = [
        f"{inp['gpu_nodes']} GPU nodes x {inp['gpus_per_node']} GPUs = {doc['gpus']} GPUs, "
        f"{inp['cpus_per_node']} CPUs a node, {inp['retention_months']} months kept, scraped every "
        f"{inp['scrape_interval_s']} s",
        f"topology:             {doc['topology']}",
        f"active series:        {doc['active_series']:,} per replica ({doc['series_per_gpu_node']:,} scraped "
        "from each GPU node)",
        f"ingest:               {doc['samples_per_s']:,} samples/s per replica",
        f"disk per replica:     {doc['disk_per_replica_per_year_gb']:,} GB a year, "
        f"{doc['disk_per_replica_for_retention_gb']:,} GB for {inp['retention_months']} months",
    ]
    if doc["vmagent_queue_per_destination_gb"] is not None:
        lines.append(
            f"vmagent queue:        {doc['vmagent_queue_per_destination_gb']:,} GB per destination "
            "(24 h of ingest)"
        )
    c = doc["cores"]
    lines += [
        f"CPU per replica:      VictoriaMetrics {c['victoriametrics']} cores, vmalert {c['vmalert']} "
        "(cores of the machine measured on)",
        f"admin host:           first deploy {d['first_cpu_s']:,} CPU-s, a rerun "
        f"{d['rerun_cpu_s']:,} CPU-s; with {inp['admin_cores']} cores and --forks {d['forks']}: "
        f"about {d['first_minutes']} and {d['rerun_minutes']} min",
        "inventory (group_vars/all.yml):",
    ]
    for name, value in doc["inventory"]["group_vars/all.yml"].items():
        lines.append(f"  {name}: {value}")
    return lines
