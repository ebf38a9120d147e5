"""Slurm's accounting in the lab: slurmdbd and MariaDB on the controller only, the database's
password kept to root and slurm, and no host listening for MariaDB on the network."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from vigil.installer.lab import prepare, slurm
from vigil.installer.lab.hosts import lab_hosts

HOSTS = lab_hosts(1)


def fake_root(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    (root / "etc").mkdir(parents=True)
    (root / "root").mkdir()
    uid, gid = os.getuid(), os.getgid()
    (root / "etc/passwd").write_text(
        f"root:x:0:0::/root:/bin/sh\nmunge:x:{uid}:{gid}::/:/bin/false\nslurm:x:{uid}:{gid}::/:/bin/false\n"
    )
    for unit in ("mariadb.service", "mariadb.socket", "slurmdbd.service", "slurmctld.service"):
        (root / "lib/systemd/system").mkdir(parents=True, exist_ok=True)
        (root / "lib/systemd/system" / unit).write_text("[Unit]\n")
    key = tmp_path / "hostkey"
    key.write_bytes(b"k")
    Path(f"{key}.pub").write_bytes(b"k.pub")
    host = next(h for h in HOSTS if h.name == name)
    prepare.prepare_host(
        root, host, admin_pubkey="ssh-ed25519 AAAA x", host_key=key, munge_key=b"m" * 32, hosts=HOSTS
    )
    return root


def masked(root: Path, unit: str) -> bool:
    link = root / "etc/systemd/system" / unit
    return link.is_symlink() and os.readlink(link) == "/dev/null"


def enabled(root: Path, unit: str) -> bool:
    return (root / "etc/systemd/system/multi-user.target.wants" / unit).is_symlink()


def test_the_controller_runs_slurmdbd_on_a_socket_only_mariadb(tmp_path: Path) -> None:
    root = fake_root(tmp_path, "ctl01")
    for unit in ("mariadb.service", slurm.DB_UNIT, "slurmdbd.service", "slurmctld.service"):
        assert enabled(root, unit), unit
    assert masked(root, "mariadb.socket")  # it would listen on port 3306
    assert "skip-networking" in (root / "etc/mysql/mariadb.conf.d/60-vigil-lab.cnf").read_text()
    conf = root / "etc/slurm/slurmdbd.conf"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    sql = root / slurm.DB_SQL
    assert stat.S_IMODE(sql.stat().st_mode) == 0o600
    password = next(x.split("=", 1)[1] for x in conf.read_text().splitlines() if x.startswith("StoragePass="))
    assert len(password) == 32 and password in sql.read_text()
    assert "AccountingStorageType=accounting_storage/slurmdbd" in (root / "etc/slurm/slurm.conf").read_text()
    assert "AccountingStorageTRES=gres/gpu" in (root / "etc/slurm/slurm.conf").read_text()
    dropin = (root / "etc/systemd/system/slurmctld.service.d/10-vigil-lab-dbd.conf").read_text()
    assert "ExecStartPre=" in dropin and "/6819" in dropin and "$$(seq" in dropin


def test_a_second_lab_gets_another_password(tmp_path: Path) -> None:
    a = (fake_root(tmp_path / "a", "ctl01") / slurm.DB_SQL).read_text()
    b = (fake_root(tmp_path / "b", "ctl01") / slurm.DB_SQL).read_text()
    assert a != b


@pytest.mark.parametrize("name", ["mon01", "gpu01"])
def test_other_hosts_run_neither(tmp_path: Path, name: str) -> None:
    root = fake_root(tmp_path, name)
    for unit in ("mariadb.service", "mariadb.socket", "slurmdbd.service"):
        assert masked(root, unit), unit
    assert not (root / "etc/slurm/slurmdbd.conf").exists()
    assert not (root / slurm.DB_SQL).exists()
