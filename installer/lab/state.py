"""The lab's state file: which containers the lab started (PID and start time) and where things are."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vigil.basics.atomic import write_file_atomic
from vigil.installer.lab.errors import LabError
from vigil.installer.lab.hosts import DEFAULT_GPU_NODES, DEFAULT_MONITORING_HOSTS, Host, lab_hosts

FORMAT = 1


@dataclass
class HostState:
    name: str
    ip: str
    pid: int
    starttime: int
    rootfs: str
    #: "overlay" (on the cached root fs) or "copy"
    mode: str
    console_log: str
    #: the container's own cgroups (see installer.lab.cgroups), removed after it stops
    cgroups: list[str] = field(default_factory=list)


@dataclass
class LabState:
    cache_rootfs: str = ""
    ssh_key: str = ""
    known_hosts: str = ""
    inventory: str = ""
    #: the lab's size: GPU nodes gpu01..gpuNN (`lab up --gpu-nodes N`)
    gpu_nodes: int = DEFAULT_GPU_NODES
    #: monitoring hosts mon01..monNN (`lab up --monitoring-hosts N`)
    monitoring_hosts: int = DEFAULT_MONITORING_HOSTS
    hosts: dict[str, HostState] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["format"] = FORMAT
        return d


def load(path: Path) -> LabState:
    if not path.exists():
        return LabState()
    try:
        raw = json.loads(path.read_text())
        hosts = {k: HostState(**v) for k, v in raw.get("hosts", {}).items()}
        return LabState(
            cache_rootfs=raw.get("cache_rootfs", ""),
            ssh_key=raw.get("ssh_key", ""),
            known_hosts=raw.get("known_hosts", ""),
            inventory=raw.get("inventory", ""),
            gpu_nodes=int(raw.get("gpu_nodes", DEFAULT_GPU_NODES)),
            monitoring_hosts=int(raw.get("monitoring_hosts", DEFAULT_MONITORING_HOSTS)),
            hosts=hosts,
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise LabError(
            str(path), f"unreadable lab state ({exc}); stop the containers it names by hand"
        ) from exc


def save(path: Path, state: LabState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(
        path, (json.dumps(state.to_json(), indent=2, sort_keys=True) + "\n").encode(), mode=0o600
    )


def hosts_of(path: Path) -> tuple[Host, ...]:
    """The hosts of the lab whose state file is PATH, at the size it was brought up with (the default
    size when there is none)."""
    st = load(path)
    return lab_hosts(st.gpu_nodes, st.monitoring_hosts)
