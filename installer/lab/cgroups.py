"""A cgroup of its own for each lab container.

Started with `--keep-unit` and no systemd on the admin host, systemd-nspawn leaves the container in
the cgroup of whoever started it, and every such container's systemd then manages the same
`payload/system.slice/...` groups: one container's `systemctl stop` or failed unit set-up can touch
another's (seen here as `status=219/CGROUP` at boot). The lab therefore moves each systemd-nspawn
process, before it starts the container, into `vigil-lab-<host>` below its current group in the
hierarchies systemd uses (the named `systemd` v1 hierarchy and the unified v2 one). Resource
controllers (memory, cpu, ...) are not touched: the containers stay accounted where their starter is.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


def _hierarchies() -> list[tuple[Path, str]]:
    """(mount point, key in /proc/self/cgroup) for the systemd v1 hierarchy and cgroup2, if mounted."""
    found: list[tuple[Path, str]] = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        mnt, fstype, opts = parts[1], parts[2], parts[3].split(",")
        if fstype == "cgroup" and "name=systemd" in opts:
            found.append((Path(mnt), "name=systemd"))
        elif fstype == "cgroup2":
            found.append((Path(mnt), ""))
    return found


def _current(key: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == key:
            return path
    return "/"


def create(host: str) -> list[str]:
    """Make the host's groups; returns their directories (recorded, to remove them after `down`)."""
    dirs: list[str] = []
    for mnt, key in _hierarchies():
        d = mnt / _current(key).lstrip("/") / f"vigil-lab-{host}"
        try:
            d.mkdir(exist_ok=True)
        except OSError:
            continue  # read-only or not delegated to us: leave that hierarchy as it is
        dirs.append(str(d))
    return dirs


def remove(dirs: list[str]) -> None:
    """Remove the host's (empty) groups, deepest first; a group still in use is left."""
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            continue
        subdirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for p in [*subdirs, root]:
            with contextlib.suppress(OSError):
                p.rmdir()
