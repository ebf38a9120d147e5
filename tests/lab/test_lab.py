"""The lab on real systemd hosts: up (twice), ssh, systemd, the air gap, Slurm with GPUs, status, down.

How long an `up` or a `down` takes is measured and listed at the end of the run, not asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from tests.helpers.cli import run_vigil, vigil_env
from vigil.installer import lab as lab_api
from vigil.installer.lab import BRIDGE, HOSTS, nspawn, state
from vigil.installer.lab.hosts import SUBNET, host_by_name
from vigil.installer.lab.network import link_exists, veth_name

if TYPE_CHECKING:
    from tests.lab.conftest import Lab

pytestmark = pytest.mark.lab

#: TEST-NET-1 (RFC 5737): only ever asked about with `ip route get`, never connected to
OUTSIDE = "192.0.2.1"
GPU01, MON01, CTL01 = (host_by_name(h).ip for h in ("gpu01", "mon01", "ctl01"))
#: the lab's addresses as they would appear in a firewall rule ("198.18.0.")
LAB_NET = SUBNET.rsplit(".", 1)[0] + "."
Measured = Callable[[str, float], None]


def _vigil(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return run_vigil(*args, env=vigil_env(home), check=False, timeout=300)


def test_second_up_leaves_running_hosts_alone(lab: Lab, measured: Measured) -> None:
    before = state.load(lab.paths.state_file)
    t0 = time.monotonic()
    res = lab.up()
    measured("lab: second up (hosts already running)", time.monotonic() - t0)
    after = state.load(lab.paths.state_file)
    assert {n: (h.pid, h.starttime) for n, h in after.hosts.items()} == {
        n: (h.pid, h.starttime) for n, h in before.hosts.items()
    }
    assert not [h.name for h in res.hosts if h.started_now]
    assert sorted(after.hosts) == sorted(h.name for h in HOSTS)


def test_every_host_runs_systemd_and_answers_over_ssh(lab: Lab) -> None:
    for host in HOSTS:
        cp = lab.ssh(host.name, "hostname; cat /proc/1/comm; systemctl is-system-running", check=False)
        why = ""
        if cp.stdout.split() != [host.name, "systemd", "running"]:  # name the failed units and their journal
            why = lab.ssh(
                host.name,
                "systemctl --failed --no-legend --plain; for u in $(systemctl --failed --no-legend --plain"
                " | cut -d' ' -f1); do journalctl -u $u --no-pager -n 15 -o short-iso; done",
                check=False,
            ).stdout
        assert cp.stdout.split() == [host.name, "systemd", "running"], (host.name, cp.stdout, cp.stderr, why)


def test_strict_host_key_checking_rejects_a_wrong_key(lab: Lab, tmp_path: Path) -> None:
    # a known_hosts that names gpu01's address with another host's key must stop the connection
    lines = lab.paths.known_hosts.read_text().splitlines()
    gpu01 = next(line for line in lines if line.startswith(f"{GPU01},"))
    mon01 = next(line for line in lines if line.startswith(f"{MON01},"))
    forged = tmp_path / "known_hosts"
    forged.write_text(f"{GPU01},gpu01 {mon01.split(' ', 1)[1]}\n")
    assert gpu01 != forged.read_text().strip()
    argv = lab_api.ssh_argv(lab.paths, GPU01, "true")
    argv = [a.replace(str(lab.paths.known_hosts), str(forged)) for a in argv]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert cp.returncode != 0
    assert "host key" in cp.stderr.lower()


def test_air_gap_no_host_has_a_route_off_the_lab_subnet(lab: Lab) -> None:
    for host in HOSTS:
        cp = lab.ssh(host.name, f"ip route get {OUTSIDE}", check=False)
        assert cp.returncode != 0 and "Network is unreachable" in cp.stderr, (host.name, cp.stdout, cp.stderr)
        routes = lab.ssh(host.name, "ip -4 route show table all type unicast; ip -6 route show").stdout
        assert routes.split("\n")[0].startswith(f"{SUBNET} dev host0"), (host.name, routes)
        assert "default" not in routes, (host.name, routes)
        # lab neighbours are reachable by name (Slurm depends on it)
        assert CTL01 in lab.ssh(host.name, "getent hosts ctl01").stdout


def test_air_gap_admin_side_does_not_forward(lab: Lab) -> None:
    assert Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/forwarding").read_text().strip() == "0"
    assert Path(f"/proc/sys/net/ipv6/conf/{BRIDGE}/disable_ipv6").read_text().strip() == "1"
    for tool, args in (("iptables-save", ["-t", "nat"]), ("nft", ["list", "ruleset"])):
        if shutil.which(tool):
            rules = subprocess.run([tool, *args], capture_output=True, text=True, check=False).stdout
            assert not re.search(rf"{re.escape(LAB_NET)}|{re.escape(BRIDGE)}|vb-", rules), rules


def test_slurm_gpu_job_sees_its_gpus_and_account(lab: Lab) -> None:
    # 1. a batch job, as a prolog sees it: SLURM_JOB_GPUS and the account
    cp = lab.ssh(
        "ctl01",
        "sbatch --parsable --wait -N1 --gres=gpu:2 -A physics -w gpu01 -o /tmp/vigil-lab-test-%j.out "
        "--wrap 'env | grep ^SLURM_JOB_'",
        timeout=120,
    )
    job = cp.stdout.strip().splitlines()[-1]
    env = dict(
        line.split("=", 1)
        for line in lab.ssh("gpu01", f"cat /tmp/vigil-lab-test-{job}.out").stdout.splitlines()
    )
    assert env["SLURM_JOB_ACCOUNT"] == "physics"
    assert len(env["SLURM_JOB_GPUS"].split(",")) == 2, env
    # 2. an interactive step under another account and user
    cp = lab.ssh("ctl01", "su alice -c 'srun -N1 --gres=gpu:3 -A chemistry env'", timeout=120)
    step = dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)
    assert step["SLURM_JOB_ACCOUNT"] == "chemistry"
    assert step["SLURM_JOB_USER"] == "alice"
    assert len(step["CUDA_VISIBLE_DEVICES"].split(",")) == 3
    # 3. the simulated GPUs are what slurmd found
    assert "Gres=gpu:4" in lab.ssh("ctl01", "scontrol show node gpu02").stdout
    assert lab.ssh("gpu02", "stat -c '%t:%T' /dev/nvidia3").stdout.strip() == "c3:3"


def test_inventory_works_with_ansible(lab: Lab, tmp_path: Path) -> None:
    inv = yaml.safe_load(lab.hosts_file.read_text())
    groups = inv["all"]["children"]
    assert {g: sorted(v["hosts"]) for g, v in groups.items()} == {
        "monitoring": ["mon01"],
        "slurm_controller": ["ctl01"],
        "gpu_nodes": ["gpu01", "gpu02"],
    }
    assert inv["all"]["vars"]["vigil_lab"] is True
    assert "StrictHostKeyChecking=yes" in inv["all"]["vars"]["ansible_ssh_common_args"]
    ansible = Path(sys.executable).with_name("ansible")
    env = {**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_LOCAL_TEMP": str(tmp_path)}
    env.pop("ANSIBLE_CONFIG", None)
    cp = subprocess.run(
        [str(ansible), "all", "-i", str(lab.hosts_file), "-m", "ansible.builtin.ping", "-o"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # no project ansible.cfg: the inventory alone must be enough
        timeout=180,
        check=False,
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.count("SUCCESS") == len(HOSTS), cp.stdout


def test_status_json(lab: Lab, tmp_path: Path) -> None:
    cp = _vigil("lab", "status", "--json", home=tmp_path)
    assert cp.returncode == 0, cp.stderr
    st = json.loads(cp.stdout)
    recorded = state.load(lab.paths.state_file).hosts
    assert {h["name"]: (h["pid"], h["running"], h["system"]) for h in st["hosts"]} == {
        n: (h.pid, True, "running") for n, h in recorded.items()
    }
    assert st["bridge"] == BRIDGE
    assert st["slurm_nodes"] == {"gpu01": "idle", "gpu02": "idle"} or set(st["slurm_nodes"]) == {
        "gpu01",
        "gpu02",
    }


def test_a_reused_pid_is_never_taken_for_a_container() -> None:
    me = nspawn._stat(os.getpid())
    assert me is not None
    assert nspawn.alive(nspawn.Proc(os.getpid(), me[1]))
    assert not nspawn.alive(nspawn.Proc(os.getpid(), me[1] + 1))
    assert nspawn.stop(nspawn.Proc(os.getpid(), me[1] + 1)) == "not running"


def _running_threads(proc: nspawn.Proc) -> list[str]:
    """The threads of a recorded systemd-nspawn that have not exited, as "TID:state", read from /proc
    here (not with nspawn.alive): a process whose main thread has ended shows as a zombie in
    /proc/PID/stat while its other threads still run."""
    st = nspawn._stat(proc.pid)
    if st is None or st[1] != proc.starttime:
        return []
    left = []
    for task in Path(f"/proc/{proc.pid}/task").glob("*"):
        try:
            state_ = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state_ not in ("Z", "X"):
            left.append(f"{task.name}:{state_}")
    return left


def test_down_removes_everything_and_up_restores(lab: Lab, tmp_path: Path, measured: Measured) -> None:
    recorded = state.load(lab.paths.state_file)
    procs = [nspawn.Proc(h.pid, h.starttime) for h in recorded.hosts.values()]
    cache = Path(recorded.cache_rootfs)
    t0 = time.monotonic()
    cp = _vigil("lab", "down", home=tmp_path)
    measured("lab: down", time.monotonic() - t0)
    # right after `down` returns, no systemd-nspawn process of the lab's hosts runs any more (those
    # `lab up` started from this test process are zombies until it reaps them: exited all the same)
    assert {p.pid: left for p in procs if (left := _running_threads(p))} == {}
    assert cp.returncode == 0, cp.stderr
    assert not [p.pid for p in procs if nspawn.alive(p)]
    assert nspawn.our_strays(lab.paths.lab_dir, set()) == []
    assert not link_exists(BRIDGE)
    assert not [h.name for h in HOSTS if link_exists(veth_name(h))]
    assert not lab.paths.state_file.exists()
    assert not [h.name for h in HOSTS if lab.paths.host_dir(h.name).exists()]
    assert str(lab.paths.lab_dir) not in Path("/proc/self/mounts").read_text()
    assert (cache / "etc/os-release").is_file(), "the cached root fs is kept"
    # status says so, and fails
    st = _vigil("lab", "status", "--json", home=tmp_path)
    assert st.returncode == 1
    assert {h["name"]: h["running"] for h in json.loads(st.stdout)["hosts"]} == {h.name: False for h in HOSTS}
    # the session's lab is needed by later tests: bring it back (warm cache)
    t0 = time.monotonic()
    res = lab.up()
    measured("lab: up again (cached root fs)", time.monotonic() - t0)
    assert all(h.system == "running" for h in res.hosts), [h.to_json() for h in res.hosts]
