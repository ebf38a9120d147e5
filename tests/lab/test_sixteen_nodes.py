"""Soak (`make test-soak`): the stack on a lab of 16 GPU nodes, from the session's signed bundle.

A first deploy onto fresh hosts must reach every host and leave every scrape target up (16
node_exporters and 16 GPU exporters among them); a rerun must change nothing on any host. Their
times are measured, not asserted (docs/benchmarks.md has the per-node figures from
benchmarks/deploy.py). The lab is put back at its default size afterwards.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.release import Imported
from tests.lab import labhttp
from tests.lab.conftest import Lab
from vigil.installer import lab as lab_api

pytestmark = [pytest.mark.lab, pytest.mark.soak]

NODES = 16


def test_sixteen_gpu_nodes_deploy_every_target_up_and_a_rerun_changes_nothing(
    lab: Lab, imported_release: Imported, tmp_path: Path, measured: Any
) -> None:
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    lab.down()
    try:
        t0 = time.monotonic()
        up = lab_api.up(lab.paths, inventory_dir=inventory, gpu_nodes=NODES)
        measured(f"lab: up with {NODES} GPU nodes", time.monotonic() - t0)
        assert all(h.system == "running" for h in up.hosts), [h.to_json() for h in up.hosts]
        want = sorted(["mon01", "ctl01", *(f"gpu{i:02d}" for i in range(1, NODES + 1))])
        vigil = imported_release.vigil
        t0 = time.monotonic()
        first = vigil.json("deploy", "-i", str(inventory), "--json")
        measured(f"lab: first deploy, {NODES} GPU nodes", time.monotonic() - t0)
        assert first["ok"] is True, first
        assert sorted(first["hosts"]) == want
        assert [h for h, c in first["hosts"].items() if c["changed"] == 0] == []
        labhttp.use_site(imported_release.home)

        def every_target_up() -> Counter[str] | None:
            up = labhttp.query("up", nocache=True)
            if not up or any(s["value"][1] != "1" for s in up):
                return None
            jobs = Counter(str(s["metric"].get("job")) for s in up)
            return jobs if jobs["node_exporter"] == NODES + 2 and jobs["dcgm_exporter"] == NODES else None

        jobs = labhttp.wait_for(f"every target of {NODES} GPU nodes up", every_target_up, 300, every=5)
        assert jobs["slurm_exporter"] == 1, jobs
        t0 = time.monotonic()
        rerun = vigil.json("deploy", "-i", str(inventory), "--json")
        measured(f"lab: rerun, {NODES} GPU nodes, nothing to change", time.monotonic() - t0)
        assert rerun["ok"] is True, rerun
        assert {h: c["changed"] for h, c in rerun["hosts"].items()} == dict.fromkeys(want, 0)
    finally:
        lab.down()
        lab.up()  # the default size, for whatever runs after
