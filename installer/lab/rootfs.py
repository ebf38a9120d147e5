"""The lab's Debian 12 root file system: debootstrapped once into a cache, then one copy per host.

The cache entry's name carries a hash of everything that goes into it (suite, package list, the
common set-up below), so a change to any of them builds a new entry and never alters one in use.
It is built in a temporary directory and renamed into place: a half-built root is never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from vigil.installer.lab import _files
from vigil.installer.lab._proc import run
from vigil.installer.lab.errors import LabError
from vigil.installer.lab.hosts import USERS
from vigil.installer.lab.mirror import Mirror

SUITE = "bookworm"

#: what every lab host has: systemd as PID 1, sshd, python3 for Ansible's modules, iproute2 and procps
#: for the checks; Slurm and munge are installed everywhere and enabled only where a host runs them.
PACKAGES: tuple[str, ...] = (
    "dbus",
    "iproute2",
    "mariadb-server",
    "munge",
    "openssh-server",
    "procps",
    "python3",
    "slurm-wlm",
    "slurmdbd",
    "systemd",
    "systemd-sysv",
)

#: bump when the common set-up in `_finish` changes, so a new cache entry is built
SETUP_REVISION = "1"

#: timers and units that have no business running on an air-gapped lab host
MASKED_UNITS: tuple[str, ...] = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "getty@tty1.service",
    "systemd-pstore.service",
)


def cache_key(packages: tuple[str, ...] = PACKAGES) -> str:
    h = hashlib.sha256()
    h.update(f"suite={SUITE}\nsetup={SETUP_REVISION}\n".encode())
    for p in sorted(packages):
        h.update(p.encode() + b"\n")
    return h.hexdigest()[:16]


def cached_rootfs(cache_dir: Path, packages: tuple[str, ...] = PACKAGES) -> Path:
    return cache_dir / f"rootfs-{cache_key(packages)}"


def ensure_rootfs(
    cache_dir: Path,
    mirror: Mirror,
    *,
    packages: tuple[str, ...] = PACKAGES,
    log: Callable[[str], None] = lambda _m: None,
) -> tuple[Path, bool]:
    """Return (path of the cached root fs, whether it was built now)."""
    final = cached_rootfs(cache_dir, packages)
    if (final / "etc" / "os-release").is_file():
        return final, False
    cache_dir.mkdir(parents=True, exist_ok=True)
    # 1. leftovers of an interrupted build are removed, never used
    for stale in cache_dir.glob(f"{final.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = cache_dir / f"{final.name}.tmp-{os.getpid()}"
    log(f"debootstrap {SUITE} from {mirror.uri} into the cache (once; about a minute)")
    t0 = time.monotonic()
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}"]
    if mirror.keyring:
        argv.append(f"--keyring={mirror.keyring}")
    argv += [SUITE, str(tmp), mirror.uri]
    try:
        # 2. debootstrap checks the Release file against the keyring before it uses a package
        run(argv, obj=f"debootstrap {SUITE}", timeout=1800)
        # 3. the set-up every host shares
        _finish(tmp)
        # 4. only a complete root is renamed into place
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"root file system cached in {time.monotonic() - t0:.0f}s: {final}")
    return final, True


def _finish(root: Path) -> None:
    """Set-up common to every host, done once in the cache."""
    # downloaded packages are not needed on hosts that never reach a mirror
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    # each host gets its own ssh host key and machine id when it is prepared
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    _files.write(root / "etc/machine-id", "")
    # no name servers: nothing outside the lab is there to ask
    resolv = root / "etc/resolv.conf"
    if resolv.is_symlink() or resolv.exists():
        resolv.unlink()
    _files.write(resolv, "# vigil lab: no name servers; lab hosts are named in /etc/hosts\n")
    _files.enable_unit(root, "systemd-networkd.service", "multi-user.target")
    _files.enable_unit(root, "systemd-networkd.socket", "sockets.target")
    for unit in MASKED_UNITS:
        _files.mask_unit(root, unit)
    # ssh: the per-host ed25519 host key only, keys only for root
    _files.write(
        root / "etc/ssh/sshd_config.d/10-vigil-lab.conf",
        "HostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nUseDNS no\n",
    )
    # users that submit jobs in the lab, with the same uid on every host
    for name, uid in USERS:
        subprocess.run(
            [
                "chroot",
                str(root),
                "useradd",
                "--create-home",
                "--uid",
                str(uid),
                "--user-group",
                "--shell",
                "/bin/bash",
                name,
            ],
            check=True,
            capture_output=True,
        )
    # (alternatives links are absolute: look at the link itself, never through it on this machine)
    if not os.path.lexists(root / "usr/sbin/slurmd"):
        raise LabError(str(root), "debootstrap finished without slurmd; the package list is incomplete")


def provision(cache_root: Path, host_dir: Path, rootfs: Path) -> str:
    """Give a host its own root fs at ROOTFS: an overlay on the cache if the kernel allows, else a copy.

    Returns the mode used ("overlay" or "copy").
    """
    host_dir.mkdir(parents=True, exist_ok=True)
    upper, work = host_dir / "upper", host_dir / "work"
    for d in (upper, work, rootfs):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir()
    opts = f"lowerdir={cache_root},upperdir={upper},workdir={work}"
    cp = subprocess.run(
        ["mount", "-t", "overlay", "vigil-lab", "-o", opts, str(rootfs)],
        check=False,
        capture_output=True,
        text=True,
    )
    if cp.returncode == 0:
        return "overlay"
    shutil.rmtree(upper)
    shutil.rmtree(work)
    rootfs.rmdir()
    tmp = host_dir / "rootfs.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    run(["cp", "-a", "--reflink=auto", str(cache_root), str(tmp)], obj=str(rootfs), timeout=900)
    os.rename(tmp, rootfs)
    return "copy"


def release(host_dir: Path, rootfs: Path) -> None:
    """Unmount (if an overlay) and remove a host's root fs; the cache is left alone."""
    if os.path.ismount(rootfs):
        run(["umount", str(rootfs)], obj=str(rootfs), timeout=60, check=False)
        if os.path.ismount(rootfs):
            run(["umount", "--lazy", str(rootfs)], obj=str(rootfs), timeout=60)
    if os.path.ismount(rootfs):
        raise LabError(str(rootfs), "still mounted; not removing it")
    shutil.rmtree(host_dir, ignore_errors=True)
