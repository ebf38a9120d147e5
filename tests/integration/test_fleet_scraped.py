"""The fleet simulator scraped by the real VictoriaMetrics over TLS with Basic auth, as the stack scrapes
real nodes; and the node_exporter figures `vigil plan` rests on, read from the bundle's node_exporter.

A fleet of 4 nodes with jobs of a minute, scraped every 2 s for more than a minute: every target is
up, every GPU sample carries the job the schedule gives its GPU at that instant (a job boundary
included), and the prolog's slurm_job_info joins each job to its account as the reports join them.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.components import free_port
from tests.helpers.vmpair import Process, export, get
from tests.unit.exporters.tls_helpers import PASSWORD, USER, make_pki
from vigil.exporters.fleetsim.schedule import Schedule
from vigil.installer.plan import MEASURED

pytestmark = pytest.mark.integration

NODES = 4
JOB_S = 60
INTERVAL = 2


def query(vm: str, expr: str) -> list[dict[str, Any]]:
    doc = json.loads(get(f"{vm}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    return list(doc["data"]["result"])


@pytest.fixture(scope="module")
def fleet_vm(components: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("fleet")
    (tmp / "pki").mkdir()
    pki = make_pki(tmp / "pki")
    (tmp / "auth").write_text(f"{USER}:sha256:{hashlib.sha256(PASSWORD.encode()).hexdigest()}\n")
    (tmp / "password").write_text(PASSWORD)
    fport, vport = free_port(), free_port()
    shape = ["--nodes", str(NODES), "--gpus-per-node", "8"]
    fleet_argv = [
        sys.executable, "-m", "vigil.exporters.fleetsim", *shape, "--cpus-per-node", "4",
        "--job-minutes", str(JOB_S / 60), "-a", f"127.0.0.1:{fport}", "--tls-cert-file", str(pki.cert),
        "--tls-key-file", str(pki.key), "--basic-auth-file", str(tmp / "auth"),
    ]  # fmt: skip
    config = subprocess.run(
        [sys.executable, "-m", "vigil.exporters.fleetsim", "scrape-config", *shape, "--target",
         f"127.0.0.1:{fport}", "--ca-file", str(pki.ca), "--username", USER, "--password-file",
         str(tmp / "password")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    doc = json.loads(config)
    doc["global"] = {"scrape_interval": f"{INTERVAL}s", "scrape_timeout": f"{INTERVAL}s"}
    (tmp / "scrape.yml").write_text(json.dumps(doc))
    vm = Process(
        [str(components / "victoria-metrics" / "bin" / "victoria-metrics"),
         f"-storageDataPath={tmp / 'data'}", f"-httpListenAddr=127.0.0.1:{vport}",
         f"-promscrape.config={tmp / 'scrape.yml'}", "-search.latencyOffset=1s", "-loggerLevel=WARN"],
        tmp / "vm.log",
        ready=f"http://127.0.0.1:{vport}/health",
    )  # fmt: skip
    with (tmp / "fleet.log").open("wb") as log:
        fleet = subprocess.Popen(fleet_argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        vm.start()
        time.sleep(JOB_S + 15)  # a job boundary on every node, whatever its shift
        get(f"http://127.0.0.1:{vport}/internal/force_flush")
        yield f"http://127.0.0.1:{vport}"
    finally:
        vm.stop()
        fleet.terminate()
        fleet.wait(timeout=30)


def test_every_target_is_up_over_tls_with_the_credential(fleet_vm: str) -> None:
    up = {(r["metric"]["job"], r["metric"]["instance"]): r["value"][1] for r in query(fleet_vm, "up")}
    assert len(up) == 2 * NODES + 1
    assert set(up.values()) == {"1"}, up


def test_each_gpu_sample_carries_the_job_the_schedule_gives_its_gpu(fleet_vm: str) -> None:
    schedule = Schedule(NODES, 8, job_seconds=JOB_S)
    now = time.time()
    rows = export(fleet_vm, 'DCGM_FI_DEV_GPU_TEMP{job="dcgm_exporter"}', now - 600, now)
    checked = jobs = 0
    for key, samples in rows.items():
        labels = json.loads(key)
        node = int(labels["instance"].removeprefix("fleet"))
        for ms, value in samples:
            if math.isnan(value):
                continue  # the staleness marker of a series that ended (its job's last sample was before)
            t = ms / 1000
            slot_edge = (t + schedule._shift(node)) % JOB_S
            if slot_edge < 1 or slot_edge > JOB_S - 1:
                continue  # the scrape's timestamp and the page's instant may straddle the edge
            want = schedule.jobmap(node, t).get(labels["gpu"], [""])[0]
            assert labels.get("hpc_job", "") == want, (labels, t)
            checked += 1
            jobs += bool(want)
    assert checked > NODES * 8 * 20 and jobs > 0


def test_the_prolog_series_joins_each_gpu_to_its_account(fleet_vm: str) -> None:
    joined = query(
        fleet_vm,
        "max by (instance, gpu, hpc_job, account) (DCGM_FI_DEV_POWER_USAGE"
        " * on (instance, hpc_job) group_left (account) slurm_job_info)",
    )
    schedule = Schedule(NODES, 8, job_seconds=JOB_S)
    assert joined
    accounts = {}
    for node in range(NODES):
        for job in schedule.jobs(node, time.time()) + schedule.jobs(node, time.time() - 10):
            accounts[job.id] = job.account
    for row in joined:
        m = row["metric"]
        if m["hpc_job"] in accounts:
            assert m["account"] == accounts[m["hpc_job"]]


def test_node_exporters_series_are_what_the_plan_counts(components: Path, tmp_path: Path) -> None:
    """The bundle's node_exporter with the role's flags: its per-CPU series are MEASURED's, and so are
    those that name no device or mount point (the rest follows the host's NICs, disks and mounts,
    which the lab's bridge and containers add to while its tests run)."""
    port = free_port()
    (tmp_path / "textfile").mkdir()
    ne = Process(
        [str(components / "prometheus-node-exporter" / "bin" / "node_exporter"),
         f"--web.listen-address=127.0.0.1:{port}", f"--collector.textfile.directory={tmp_path / 'textfile'}"],
        tmp_path / "ne.log",
        ready=f"http://127.0.0.1:{port}/metrics",
    )  # fmt: skip
    ne.start()
    try:
        lines = [ln for ln in get(f"http://127.0.0.1:{port}/metrics").decode().splitlines() if ln[:1] != "#"]
    finally:
        ne.stop()
    per_cpu = [ln for ln in lines if 'cpu="' in ln]
    cpus = {ln.split('cpu="', 1)[1].split('"', 1)[0] for ln in per_cpu}
    assert len(per_cpu) == MEASURED.node_exporter_per_cpu * len(cpus)
    fixed = [ln for ln in lines if 'cpu="' not in ln and 'device="' not in ln and 'mountpoint="' not in ln]
    assert abs(len(fixed) - MEASURED.node_exporter_fixed) <= 0.1 * MEASURED.node_exporter_fixed, len(fixed)
