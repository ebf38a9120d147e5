"""The Slurm exporter against real Slurm 22.05 output from the lab and against failing commands."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from tests.unit.exporters.expo_helpers import FIXTURES, parse_exposition, promtool_check
from vigil.exporters.slurm import SlurmCollector
from vigil.exporters.slurm.commands import COMMANDS
from vigil.exporters.slurm.parse import (
    gpu_count,
    parse_sdiag,
    parse_sinfo,
    parse_squeue,
    split_state,
    tres_gpus,
)

FIX = FIXTURES / "slurm"


def _fake_slurm(tmp_path: Path, **behaviour: str) -> dict[str, str]:
    """squeue/sinfo/sdiag on PATH: print the captured fixture, or do what BEHAVIOUR says."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for cmd in ("squeue", "sinfo", "sdiag"):
        body = behaviour.get(cmd, f"cat {FIX / (cmd + '.txt')}")
        script = bindir / cmd
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def _values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(lbl.items())): v for lbl, v in parse_exposition(text)[name]}


def test_squeue_fixture_from_the_lab():
    jobs = parse_squeue((FIX / "squeue.txt").read_text())
    assert jobs.bad_lines == 0 and jobs.lines == 8
    assert jobs.by_state == {
        ("pending", "chemistry", "gpu"): 1,
        ("pending", "physics", "gpu"): 5,  # an array of 5 held tasks, counted one by one
        ("running", "physics", "gpu"): 1,
        ("running", "chemistry", "gpu"): 1,
    }
    assert jobs.pending_reasons == {("Resources", "gpu"): 1, ("JobHeldUser", "gpu"): 5}
    assert jobs.account_gpus == {"physics": 2, "chemistry": 3}
    assert jobs.account_cpus == {"physics": 1, "chemistry": 1}


def test_sinfo_fixture_from_the_lab():
    nodes, bad = parse_sinfo((FIX / "sinfo.txt").read_text())
    assert bad == 0 and sorted(nodes) == ["gpu01", "gpu02"]
    g1 = nodes["gpu01"]
    assert (
        g1.state,
        g1.cpus_alloc,
        g1.cpus_idle,
        g1.cpus_total,
        g1.gpus_total,
        g1.gpus_alloc,
        g1.partitions,
    ) == ("mixed", 1, 7, 8, 4, 2, ("gpu",))


def test_sdiag_fixture_from_the_lab():
    v = parse_sdiag((FIX / "sdiag.txt").read_text())
    assert v["server_threads"] == 3 and v["jobs_submitted"] == 8
    assert {
        "main_last_cycle_us",
        "main_mean_cycle_us",
        "main_cycles",
        "backfill_cycles",
        "backfill_last_cycle_us",
    } <= set(v)


def test_gres_strings():
    assert gpu_count("gpu:4") == 4
    assert gpu_count("gpu:a100:2(S:0-1)") == 2
    assert gpu_count("gpu:2(IDX:0,2),gpu:v100:1(IDX:3),shard:0") == 3
    assert gpu_count("(null)") == 0
    assert tres_gpus("gres:gpu:2") == 2 and tres_gpus("gres/gpu:a100:1") == 1 and tres_gpus("N/A") == 0
    assert split_state("idle*") == ("idle", "*") and split_state("mixed+drain") == ("mixed+drain", "")


def test_sinfo_node_in_two_partitions_counted_once():
    text = "n1|idle|0/8/0/8|gpu:4|gpu:0|a*\nn1|idle|0/8/0/8|gpu:4|gpu:0|b\nn2|down*|0/0/8/8|(null)|gpu:0|a\n"
    nodes, bad = parse_sinfo(text)
    assert bad == 0 and nodes["n1"].partitions == ("a", "b") and nodes["n2"].flags == "*"


def test_scrape_renders_the_lab_fixtures(tmp_path):
    text = SlurmCollector(env=_fake_slurm(tmp_path)).scrape()
    promtool_check(text)  # our own names follow the conventions: no lint accepted here
    jobs = _values(text, "slurm_jobs")
    assert jobs[(("account", "physics"), ("partition", "gpu"), ("state", "pending"))] == 5
    assert jobs[(("account", "chemistry"), ("partition", "gpu"), ("state", "running"))] == 1
    gpus = _values(text, "slurm_gpus")
    assert gpus[(("state", "allocated"),)] == 5 and gpus[(("state", "idle"),)] == 3
    assert _values(text, "slurm_gpus_configured")[()] == 8
    assert _values(text, "slurm_nodes")[(("state", "mixed"),)] == 2
    assert _values(text, "slurm_account_gpus_allocated")[(("account", "physics"),)] == 2
    assert all(v == 1 for v in _values(text, "slurm_up").values())
    assert _values(text, "slurm_scheduler_last_cycle_seconds")[()] < 1


def test_failing_and_hanging_commands_give_up_0_not_a_crash(tmp_path, caplog):
    env = _fake_slurm(
        tmp_path,
        squeue="echo 'squeue: error: slurm_load_jobs: Unable to contact' >&2; exit 1",
        sinfo="sleep 30",
    )
    col = SlurmCollector(env=env, timeout=1.0)
    start = time.monotonic()
    text = col.scrape()
    took = time.monotonic() - start
    assert took < 5, "the hanging sinfo must be killed at the timeout"
    promtool_check(text)
    up = _values(text, "slurm_up")
    assert up == {(("command", "squeue"),): 0, (("command", "sinfo"),): 0, (("command", "sdiag"),): 1}
    assert "slurm_jobs" not in parse_exposition(text) and "slurm_nodes" not in parse_exposition(text)
    assert "slurm_scheduler_threads" in parse_exposition(text)  # what did answer is still served
    assert "squeue failed: exit status 1: squeue: error: slurm_load_jobs: Unable to contact" in caplog.text
    assert "sinfo failed: timed out after 1s" in caplog.text
    text = col.scrape()
    errs = _values(text, "slurm_exporter_scrape_errors_total")
    assert errs[(("command", "squeue"),)] == 2 and errs[(("command", "sdiag"),)] == 0
    assert 1.0 <= _values(text, "slurm_exporter_scrape_duration_seconds")[()] < 5


def test_missing_slurm_commands(tmp_path):
    col = SlurmCollector(env={"PATH": str(tmp_path)}, timeout=1.0)
    assert all(v == 0 for v in _values(col.scrape(), "slurm_up").values())


def test_compact_formats_never_json():
    for argv in COMMANDS.values():
        assert "--json" not in argv and "--yaml" not in argv
