"""Writing into a host's root file system from the admin host (no chroot, no running systemd)."""

from __future__ import annotations

from pathlib import Path

from vigil.basics.atomic import write_file_atomic


def write(
    path: Path, content: str | bytes, *, mode: int = 0o644, owner: tuple[int, int] | None = None
) -> None:
    """Write a file into a host's root file system (which the host's root controls: no predictable
    temporary name is used, so a link planted there is never followed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    write_file_atomic(path, data, mode=mode, owner=owner, fsync=False)


def _symlink(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def unit_path(root: Path, unit: str) -> str:
    for base in ("etc/systemd/system", "lib/systemd/system", "usr/lib/systemd/system"):
        if (root / base / unit).exists():
            return "/" + base + "/" + unit
    return "/lib/systemd/system/" + unit


def enable_unit(root: Path, unit: str, target: str) -> None:
    """What `systemctl enable` does for UNIT wanted by TARGET."""
    _symlink(root / "etc/systemd/system" / f"{target}.wants" / unit, unit_path(root, unit))


def disable_unit(root: Path, unit: str) -> None:
    """Remove every `*.wants/UNIT` link (what `systemctl disable` does for [Install] links)."""
    for link in (root / "etc/systemd/system").glob(f"*.wants/{unit}"):
        link.unlink()


def mask_unit(root: Path, unit: str) -> None:
    disable_unit(root, unit)
    _symlink(root / "etc/systemd/system" / unit, "/dev/null")


def ids(root: Path, user: str) -> tuple[int, int]:
    """uid and gid of USER in the host's own /etc/passwd (not the admin host's)."""
    for line in (root / "etc/passwd").read_text().splitlines():
        f = line.split(":")
        if f[0] == user:
            return int(f[2]), int(f[3])
    raise KeyError(user)
