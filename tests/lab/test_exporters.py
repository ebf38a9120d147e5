"""The exporters on the lab's real hosts: the GPU simulator on gpu01, the Slurm exporter on ctl01.

The wheel is built from this tree, copied to the hosts and unpacked with the hosts' own python3
(no pip there, no index anywhere); both exporters run as transient systemd units on test ports, with
the test's own job map dir, so they never collide with what the roles deploy. The job map is
written here from `scontrol show job -d` (the GPU indices Slurm gave the job), standing in for the
`slurm_jobmap` prolog, which is another role's. Every scrape goes from the admin host to 198.18.0.x.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
import urllib.request

import pytest

from tests.helpers.cli import REPO, run_vigil
from tests.unit.exporters.expo_helpers import parse_exposition
from vigil.bundle.fetchers._project import build_project_wheel
from vigil.installer.lab import ssh_argv

pytestmark = [pytest.mark.lab]

PREFIX = "/opt/vigil-test/exporters"
JOBMAP = "/run/vigil-test/jobmap"
SIM_PORT = 19400
SLURM_PORT = 19341
ACCOUNTS = ("xtest-physics", "xtest-chemistry")  # test-only accounts: counts exact in a shared lab


def _vigil(*args: str) -> subprocess.CompletedProcess[str]:
    return run_vigil(*args, check=False, timeout=120)


def _scrape(ip: str, port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://{ip}:{port}/metrics", timeout=20) as r:
        return parse_exposition(r.read().decode())


def _wait_scrape(ip: str, port: int, timeout: float = 30) -> dict[str, list[tuple[dict[str, str], float]]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _scrape(ip, port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def exporters_running(lab, tmp_path_factory):
    wheel = build_project_wheel(REPO / "exporters", tmp_path_factory.mktemp("wheel"))
    units = {"gpu01": "vigil-test-gpusim", "ctl01": "vigil-test-slurm-exporter"}
    for host in units:
        cmd = (
            f"rm -rf {PREFIX} && mkdir -p {PREFIX} && cat > /tmp/{wheel.name} && "
            f"python3 -m zipfile -e /tmp/{wheel.name} {PREFIX} && rm /tmp/{wheel.name}"
        )
        cp = subprocess.run(
            ssh_argv(lab.paths, lab.ip(host), cmd), input=wheel.read_bytes(), capture_output=True, timeout=60
        )
        assert cp.returncode == 0, cp.stderr.decode()
    lab.ssh(
        "gpu01",
        f"systemctl stop vigil-test-gpusim 2>/dev/null; systemctl reset-failed vigil-test-gpusim "
        f"2>/dev/null; rm -rf {JOBMAP}; mkdir -p {JOBMAP}; "
        f"systemd-run --unit=vigil-test-gpusim --collect -E PYTHONPATH={PREFIX} "
        f"/usr/bin/python3 -m vigil.exporters.gpusim --address {lab.ip('gpu01')}:{SIM_PORT} "
        f"--hpc-job-mapping-dir {JOBMAP} --power-noise 0",
    )
    lab.ssh(
        "ctl01",
        "systemctl stop vigil-test-slurm-exporter 2>/dev/null; "
        "systemctl reset-failed vigil-test-slurm-exporter 2>/dev/null; "
        f"systemd-run --unit=vigil-test-slurm-exporter --collect -E PYTHONPATH={PREFIX} "
        f"/usr/bin/python3 -m vigil.exporters.slurm --listen-address {lab.ip('ctl01')}:{SLURM_PORT}",
    )
    _wait_scrape(lab.ip("gpu01"), SIM_PORT)
    _wait_scrape(lab.ip("ctl01"), SLURM_PORT)
    yield lab
    for host, unit in units.items():
        out = lab.ssh(host, f"journalctl -u {unit} --no-pager -n 20", check=False).stdout
        lab.ssh(host, f"systemctl stop {unit}; rm -rf {PREFIX} /run/vigil-test", check=False)
        print(f"--- {host} {unit}\n{out}")


def _submit(account: str, gpus: int, node: str = "gpu01", user: str = "alice") -> str:
    cp = _vigil(
        "lab",
        "job",
        "--account",
        account,
        "--user",
        user,
        "--gpus",
        str(gpus),
        "--seconds",
        "300",
        "--node",
        node,
        "--json",
    )
    assert cp.returncode == 0, cp.stderr
    job = json.loads(cp.stdout)
    assert job["job_id"].isdigit(), cp.stdout
    assert job["ran_on"] == node and len(job["gpu_indices"]) == gpus, job
    return str(job["job_id"])


def _gpu_indices(lab, job: str, timeout: float = 60) -> list[int]:
    """The GPU indices Slurm gave JOB (`scontrol show job -d`: GRES=gpu:2(IDX:0-1)), once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = lab.ssh("ctl01", f"scontrol show job -d {job}").stdout
        m = re.search(r"GRES=\S*?gpu[^(\s]*\(IDX:([0-9,-]+)\)", out)
        if "JobState=RUNNING" in out and m:
            idx: list[int] = []
            for part in m.group(1).split(","):
                a, _, b = part.partition("-")
                idx += list(range(int(a), int(b or a) + 1))
            return idx
        time.sleep(1)
    pytest.fail(f"job {job} did not start with GPUs: {out}")


