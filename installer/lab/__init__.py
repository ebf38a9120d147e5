"""The lab: real systemd hosts in systemd-nspawn containers on 198.18.0.0/24, air-gapped by construction.

`up()` debootstraps Debian 12 once into a cache, gives each host its own root fs, boots it with
systemd as PID 1, waits for sshd, systemd and Slurm, and writes the Ansible inventory; `down()` stops
what `up()` started, by its recorded PIDs; `status()` reports.
"""

from __future__ import annotations

from vigil.installer.lab.control import HostReport, UpResult, down, slurm_nodes, status, up
from vigil.installer.lab.errors import LabError, LabPrerequisiteMissing, LabRequestRefused
from vigil.installer.lab.hosts import ACCOUNTS, ADMIN_IP, BRIDGE, HOSTS, SUBNET, USERS, Host, host_by_name
from vigil.installer.lab.paths import LabPaths
from vigil.installer.lab.ssh import ssh, ssh_argv

__all__ = [
    "ACCOUNTS",
    "ADMIN_IP",
    "BRIDGE",
    "HOSTS",
    "SUBNET",
    "USERS",
    "Host",
    "HostReport",
    "LabError",
    "LabPaths",
    "LabPrerequisiteMissing",
    "LabRequestRefused",
    "UpResult",
    "down",
    "host_by_name",
    "slurm_nodes",
    "ssh",
    "ssh_argv",
    "status",
    "up",
]
