"""`vigil plan`: the formulas, their inputs' bounds, and what the command prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vigil.installer.cli import main
from vigil.installer.plan import GPUS_PER_SCRAPER, MEASURED, PAIR_FROM_GPUS, Inputs, PlanError, plan

ROOT = Path(__file__).resolve().parents[3]


def test_the_gpu_series_constant_is_the_counters_file() -> None:
    csv = (ROOT / "roles/dcgm_exporter/files/vigil-counters.csv").read_text().splitlines()
    fields = [ln.split(",")[0].strip() for ln in csv if ln.strip() and not ln.startswith("#")]
    # the driver version is a label on every series, not a series of its own
    assert MEASURED.dcgm_series_per_gpu == len([f for f in fields if f != "DCGM_FI_DRIVER_VERSION"])


def test_every_measured_constant_is_set() -> None:
    for name, value in vars(MEASURED).items():
        values = value if isinstance(value, tuple) else (value,)
        assert all(v > 0 for v in values), f"{name} is not measured"


def test_the_topology_follows_the_size() -> None:
    small = plan(Inputs(gpu_nodes=(PAIR_FROM_GPUS - 1) // 8))
    assert (small["topology"], small["monitoring_hosts"]) == ("one monitoring host", 1)
    assert "vmagent_queue_samples_per_second" not in small["inventory"]["group_vars/all.yml"]
    pair = plan(Inputs(gpu_nodes=GPUS_PER_SCRAPER // 8))
    assert (pair["topology"], pair["monitoring_hosts"], pair["scrapers"]) == ("the monitoring pair", 2, 1)
    big = plan(Inputs(gpu_nodes=512))
    assert big["scrapers"] == 4 and "4 scrape shards advised" in big["topology"]
    assert "does not deploy yet" in big["topology"]  # said until the roles deploy shards


def test_the_figures_grow_with_the_cluster_and_add_up() -> None:
    docs = [plan(Inputs(gpu_nodes=n)) for n in (8, 64, 512)]
    for key in ("active_series", "samples_per_s", "disk_per_replica_per_year_gb"):
        assert docs[0][key] < docs[1][key] < docs[2][key], key
    d = docs[1]
    m = MEASURED
    node = m.node_exporter_base + m.node_exporter_per_cpu * 64 + 2 * m.scrape_series_per_target
    assert d["series_per_gpu_node"] == node + 8 * m.dcgm_series_per_gpu
    year = d["samples_per_s"] * 365.25 * 86400 * m.bytes_per_sample / 1e9
    assert d["disk_per_replica_per_year_gb"] == pytest.approx(year, rel=1e-3)
    assert d["disk_per_replica_for_retention_gb"] == pytest.approx(year * 13 / 12, rel=1e-3)
    # a shorter interval is more samples, more CPUs more series
    assert plan(Inputs(gpu_nodes=64, scrape_interval_s=15))["samples_per_s"] > d["samples_per_s"]
    assert plan(Inputs(gpu_nodes=64, cpus_per_node=192))["active_series"] > d["active_series"]


def test_the_inventory_variables_pass_the_roles_checks() -> None:
    doc = plan(Inputs(gpu_nodes=128, retention_months=24))
    variables = doc["inventory"]["group_vars/all.yml"]
    # roles/victoriametrics/tasks/preflight.yml
    assert re.fullmatch(r"[0-9]+[hdwy]?", variables["victoriametrics_retention_period"])
    assert variables["victoriametrics_retention_period"] == "744d"
    assert isinstance(variables["vmagent_queue_samples_per_second"], int)
    assert variables["vmagent_queue_samples_per_second"] >= doc["samples_per_s"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu-nodes", "0"], "--gpu-nodes: 0: give 1 to 100000"),
        (["--gpu-nodes", "8", "--gpus-per-node", "65"], "--gpus-per-node: 65"),
        (["--gpu-nodes", "8", "--retention-months", "0"], "--retention-months: 0"),
        (["--gpu-nodes", "8", "--scrape-interval", "1"], "--scrape-interval: 1"),
        (["--gpu-nodes", "8", "--admin-cores", "-2"], "--admin-cores: -2"),
        (["--gpu-nodes", "eight"], "invalid int value"),
    ],
)
def test_an_impossible_size_gets_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--home", str(tmp_path), "plan", *argv]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("FAIL: ") and message in err, err


def test_the_command_prints_the_plan_and_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(tmp_path), "plan", "--gpu-nodes", "128"]) == 0
    text = capsys.readouterr().out
    assert "topology:             the monitoring pair" in text
    assert "vmagent_queue_samples_per_second:" in text and "1024 GPUs" in text
    assert main(["--home", str(tmp_path), "plan", "--gpu-nodes", "128", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(json.dumps(plan(Inputs(gpu_nodes=128))))
    with pytest.raises(PlanError):
        plan(Inputs(gpu_nodes=128, gpus_per_node=0))