def test_hpc_job_follows_the_job_and_slurm_counts_accounts(exporters_running):
    lab = exporters_running
    jobs: list[str] = []
    try:
        phys = _submit(ACCOUNTS[0], 1)
        jobs.append(phys)
        chem = _submit(ACCOUNTS[1], 2, user="bob")
        jobs.append(chem)
        alloc = {phys: _gpu_indices(lab, phys), chem: _gpu_indices(lab, chem)}
        # the prolog's part: one line per job in the file of each GPU it holds
        for job, gpus in alloc.items():
            for g in gpus:
                lab.ssh("gpu01", f"echo {job} >> {JOBMAP}/{g}")
        fams = _scrape(lab.ip("gpu01"), SIM_PORT)
        seen: dict[str, set[str]] = {}
        for labels, _ in fams["DCGM_FI_DEV_GPU_UTIL"]:
            if "hpc_job" in labels:
                seen.setdefault(labels["hpc_job"], set()).add(labels["gpu"])
        assert seen == {j: {str(g) for g in gpus} for j, gpus in alloc.items()}
        power = {lbl["gpu"]: v for lbl, v in fams["DCGM_FI_DEV_POWER_USAGE"]}
        for gpus in alloc.values():
            assert all(power[str(g)] == 350.0 for g in gpus)
        assert all(lbl["Hostname"] == "gpu01" for lbl, _ in fams["DCGM_FI_DEV_POWER_USAGE"])

        counts = {
            (lbl["account"], lbl["state"]): v
            for lbl, v in _scrape(lab.ip("ctl01"), SLURM_PORT)["slurm_jobs"]
            if lbl["account"] in ACCOUNTS
        }
        assert counts == {(ACCOUNTS[0], "running"): 1, (ACCOUNTS[1], "running"): 1}
        slurm = _scrape(lab.ip("ctl01"), SLURM_PORT)
        assert {lbl["command"]: v for lbl, v in slurm["slurm_up"]} == {"squeue": 1, "sinfo": 1, "sdiag": 1}
        gpus = {(lbl["account"]): v for lbl, v in slurm["slurm_account_gpus_allocated"]}
        assert gpus[ACCOUNTS[0]] == 1 and gpus[ACCOUNTS[1]] == 2

        # the epilog's part: the job's lines go; its series lose hpc_job at the next scrape
        lab.ssh("ctl01", f"scancel {phys}")
        for g in alloc[phys]:
            lab.ssh("gpu01", f"sed -i '/^{phys}$/d' {JOBMAP}/{g}; [ -s {JOBMAP}/{g} ] || rm -f {JOBMAP}/{g}")
        fams = _scrape(lab.ip("gpu01"), SIM_PORT)
        assert not any(lbl.get("hpc_job") == phys for lbl, _ in fams["DCGM_FI_DEV_GPU_UTIL"])
        assert any(lbl.get("hpc_job") == chem for lbl, _ in fams["DCGM_FI_DEV_GPU_UTIL"])
    finally:
        if jobs:
            lab.ssh("ctl01", "scancel " + " ".join(jobs), check=False)


