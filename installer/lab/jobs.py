"""GPU jobs in the lab: ``sbatch`` on the controller, as a lab user, under an account."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from vigil.installer.lab.errors import LabError, LabRequestRefused
from vigil.installer.lab.hosts import GPUS_PER_NODE, HOSTS, USERS, host_by_name
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

    def to_json(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "account": self.account,
            "user": self.user,
            "gpus": self.gpus,
            "seconds": self.seconds,
            "node": self.node,
        }


def _controller_ip() -> str:
    return next(h.ip for h in HOSTS if h.slurm_controller)


def sbatch_command(*, account: str, user: str, gpus: int, seconds: int, node: str | None) -> str:
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
            h = host_by_name(node)
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
    cmd = sbatch_command(account=account, user=user, gpus=gpus, seconds=seconds, node=node)
    cp = ssh(paths, _controller_ip(), cmd, timeout=60)
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[-1]
        raise LabError("sbatch", why)
    job_id = cp.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise LabError("sbatch", f"unexpected answer {cp.stdout.strip()!r}")
    return Job(job_id, account, user, gpus, seconds, node)


def cancel(paths: LabPaths, job_ids: list[str]) -> None:
    """scancel the given jobs (ids checked); already finished jobs are fine."""
    ids = [j for j in job_ids if re.match(r"^[0-9]+(_[0-9]+)?$", j)]
    if len(ids) != len(job_ids):
        raise LabError(",".join(job_ids), "job ids must be numbers")
    if ids:
        ssh(paths, _controller_ip(), "scancel " + " ".join(ids), timeout=60)
