"""The lab's Slurm cluster: controller on ctl01, slurmd with simulated GPUs on the GPU nodes.

A real site already runs Slurm; vigil wires into it. The lab therefore sets Slurm up itself, the way
a site would, and the roles only add to it. Accounting is off (no slurmdbd): Slurm 22.05 still takes
`--account` and records it in the job (`SLURM_JOB_ACCOUNT`), which is what the job map and the
reports need.
"""

from __future__ import annotations

from vigil.installer.lab.hosts import GPUS_PER_NODE, HOSTS, Host

CLUSTER_NAME = "vigil-lab"
PARTITION = "gpu"
#: CPUs each GPU node offers to Slurm (SlurmdParameters=config_overrides lets a small machine host it)
CPUS_PER_NODE = 8
GPU_UNIT = "vigil-lab-gpus.service"


def slurm_conf(hosts: tuple[Host, ...] = HOSTS) -> str:
    ctl = next(h for h in hosts if h.slurm_controller)
    nodes = [h for h in hosts if h.gpu_node]
    lines = [
        "# vigil lab: written by `vigil lab up`",
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={ctl.name}({ctl.ip})",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "MpiDefault=none",
        # the containers share the admin host's cgroup v1 hierarchy read-only: track by process tree
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "MinJobAge=300",
        "MaxJobCount=50000",
        "KillWait=10",
        "Waittime=0",
    ]
    for n in nodes:
        lines.append(
            f"NodeName={n.name} NodeAddr={n.ip} CPUs={CPUS_PER_NODE} Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        )
    lines.append(
        f"PartitionName={PARTITION} Nodes={','.join(n.name for n in nodes)} "
        "Default=YES MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"


def gres_conf() -> str:
    last = GPUS_PER_NODE - 1
    return f"# vigil lab: simulated GPUs\nName=gpu File=/dev/nvidia[0-{last}]\n"


def gpu_unit() -> str:
    """A oneshot that makes the simulated GPUs' device nodes before slurmd looks for them."""
    mk = "; ".join(
        f"[ -e /dev/nvidia{i} ] || mknod -m 666 /dev/nvidia{i} c 195 {i}" for i in range(GPUS_PER_NODE)
    )
    return (
        "[Unit]\n"
        "Description=vigil lab: simulated GPU device nodes /dev/nvidia*\n"
        "DefaultDependencies=no\n"
        "Before=slurmd.service\n"
        "After=systemd-tmpfiles-setup-dev.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart=/bin/sh -c '{mk}'\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def slurmd_dropin() -> str:
    return f"[Unit]\nWants={GPU_UNIT}\nAfter={GPU_UNIT}\n"
