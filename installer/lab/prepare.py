"""Turn a copy of the cached root fs into one particular lab host, before it boots."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

from vigil.installer.lab import _files, slurm
from vigil.installer.lab.hosts import ADMIN_IP, HOSTS, PREFIX_LEN, Host

#: sorts before the stock 80-container-host0.network (DHCP), so this one is used for host0
NETWORK_FILE = "etc/systemd/network/10-host0.network"
ADMIN_NAME = "admin"


def etc_hosts(hosts: tuple[Host, ...] = HOSTS) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{ADMIN_IP}\t{ADMIN_NAME}"]
    lines += [f"{h.ip}\t{h.name}" for h in hosts]
    return "\n".join(lines) + "\n"


def network_file(host: Host) -> str:
    # an address on the lab subnet and nothing else: no gateway, no DHCP, no IPv6 autoconfiguration
    return (
        "# vigil lab: the lab subnet only; no route anywhere else\n"
        "[Match]\nName=host0\n\n"
        f"[Network]\nAddress={host.ip}/{PREFIX_LEN}\n"
        "DHCP=no\nLinkLocalAddressing=no\nIPv6AcceptRA=no\nLLMNR=no\nMulticastDNS=no\n"
    )


def prepare_host(
    root: Path,
    host: Host,
    *,
    admin_pubkey: str,
    host_key: Path,
    munge_key: bytes,
    hosts: tuple[Host, ...] = HOSTS,
) -> None:
    """Make ROOT into HOST, one of the lab's HOSTS."""
    # 1. identity
    _files.write(root / "etc/hostname", host.name + "\n")
    _files.write(root / "etc/machine-id", uuid.uuid4().hex + "\n", mode=0o444)
    _files.write(root / "etc/hosts", etc_hosts(hosts))
    # 2. network: the lab subnet only
    _files.write(root / NETWORK_FILE, network_file(host))
    # 3. ssh: the admin key for root, the host key made for this host
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    _files.write(root / "root/.ssh/authorized_keys", admin_pubkey.strip() + "\n", mode=0o600)
    _files.write(root / "etc/ssh/ssh_host_ed25519_key", host_key.read_bytes(), mode=0o600)
    _files.write(root / "etc/ssh/ssh_host_ed25519_key.pub", Path(f"{host_key}.pub").read_bytes())
    # 4. Slurm and munge where the host runs them, masked elsewhere; Slurm's accounting
    #    (slurmdbd and its MariaDB) on the controller only
    #    (MariaDB's socket unit would listen on port 3306 of every host: masked everywhere)
    _files.mask_unit(root, "mariadb.socket")
    if not host.slurm_controller:
        for unit in ("mariadb.service", "slurmdbd.service"):
            _files.mask_unit(root, unit)
    if not host.slurm:
        for unit in ("munge.service", "slurmctld.service", "slurmd.service"):
            _files.mask_unit(root, unit)
        return
    _files.write(root / "etc/munge/munge.key", munge_key, mode=0o400, owner=_files.ids(root, "munge"))
    _files.write(root / "etc/slurm/slurm.conf", slurm.slurm_conf(hosts))
    _files.write(root / "etc/slurm/gres.conf", slurm.gres_conf())
    _files.enable_unit(root, "munge.service", "multi-user.target")
    if host.slurm_controller:
        _accounting(root, host)
        _files.enable_unit(root, "slurmctld.service", "multi-user.target")
        _files.mask_unit(root, "slurmd.service")
    if host.gpu_node:
        _files.write(root / "etc/systemd/system" / slurm.GPU_UNIT, slurm.gpu_unit())
        _files.write(
            root / "etc/systemd/system/slurmd.service.d/10-vigil-lab-gpus.conf", slurm.slurmd_dropin()
        )
        _files.enable_unit(root, slurm.GPU_UNIT, "multi-user.target")
        _files.enable_unit(root, "slurmd.service", "multi-user.target")
        _files.mask_unit(root, "slurmctld.service")


def _accounting(root: Path, host: Host) -> None:
    """slurmdbd on MariaDB, with a password made for this lab (it never leaves the controller)."""
    password = secrets.token_hex(16)
    _files.write(root / slurm.DB_SQL, slurm.db_sql(password), mode=0o600)
    _files.write(root / "etc/mysql/mariadb.conf.d/60-vigil-lab.cnf", slurm.mariadb_cnf())
    _files.write(
        root / "etc/slurm/slurmdbd.conf",
        slurm.slurmdbd_conf(host, password),
        mode=0o600,
        owner=_files.ids(root, "slurm"),
    )
    units = root / "etc/systemd/system"
    _files.write(units / slurm.DB_UNIT, slurm.db_unit())
    _files.write(units / "slurmdbd.service.d/10-vigil-lab-db.conf", slurm.slurmdbd_dropin())
    _files.write(units / "slurmctld.service.d/10-vigil-lab-dbd.conf", slurm.slurmctld_dropin())
    for unit in ("mariadb.service", slurm.DB_UNIT, "slurmdbd.service"):
        _files.enable_unit(root, unit, "multi-user.target")
