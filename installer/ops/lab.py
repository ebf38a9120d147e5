"""The lab: real systemd hosts with Slurm and simulated GPUs, for training and tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vigil.installer import lab
from vigil.installer.lab.faults import FaultResult, check_fault, inject
from vigil.installer.lab.jobs import Job, submit
from vigil.installer.lab.state import hosts_of
from vigil.installer.ops._invocation import Invocation


def lab_up(
    inv: Invocation,
    *,
    inventory_dir: Path,
    mirror: str | None = None,
    gpu_nodes: int | None = None,
    monitoring_hosts: int | None = None,
) -> lab.UpResult:
    """``lab.up``: build the root file system once, boot every host, write the inventory."""
    inv.object = "lab"
    res = lab.up(
        inventory_dir=inventory_dir,
        mirror=mirror,
        gpu_nodes=gpu_nodes,
        monitoring_hosts=monitoring_hosts,
        log=inv.step,
    )
    inv.details.update(
        inventory=str(res.inventory),
        cache=str(res.cache_rootfs),
        cache_built=res.cache_built,
        started=[h.name for h in res.hosts if h.started_now],
        seconds=round(res.seconds, 1),
        gpu_nodes=len(res.slurm_nodes),
        monitoring_hosts=sum(1 for h in res.hosts if h.name.startswith("mon")),
        hosts={h.name: {"pid": h.pid, "system": h.system} for h in res.hosts},
    )
    return res


def lab_down(inv: Invocation) -> dict[str, str]:
    """``lab.down``: stop every host the lab started; keep the cached root file system."""
    inv.object = "lab"
    outcome = lab.down(log=inv.step)
    inv.details.update(hosts=outcome)
    return outcome


def lab_status(inv: Invocation) -> tuple[dict[str, Any], bool]:
    """``lab.status``: each host's state, and whether every host runs and is ``running``."""
    inv.object = "lab"
    st = lab.status()
    healthy = all(h["running"] and h["system"] == "running" for h in st["hosts"])
    inv.details.update(hosts={h["name"]: h["system"] for h in st["hosts"]}, healthy=healthy)
    return st, healthy


def lab_job(
    inv: Invocation, *, account: str, user: str, gpus: int, seconds: int, node: str | None = None
) -> Job:
    """``lab.job``: a Slurm batch job holding GPUS GPUs for SECONDS under ACCOUNT, as USER."""
    inv.object = f"lab/job/{account}"
    inv.details.update(account=account, user=user, gpus=gpus, seconds=seconds, node=node)
    job = submit(lab.LabPaths.from_env(), account=account, user=user, gpus=gpus, seconds=seconds, node=node)
    inv.object = f"lab/job/{job.job_id}"
    inv.details.update(job_id=job.job_id)
    return job


def lab_fault(
    inv: Invocation,
    kind: str,
    host: str,
    gpu: str | None,
    *,
    clear: bool = False,
    code: int | None = None,
    rate: float | None = None,
    ramp: float | None = None,
    kill_job: bool = False,
) -> FaultResult:
    """``lab.fault``: inject (or clear) a simulated GPU or BMC fault, or a node-down; with KILL_JOB,
    the job on that GPU then loses its program as the failure would kill it."""
    where = f"{host}/{gpu}" if gpu is not None else host
    inv.object = f"lab/fault/{kind}/{where}"
    inv.details.update(kind=kind, host=host, gpu=gpu, clear=clear, code=code)
    hosts = hosts_of(lab.LabPaths.from_env().state_file)
    # before the record
    check_fault(kind, host, gpu, clear=clear, code=code, rate=rate, ramp=ramp, kill_job=kill_job, hosts=hosts)
    inv.details.update(rate=rate, ramp=ramp, kill_job=kill_job)
    res = inject(
        lab.LabPaths.from_env(),
        kind,
        host,
        gpu,
        clear=clear,
        code=code,
        rate=rate,
        ramp=ramp,
        kill_job=kill_job,
    )
    inv.details.update(state=res.state, killed_jobs=list(res.killed_jobs))
    return res
