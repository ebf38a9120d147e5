"""End to end: GPU energy and GPU-hours per Slurm account, from the deployed stack, in VictoriaMetrics.

lab up → a debian bundle built, imported and deployed with `vigil deploy` (the session's deployed
stack, tests/lab/conftest.py; the lab inventory runs the GPU simulator on gpu01/gpu02 with no power
noise, the Slurm exporter on ctl01, the Slurm job map prolog, and scrapes every 10 s) → GPU jobs
under the accounts `physics` and `chemistry` → in VictoriaMetrics (HTTP to mon01:8428 only):

1. the DCGM series of each running job's GPUs carry `hpc_job`, one series per allocated GPU, and
   `slurm_job_info` names the job's account;
2. once the jobs have ended and their epilogs removed `slurm_job_info`, the plain join finds nothing,
   while the join over `last_over_time(slurm_job_info[w])` still attributes every job: the pattern
   the accounting recording rules use (issue 5);
3. per account, the joined GPU energy equals busy power × joined GPU time within 2 %, both ways,
   and the GPU time matches what Slurm ran (GPUs × seconds) to within the scrape granularity.

The counter starts at a since-boot value (as DCGM's does), so `increase()` over a job's new series
agrees with max - min (checked below).

Why energy is exact: the simulator integrates the power it shows between its scrapes, and a GPU is
busy from the first scrape that sees the job in the map to the first that no longer does; so between
the first and the last sample labelled `hpc_job=<id>` the counter grows by exactly 350 W × the time
between those samples (`tlast_over_time - tfirst_over_time`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.lab.labhttp import query, wait_for

pytestmark = pytest.mark.lab

BUSY_W = 350.0  # dcgm_exporter_simulator_busy_power, the role default the lab keeps
SCRAPE_S = 10  # the lab inventory's victoriametrics_scrape_interval
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
#: (account, user, GPUs, seconds)
JOBS = [("physics", "alice", 2, 60), ("physics", "alice", 1, 40), ("chemistry", "bob", 3, 60)]


def by(series: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {s["metric"].get(label, ""): float(s["value"][1]) for s in series}


def joined(expr_left: str, ids: str, window: str) -> str:
    """``expr_left`` per GPU series, attributed to the account of its job: the accounting join."""
    return (
        f"sum by (account) (({expr_left}) * on(hpc_job) group_left(account) "
        f'last_over_time(slurm_job_info{{hpc_job=~"{ids}"}}[{window}]))'
    )


@pytest.fixture(scope="module")
def ran_jobs(lab: Any, deployed_stack: Any) -> dict[str, Any]:
    assert deployed_stack.first["ok"] is True, deployed_stack.first
    wait_for(
        "the GPU simulators and the Slurm exporter to be scraped",
        lambda: (
            by(query('up{job=~"dcgm_exporter|slurm_exporter"}'), "instance")
            == {"gpu01": 1.0, "gpu02": 1.0, "ctl01": 1.0}
        ),
        120,
    )
    t0 = time.time()
    jobs: dict[str, tuple[str, str, int, int]] = {}
    try:
        for account, user, gpus, seconds in JOBS:
            res = deployed_stack.vigil(
                "lab",
                "job",
                "--account",
                account,
                "--user",
                user,
                "--gpus",
                str(gpus),
                "--seconds",
                str(seconds),
                "--json",
                timeout=120,
            )
            jobs[str(json.loads(res.stdout)["job_id"])] = (account, user, gpus, seconds)
        ids = "|".join(jobs)
        # 1. while they run: hpc_job on every allocated GPU's series, slurm_job_info with the account
        want = {j: g for j, (_, _, g, _) in jobs.items()}

        def gpus_tagged() -> list[dict[str, Any]] | None:
            s = query(f'DCGM_FI_DEV_POWER_USAGE{{hpc_job=~"{ids}"}}')
            return s if {j: sum(1 for x in s if x["metric"]["hpc_job"] == j) for j in jobs} == want else None

        def job_info() -> list[dict[str, Any]] | None:
            s = query(f'slurm_job_info{{hpc_job=~"{ids}"}}')
            return s if len(s) == len(jobs) else None

        running = wait_for("every job's GPUs to carry hpc_job in VictoriaMetrics", gpus_tagged, 90)
        info = wait_for("slurm_job_info of every job", job_info, 60)
        # 2. until they have ended and their epilogs have run
        wait_for(
            "the jobs' epilogs to remove slurm_job_info and the GPU map lines",
            lambda: (
                not query(f'slurm_job_info{{hpc_job=~"{ids}"}}')
                and not query(f'{ENERGY}{{hpc_job=~"{ids}"}}')
            ),
            180,
            every=5,
        )
    finally:
        if jobs:  # normally finished already; never leave one running in the shared lab
            lab.ssh("ctl01", "scancel " + " ".join(jobs), check=False)
    window = f"{int(time.time() - t0) + 60}s"
    return {"jobs": jobs, "ids": ids, "window": window, "running": running, "info": info}


def test_running_jobs_tag_their_gpus_with_hpc_job(ran_jobs: dict[str, Any]) -> None:
    info = {s["metric"]["hpc_job"]: s["metric"] for s in ran_jobs["info"]}
    for job, (account, user, gpus, _) in ran_jobs["jobs"].items():
        assert (info[job]["account"], info[job]["user"], info[job]["partition"]) == (account, user, "gpu")
        mine = [s["metric"] for s in ran_jobs["running"] if s["metric"]["hpc_job"] == job]
        assert len({m["gpu"] for m in mine}) == gpus
        # the GPU series come from the node the prolog ran on (by `instance`: dcgm-exporter's own host
        # label is `Hostname` in 4.8.2 and `hostname` after it; nothing of vigil's depends on it)
        assert {m["instance"] for m in mine} == {info[job]["node"]}
        assert all(
            float(s["value"][1]) == BUSY_W for s in ran_jobs["running"] if s["metric"]["hpc_job"] == job
        )


def test_finished_jobs_join_only_through_last_over_time(ran_jobs: dict[str, Any]) -> None:
    ids, window = ran_jobs["ids"], ran_jobs["window"]
    plain = (
        f'sum by (account) ({ENERGY}{{hpc_job=~"{ids}"}} * on(hpc_job) group_left(account) slurm_job_info)'
    )
    assert query(plain) == []  # slurm_job_info is gone with the epilog
    held = joined(f'last_over_time({ENERGY}{{hpc_job=~"{ids}"}}[{window}])', ids, window)
    assert set(by(query(held), "account")) == {"physics", "chemistry"}


def test_energy_and_gpu_hours_per_account_match_the_known_power(ran_jobs: dict[str, Any]) -> None:
    ids, window = ran_jobs["ids"], ran_jobs["window"]
    sel = f'{ENERGY}{{hpc_job=~"{ids}"}}[{window}]'
    joules = by(
        query(joined(f"(max_over_time({sel}) - min_over_time({sel})) / 1000", ids, window)), "account"
    )
    gpu_hours = by(
        query(joined(f"(tlast_over_time({sel}) - tfirst_over_time({sel})) / 3600", ids, window)), "account"
    )
    assert set(joules) == set(gpu_hours) == {"physics", "chemistry"}, (joules, gpu_hours)
    # DCGM's counter is mJ since boot, and so is the simulator's: each job series starts large, far
    # above 10x one busy scrape interval, so VictoriaMetrics' increase() (what the accounting rules
    # use) takes the first sample as its base and gives the same energy as max - min
    first = [float(x["value"][1]) for x in query(f"min_over_time({sel})")]
    assert first and min(first) > 10 * (BUSY_W * SCRAPE_S * 1000 + 1), first
    increase = by(query(joined(f"increase({sel}) / 1000", ids, window)), "account")
    for account in joules:
        assert abs(increase[account] - joules[account]) <= 0.005 * joules[account], (
            account,
            increase[account],
            joules[account],
        )
    slurm_gpu_s: dict[str, float] = {}
    gpu_series: dict[str, int] = {}
    for account, _, gpus, seconds in ran_jobs["jobs"].values():
        slurm_gpu_s[account] = slurm_gpu_s.get(account, 0) + gpus * seconds
        gpu_series[account] = gpu_series.get(account, 0) + gpus
    for account in joules:
        implied_j = BUSY_W * gpu_hours[account] * 3600
        assert abs(joules[account] - implied_j) <= 0.02 * implied_j, (account, joules[account], implied_j)
        implied_h = joules[account] / BUSY_W / 3600
        assert abs(gpu_hours[account] - implied_h) <= 0.02 * implied_h, (
            account,
            gpu_hours[account],
            implied_h,
        )
        # what Slurm ran, seen through 10 s scrapes: each GPU series loses or gains at most two intervals
        # (start and end; the prolog runs before the job and the epilog after it)
        slack = gpu_series[account] * 2 * SCRAPE_S
        assert abs(gpu_hours[account] * 3600 - slurm_gpu_s[account]) <= slack, (
            account,
            gpu_hours[account] * 3600,
            slurm_gpu_s[account],
        )


def test_the_exporters_run_hardened_as_their_own_users(lab: Any, deployed_stack: Any) -> None:
    for host, unit in (
        ("gpu01", "vigil-gpusim"),
        ("gpu02", "vigil-gpusim"),
        ("ctl01", "vigil-slurm-exporter"),
    ):
        props = dict(
            line.split("=", 1)
            for line in lab.ssh(
                host,
                f"systemctl show {unit} -p ActiveState,User,NoNewPrivileges,ProtectSystem,PrivateDevices,"
                "CapabilityBoundingSet",
            ).stdout.splitlines()
            if "=" in line
        )
        assert props["ActiveState"] == "active", (host, unit, props)
        assert props["User"] == unit and props["NoNewPrivileges"] == "yes", props
        assert props["ProtectSystem"] == "strict" and props["PrivateDevices"] == "yes", props
        assert props["CapabilityBoundingSet"] == "", props
        shell = lab.ssh(host, f"getent passwd {unit}").stdout.strip().rsplit(":", 1)[-1]
        assert shell.endswith("nologin")


def test_second_deploy_from_the_console_changes_nothing(
    lab: Any, deployed_stack: Any, ran_jobs: dict[str, Any], measured: Any
) -> None:
    """The stack's second deploy: after the jobs ran (their prologs and epilogs wrote into the
    directories the roles manage), a redeploy changes nothing on any host. It is driven from the
    console (`vigil tui`'s Deploy screen: plan, confirm, the live grid), whose grid and result line
    must be the run's own recap, and whose audit record must be the one `vigil deploy` leaves.
    Its time is the suite's rerun figure (docs/benchmarks.md)."""
    from tests.lab.tui_drive import deploy_from_the_console

    t0 = time.monotonic()
    seen = deploy_from_the_console(deployed_stack.home, lab.inventory)
    measured("lab: second deploy of the stack (from the console, after jobs)", time.monotonic() - t0)
    assert seen["result"] == [f"OK: deploy {seen['run_id']}: 4 hosts, 0 changed"], seen["result"]
    stats = seen["stats"]  # Ansible's own recap, from the run's artifacts
    for host in ("ctl01", "gpu01", "gpu02", "mon01"):
        ok, changed, failed, unreachable, skipped = seen["grid"][host][:5]
        assert (changed, failed, unreachable) == ("0", "0", "0"), (host, seen["grid"][host])
        assert int(ok) == stats["ok"][host] and int(skipped) == stats["skipped"].get(host, 0), host
    record = seen["record"]
    assert (record["action"], record["outcome"]) == ("deploy", "ok")
    assert record["details"]["front_end"] == "tui"
    assert record["details"]["argv"] == ["deploy", "--inventory", str(lab.inventory)]
    assert record["details"]["counts"] == {
        h: {"ok": stats["ok"][h], "changed": 0, "failed": 0, "unreachable": 0} for h in seen["grid"]
    }
