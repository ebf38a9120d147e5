"""The lab's keys: the admin SSH key, each host's SSH host key, known_hosts, the munge key."""

from __future__ import annotations

import os
from pathlib import Path

from vigil.installer.lab import _files
from vigil.installer.lab._proc import run
from vigil.installer.lab.hosts import Host
from vigil.installer.lab.paths import LabPaths


def ensure_admin_key(paths: LabPaths) -> Path:
    """The lab's SSH key pair (ed25519), generated once and kept by `lab down`."""
    key = paths.ssh_key
    if not (key.is_file() and key.with_suffix(".pub").is_file()):
        paths.lab_dir.mkdir(parents=True, exist_ok=True)
        for p in (key, key.with_suffix(".pub")):
            p.unlink(missing_ok=True)
        run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vigil-lab-admin", "-f", str(key)],
            obj=str(key),
        )
    os.chmod(key, 0o600)
    return key


def new_host_key(paths: LabPaths, host: Host) -> str:
    """Generate HOST's SSH host key before it boots; returns the public key line."""
    key = paths.host_key(host.name)
    key.parent.mkdir(parents=True, exist_ok=True)
    for p in (key, Path(f"{key}.pub")):
        p.unlink(missing_ok=True)
    run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host.name}", "-f", str(key)],
        obj=str(key),
    )
    return Path(f"{key}.pub").read_text().strip()


def write_known_hosts(paths: LabPaths, host_keys: dict[Host, str]) -> Path:
    """known_hosts naming each host by address and by name, for StrictHostKeyChecking=yes."""
    lines = []
    for host, pub in sorted(host_keys.items(), key=lambda kv: kv[0].ip):
        keytype, blob = pub.split()[:2]
        lines.append(f"{host.ip},{host.name} {keytype} {blob}")
    _files.write(paths.known_hosts, "\n".join(lines) + "\n", mode=0o644)
    return paths.known_hosts


def ensure_munge_key(paths: LabPaths) -> bytes:
    """One munge key shared by every Slurm host of the lab."""
    if not paths.munge_key.is_file() or paths.munge_key.stat().st_size < 32:
        _files.write(paths.munge_key, os.urandom(1024), mode=0o600)
    return paths.munge_key.read_bytes()
