"""GPU jobs in the lab: ``sbatch`` on the controller, as a lab user, under an account."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from vigil.installer.lab import state as lab_state
from vigil.installer.lab.errors import LabError, LabRequestRefused
from vigil.installer.lab.hosts import GPUS_PER_NODE, HOSTS, USERS, Host, host_by_name
from vigil.installer.lab.paths import LabPaths
from vigil.installer.lab.slurm import PARTITION
from vigil.installer.lab.ssh import ssh

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_USER = "alice"


@dataclass(frozen=True)
class Job:
    job_id: str
    account: str
    user: str
    gpus: int
    seconds: int
    node: str | None
    #: where Slurm put it, once known: its state (RUNNING, PENDING, ...), node and GPU indices
    state: str = ""
    ran_on: str = ""
    gpu_indices: tuple[int, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "account": self.account,
            "user": self.user,
            "gpus": self.gpus,
            "seconds": self.seconds,
            "node": self.node,
            "state": self.state,
            "ran_on": self.ran_on,
            "gpu_indices": list(self.gpu_indices),
        }


def _controller_ip() -> str:
    return next(h.ip for h in HOSTS if h.slurm_controller)


def sbatch_command(
    *,
    account: str,
    user: str,
    gpus: int,
    seconds: int,
    node: str | None,
    hosts: tuple[Host, ...] = HOSTS,
) -> str:
    """The shell command run on the controller (checked arguments only; everything quoted)."""
    if not _NAME.match(account):
        raise LabRequestRefused(f"--account {account!r}", "must be 1-64 letters, digits, '_', '.', '-'")
    known = {u for u, _ in USERS} | {"root"}
    if user not in known:
        raise LabRequestRefused(f"--user {user!r}", f"no such lab user (users: {', '.join(sorted(known))})")
    if not 1 <= gpus <= GPUS_PER_NODE:
        raise LabRequestRefused(f"--gpus {gpus}", f"must be 1..{GPUS_PER_NODE} (GPUs per lab node)")
    if not 1 <= seconds <= 7 * 86400:
        raise LabRequestRefused(f"--seconds {seconds}", "must be 1..604800")
    argv = [
        "sbatch",
        "--parsable",
        f"--account={account}",
        f"--partition={PARTITION}",
        f"--gres=gpu:{gpus}",
        "--ntasks=1",
        "--chdir=/tmp",
        "--output=/dev/null",
        f"--job-name=vigil-lab-{account}",
    ]
    if node is not None:
        try:
            h = host_by_name(node, hosts)
        except LabError as exc:
            raise LabRequestRefused(exc.obj, exc.reason) from None
        if not h.gpu_node:
            raise LabRequestRefused(f"--node {node}", "not a GPU node")
        argv.append(f"--nodelist={h.name}")
    argv += ["--wrap", f"sleep {seconds}"]
    cmd = " ".join(shlex.quote(a) for a in argv)
    if user != "root":
        cmd = f"runuser -u {shlex.quote(user)} -- {cmd}"
    return cmd


def submit(
    paths: LabPaths,
    *,
    account: str,
    gpus: int,
    seconds: int,
    user: str = DEFAULT_USER,
    node: str | None = None,
) -> Job:
    """Submit a batch job that holds GPUS GPUs for SECONDS; returns it with Slurm's job id."""
    hosts = lab_state.hosts_of(paths.state_file)
    cmd = sbatch_command(account=account, user=user, gpus=gpus, seconds=seconds, node=node, hosts=hosts)
    cp = ssh(paths, _controller_ip(), cmd, timeout=60)
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[-1]
        raise LabError("sbatch", why)
    job_id = cp.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise LabError("sbatch", f"unexpected answer {cp.stdout.strip()!r}")
    job = Job(job_id, account, user, gpus, seconds, node)
    return placed(paths, job)


#: `scontrol show job -d` names each allocated node's GRES indices: ` Nodes=gpu01 ... GRES=gpu:2(IDX:0-1)`
_PLACED = re.compile(r"^\s*Nodes=(\S+)\s.*\bGRES=\S*?\(IDX:([0-9,-]+)\)", re.MULTILINE)
_STATE = re.compile(r"\bJobState=([A-Z_]+)")


def parse_placement(text: str) -> tuple[str, str, tuple[int, ...]]:
    """(state, node, GPU indices) from `scontrol show job -d` output; empty while it is not placed."""
    state = m.group(1) if (m := _STATE.search(text)) else ""
    m = _PLACED.search(text)
    if not m:
        return state, "", ()
    indices: list[int] = []
    for part in m.group(2).split(","):
        lo, _, hi = part.partition("-")
        indices.extend(range(int(lo), int(hi or lo) + 1))
    return state, m.group(1), tuple(indices)


def placed(paths: LabPaths, job: Job, *, wait: float = 15) -> Job:
    """JOB with the node and GPUs Slurm gave it, waiting up to WAIT seconds for it to start."""
    import dataclasses
    import time

    deadline = time.monotonic() + wait
    while True:
        cp = ssh(paths, _controller_ip(), f"scontrol show job -d {job.job_id}", timeout=30)
        state, node, indices = parse_placement(cp.stdout) if cp.returncode == 0 else ("", "", ())
        if node or state not in {"", "PENDING", "CONFIGURING"} or time.monotonic() > deadline:
            return dataclasses.replace(job, state=state, ran_on=node, gpu_indices=indices)
        time.sleep(1)


def cancel(paths: LabPaths, job_ids: list[str]) -> None:
    """scancel the given jobs (ids checked); already finished jobs are fine."""
    ids = [j for j in job_ids if re.match(r"^[0-9]+(_[0-9]+)?$", j)]
    if len(ids) != len(job_ids):
        raise LabError(",".join(job_ids), "job ids must be numbers")
    if ids:
        ssh(paths, _controller_ip(), "scancel " + " ".join(ids), timeout=60)
