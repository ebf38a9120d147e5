"""The lab's Slurm cluster: controller on ctl01, slurmd with simulated GPUs on the GPU nodes.

A real site already runs Slurm; vigil wires into it. The lab therefore sets Slurm up itself, the way
a site would, and the roles only add to it. Slurm's own accounting runs on ctl01 as at most sites:
slurmdbd on Debian's MariaDB, GPUs counted (``AccountingStorageTRES=gres/gpu``), so that the usage
report's metered GPU-hours can be reconciled with the scheduler's (``sacct``). Associations are not
enforced: ``--account`` takes any name, as the job map and the reports' tests need.
"""

from __future__ import annotations

from vigil.installer.lab.hosts import GPUS_PER_NODE, HOSTS, Host

CLUSTER_NAME = "vigil-lab"
PARTITION = "gpu"
#: CPUs each GPU node offers to Slurm (SlurmdParameters=config_overrides lets a small machine host it)
CPUS_PER_NODE = 8
GPU_UNIT = "vigil-lab-gpus.service"
#: the oneshot on ctl01 that gives slurmdbd its MariaDB user before slurmdbd starts
DB_UNIT = "vigil-lab-slurmdb.service"
DB_SQL = "etc/vigil-lab/slurmdb.sql"
DB_NAME = "slurm_acct_db"


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
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={ctl.name}",
        "AccountingStorageTRES=gres/gpu",
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


def slurmdbd_conf(controller: Host, password: str) -> str:
    """slurmdbd on the controller, storing in the controller's MariaDB over its local socket."""
    return "\n".join(
        [
            "# vigil lab: written by `vigil lab up`",
            "AuthType=auth/munge",
            f"DbdHost={controller.name}",
            "SlurmUser=slurm",
            "LogFile=/var/log/slurm/slurmdbd.log",
            "PidFile=/run/slurmdbd.pid",
            "StorageType=accounting_storage/mysql",
            "StorageHost=localhost",
            f"StorageLoc={DB_NAME}",
            "StorageUser=slurm",
            f"StoragePass={password}",
            "",
        ]
    )


def db_sql(password: str) -> str:
    """MariaDB's user for slurmdbd, idempotent (the oneshot runs at every boot)."""
    return (
        f"CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '{password}';\n"
        f"ALTER USER 'slurm'@'localhost' IDENTIFIED BY '{password}';\n"
        f"GRANT ALL ON {DB_NAME}.* TO 'slurm'@'localhost';\n"
    )


def mariadb_cnf() -> str:
    """A small MariaDB on the socket only: the lab's controller is a container beside others."""
    return (
        "# vigil lab: slurmdbd's store; the local socket only\n"
        "[mariadbd]\n"
        "skip-networking\n"
        # what slurmdbd asks for (it warns below them); the pool fills only as the tables grow
        "innodb_buffer_pool_size=128M\n"
        "innodb_lock_wait_timeout=900\n"
        "innodb_log_file_size=32M\n"
        "performance_schema=OFF\n"
    )


def db_unit() -> str:
    """Root (MariaDB's unix_socket login) creates slurmdbd's user once MariaDB is up; then
    slurmdbd, then slurmctld, which registers the cluster."""
    return (
        "[Unit]\n"
        "Description=vigil lab: slurmdbd's MariaDB user\n"
        "Requires=mariadb.service\n"
        "After=mariadb.service\n"
        "Before=slurmdbd.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart=/bin/sh -c 'exec /usr/bin/mariadb < /{DB_SQL}'\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def slurmdbd_dropin() -> str:
    return f"[Unit]\nWants={DB_UNIT}\nAfter={DB_UNIT}\n"


def slurmctld_dropin() -> str:
    """slurmctld once slurmdbd answers: started without it and without state files, slurmctld stops
    ("we have no TRES from it"), and slurmdbd is "started" before it listens."""
    # ($$ is systemd's way of writing one $)
    wait = (
        "for i in $$(seq 120); do (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null && exit 0;"
        " sleep 0.5; done; exit 1"
    )
    return (
        "[Unit]\nWants=slurmdbd.service\nAfter=slurmdbd.service\n\n"
        f"[Service]\nExecStartPre=/bin/bash -c '{wait}'\nRestart=on-failure\nRestartSec=2s\n"
    )
