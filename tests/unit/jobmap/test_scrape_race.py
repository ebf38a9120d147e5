"""The epilog against a scrape in flight: real prologs and epilogs while the GPU simulator is scraped
over HTTP in a tight loop.

dcgm-exporter 4.8.2 re-reads the job map dir at every scrape: it lists the dir, then opens each
file it listed, and a file gone in between fails the whole scrape (HTTP 500: every GPU series of
the node is missing from it). The simulator reads the dir the same way. An epilog that removed the
emptied file of a GPU's last job lost scrapes that way; the epilog now renames an empty file over
it, so the name never disappears. Goal: 0 failed scrapes. The control (a writer that removes the
emptied file, as the old epilog did) shows the harness does catch the race.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from vigil.exporters._http import make_server
from vigil.exporters.gpusim import GpuSimulator, SimConfig

from .conftest import JobMapRun

GPUS = 8


@dataclass
class Scrapes:
    ok: int = 0
    failed: int = 0
    tagged: int = 0  # answers with at least one hpc_job series: the map was live under the scraper


def _scrape_while(map_dir: Path, tmp: Path, work: Callable[[Scrapes], None]) -> Scrapes:
    """Scrape a simulator on MAP_DIR in a tight loop for as long as WORK runs (it sees the counts)."""
    sim = GpuSimulator(
        SimConfig(
            hostname="gpu01",
            gpus=GPUS,
            jobmap_dir=str(map_dir),
            faults_file=str(tmp / "faults.json"),
            power_noise_w=0.0,
            uptime_s=86400.0,
        )
    )
    srv = make_server(("127.0.0.1", 0), sim.scrape, title="t")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    done = threading.Event()
    res = Scrapes()

    def scraper() -> None:
        while not done.is_set():
            try:
                with opener.open(url, timeout=10) as r:
                    body = r.read()
                res.ok += 1
                res.tagged += b'hpc_job="' in body
            except urllib.error.HTTPError as e:
                assert e.code == 500, e
                res.failed += 1

    th = threading.Thread(target=scraper)
    th.start()
    try:
        work(res)
    finally:
        done.set()
        th.join()
        srv.shutdown()
        srv.server_close()
    assert res.failed == sim.scrape_errors
    return res


def test_real_epilogs_never_fail_a_scrape(make_jobmap) -> None:
    jm: JobMapRun = make_jobmap("dash")
    cycles = 240

    def job(n: int) -> None:
        # jobs on one GPU at a time, several GPUs busy at once: every epilog ends a GPU's last job
        job_id = 1000 + n
        jm.prolog(job_id, str(n % GPUS), SLURM_JOB_USER="alice", SLURMD_NODENAME="gpu01")
        jm.epilog(job_id, str(n % GPUS))

    def work(_: Scrapes) -> None:
        with ThreadPoolExecutor(GPUS) as pool:
            list(pool.map(job, range(cycles)))

    started = time.monotonic()
    res = _scrape_while(jm.map_dir, jm.base, work)
    took = time.monotonic() - started
    print(f"\n{cycles} prolog+epilog pairs in {took:.1f}s: {res.ok} scrapes answered, {res.failed} failed")
    assert res.failed == 0
    assert res.ok >= 100 and res.tagged > 0  # the scraper really ran against a live map
    assert jm.job_map() == {} and sorted(jm.files()) == [str(g) for g in range(GPUS)]
    assert jm.log() == [] and jm.leftovers() == []


def test_control_a_writer_that_removes_emptied_files_fails_scrapes(tmp_path: Path) -> None:
    """The old epilog's last step, alone and fast: the harness must see the scrapes it fails."""
    map_dir = tmp_path / "jobmap"
    map_dir.mkdir()
    stop = time.monotonic() + 20

    def work(res: Scrapes) -> None:
        n = 0
        while time.monotonic() < stop and (res.failed == 0 or n < 2000):
            g = n % GPUS
            tmp = map_dir / f".stage-{g}"
            tmp.write_text(f"{n}\n")
            os.rename(tmp, map_dir / str(g))  # prolog: renamed into place
            os.unlink(map_dir / str(g))  # old epilog: the emptied file removed
            n += 1

    res = _scrape_while(map_dir, tmp_path, work)
    print(f"\ncontrol: {res.ok} scrapes answered, {res.failed} failed")
    assert res.failed > 0