#: accounts a job's owner may pick (lower case: Slurm lower-cases them anyway), each of which the old
#: `|`-and-newline parse charged to xtest-victim: 4 GPUs and 64 CPUs that account never held
HOSTILE_ACCOUNTS = (
    "xtest-victim|gpu|alice|1|64|gres:gpu:4|none",
    "xtest-forged\nrunning|xtest-victim|gpu|alice|1|64|gres:gpu:4|none",
)


def test_an_account_holding_separators_is_counted_under_its_own_name(exporters_running):
    """Real Slurm 22.05 with accounting off takes `|` and a newline in `sbatch --account` (slurmctld
    checks only the length) and squeue prints them as they are; the exporter counts each job under
    that literal name (the exposition writes the newline as `\\n`) and never under xtest-victim's."""
    lab = exporters_running
    jobs: list[str] = []
    try:
        for account in HOSTILE_ACCOUNTS:
            argv = [
                "sbatch",
                "--parsable",
                f"--account={account}",
                "--partition=gpu",
                "--gres=gpu:1",
                "--ntasks=1",
                "--chdir=/tmp",
                "--output=/dev/null",
                "--job-name=vigil-test-hostile-account",
                "--wrap",
                "sleep 300",
            ]
            cp = lab.ssh("ctl01", "runuser -u alice -- " + shlex.join(argv))
            jobs.append(cp.stdout.strip().split(";")[0])
            assert jobs[-1].isdigit(), cp.stdout
        for job, account in zip(jobs, HOSTILE_ACCOUNTS, strict=True):
            assert lab.ssh("ctl01", f"squeue -h -j {job} -o %a").stdout == account + "\n"  # as given
            _gpu_indices(lab, job)  # running, with its GPU
        slurm = _scrape(lab.ip("ctl01"), SLURM_PORT)
        gpus = {lbl["account"]: v for lbl, v in slurm["slurm_account_gpus_allocated"]}
        cpus = {lbl["account"]: v for lbl, v in slurm["slurm_account_cpus_allocated"]}
        for account in HOSTILE_ACCOUNTS:
            shown = account.replace("\n", "\\n")
            assert gpus.get(shown) == 1 and cpus.get(shown) == 1, (account, gpus)
        assert "xtest-victim" not in gpus and "xtest-victim" not in cpus, gpus
        assert not any(lbl["account"] == "xtest-victim" for lbl, _ in slurm["slurm_jobs"])
        assert not any(lbl["account"].startswith("running|") for lbl, _ in slurm["slurm_jobs"])
    finally:
        if jobs:
            lab.ssh("ctl01", "scancel " + " ".join(jobs), check=False)


def test_lab_fault_reaches_the_simulator_and_clears(exporters_running):
    lab = exporters_running
    cp = _vigil("lab", "fault", "xid", "gpu01", "3", "--code", "48")
    try:
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.startswith("OK: gpu01/3: xid injected")
        xid = {lbl["gpu"]: v for lbl, v in _scrape(lab.ip("gpu01"), SIM_PORT)["DCGM_FI_DEV_XID_ERRORS"]}
        assert xid["3"] == 48 and xid["0"] == 0
    finally:
        cp = _vigil("lab", "fault", "xid", "gpu01", "3", "--clear")
    assert cp.returncode == 0, cp.stderr
    xid = {lbl["gpu"]: v for lbl, v in _scrape(lab.ip("gpu01"), SIM_PORT)["DCGM_FI_DEV_XID_ERRORS"]}
    assert xid["3"] == 0
    bad = _vigil("lab", "fault", "xid", "ctl01", "0")
    assert bad.returncode != 0 and "ctl01: faults are injected on GPU nodes only" in bad.stderr
