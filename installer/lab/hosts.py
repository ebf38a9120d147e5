"""The lab's hosts, their addresses and what each one runs."""

from __future__ import annotations

from dataclasses import dataclass

#: the lab's private network; nothing in the lab has a route anywhere else
SUBNET = "198.18.0.0/24"
PREFIX_LEN = 24
ADMIN_IP = "198.18.0.1"
BRIDGE = "vigil0"
#: simulated GPUs per GPU node (device nodes /dev/nvidia0..N-1, gres gpu:N)
GPUS_PER_NODE = 4


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    #: inventory groups the host belongs to
    groups: tuple[str, ...]

    @property
    def slurm_controller(self) -> bool:
        return "slurm_controller" in self.groups

    @property
    def gpu_node(self) -> bool:
        return "gpu_nodes" in self.groups

    @property
    def slurm(self) -> bool:
        """Whether the host runs munge and a Slurm daemon."""
        return self.slurm_controller or self.gpu_node


#: GPU nodes `vigil lab up` starts unless told (`--gpu-nodes N`); tests use this size unless they are
#: about scale
DEFAULT_GPU_NODES = 2
#: names keep two digits (gpu01..gpu99); GPU node K has the address 198.18.0.(20+K)
MAX_GPU_NODES = 99


#: monitoring hosts `vigil lab up` starts unless told (`--monitoring-hosts N`): one, today's layout
DEFAULT_MONITORING_HOSTS = 1
#: mon01 has 198.18.0.10, the controller .11; monitoring host K >= 2 has 198.18.0.(10+K), below the
#: GPU nodes' .21
MAX_MONITORING_HOSTS = 9


def _gpu_node(k: int) -> Host:
    return Host(f"gpu{k:02d}", f"198.18.0.{20 + k}", ("gpu_nodes",))


def _monitoring_host(k: int) -> Host:
    return Host(f"mon{k:02d}", f"198.18.0.{10 if k == 1 else 10 + k}", ("monitoring",))


def lab_hosts(
    gpu_nodes: int = DEFAULT_GPU_NODES, monitoring_hosts: int = DEFAULT_MONITORING_HOSTS
) -> tuple[Host, ...]:
    """The lab's hosts with MONITORING_HOSTS monitoring hosts mon01..monNN and GPU_NODES GPU nodes
    gpu01..gpuNN."""
    from vigil.installer.lab.errors import LabError

    if not 1 <= gpu_nodes <= MAX_GPU_NODES:
        raise LabError(f"--gpu-nodes {gpu_nodes}", f"must be 1..{MAX_GPU_NODES}")
    if not 1 <= monitoring_hosts <= MAX_MONITORING_HOSTS:
        raise LabError(f"--monitoring-hosts {monitoring_hosts}", f"must be 1..{MAX_MONITORING_HOSTS}")
    return (
        _monitoring_host(1),
        Host("ctl01", "198.18.0.11", ("slurm_controller",)),
        *(_monitoring_host(k) for k in range(2, monitoring_hosts + 1)),
        *(_gpu_node(k) for k in range(1, gpu_nodes + 1)),
    )


#: the lab at its default size
HOSTS: tuple[Host, ...] = lab_hosts()

#: inventory groups in the order hosts.yml lists them
GROUPS: tuple[str, ...] = ("monitoring", "slurm_controller", "gpu_nodes")

#: Slurm accounts jobs in the lab are submitted under (`sbatch -A ...`)
ACCOUNTS: tuple[str, ...] = ("physics", "chemistry")

#: unprivileged users present on every lab host (same uid everywhere) for jobs with `--uid`/`su`
USERS: tuple[tuple[str, int], ...] = (("alice", 2001), ("bob", 2002))


def host_by_name(name: str, hosts: tuple[Host, ...] = HOSTS) -> Host:
    """The host called NAME among HOSTS (default: the lab at its default size)."""
    for h in hosts:
        if h.name == name:
            return h
    from vigil.installer.lab.errors import LabError

    raise LabError(name, f"no such lab host (hosts: {', '.join(h.name for h in hosts)})")
