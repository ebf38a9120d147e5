"""Take the listed members out of an archive, and nothing else.

Members are read as a stream (``tarfile`` mode ``r|*``, or a zip's central directory) and only
regular files named by the component's ``files`` map are written. A hostile archive is refused:
absolute names, ``..`` components, and, where selected, links, devices and fifos.
"""

from __future__ import annotations

import fnmatch
import hashlib
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from vigil.basics.atomic import atomic_writer
from vigil.bundle.errors import FetchError

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".tar", ".zip")


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


@dataclass(frozen=True)
class Extracted:
    target: str  # payload path relative to the component
    path: Path
    size: int
    sha256: str
    executable: bool


class Selector:
    """Maps member names to payload paths by the ``files`` rules (exact, ``dir/`` subtree, glob)."""

    def __init__(self, files: dict[str, str], *, obj: str) -> None:
        self.files = files
        self.obj = obj
        self.used: set[str] = set()
        self.targets: dict[str, str] = {}

    def target(self, member: str) -> str | None:
        for key, dest in self.files.items():
            out: str | None = None
            if key.endswith("/"):
                if member.startswith(key) and len(member) > len(key):
                    out = dest + member[len(key) :]
            elif any(c in key for c in "*?["):
                if fnmatch.fnmatchcase(member, key):
                    out = dest + member.rsplit("/", 1)[-1]
            elif member == key:
                out = dest
            if out is not None:
                self.used.add(key)
                if out in self.targets and self.targets[out] != member:
                    raise FetchError(
                        self.obj, f"members {self.targets[out]!r} and {member!r} both map to {out!r}"
                    )
                self.targets[out] = member
                return out
        return None

    def finish(self) -> None:
        missing = sorted(set(self.files) - self.used)
        if missing:
            raise FetchError(self.obj, f"no member {missing[0]!r} in the source")


def normalize(name: str, *, obj: str) -> str:
    """A member name without a leading ``./``; refuses absolute names and ``..``."""
    if name.startswith("/") or "\\" in name:
        raise FetchError(obj, f"refusing member {name!r}: absolute path")
    parts = [p for p in PurePosixPath(name).parts if p != "."]
    if ".." in parts:
        raise FetchError(obj, f"refusing member {name!r}: '..' in path")
    return "/".join(parts)


def _write(stream: IO[bytes], dest: Path, *, executable: bool, limit: int) -> tuple[int, str]:
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    with atomic_writer(dest, mode=0o755 if executable else 0o644, fsync=False) as out:
        while chunk := stream.read(1 << 20):
            size += len(chunk)
            if size > limit:
                raise OSError(f"member longer than its header says ({limit} bytes)")
            h.update(chunk)
            out.write(chunk)
    return size, h.hexdigest()


def _from_tar(tar: tarfile.TarFile, files: dict[str, str], out_dir: Path, *, obj: str) -> Iterator[Extracted]:
    sel = Selector(files, obj=obj)
    for member in tar:
        name = normalize(member.name, obj=obj)
        if not name:
            continue
        target = sel.target(name)
        if target is None:
            continue
        if member.isdir():
            sel.targets.pop(target, None)
            continue
        if member.issym() or member.islnk():
            raise FetchError(obj, f"refusing member {name!r}: it is a link (to {member.linkname!r})")
        if not member.isreg():
            raise FetchError(obj, f"refusing member {name!r}: not a regular file")
        stream = tar.extractfile(member)
        if stream is None:
            raise FetchError(obj, f"cannot read member {name!r}")
        exe = bool(member.mode & 0o111)
        size, sha = _write(stream, out_dir / target, executable=exe, limit=member.size)
        yield Extracted(target=target, path=out_dir / target, size=size, sha256=sha, executable=exe)
    sel.finish()


def extract_tar_stream(
    stream: IO[bytes], files: dict[str, str], out_dir: Path, *, obj: str
) -> list[Extracted]:
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            return list(_from_tar(tar, files, out_dir, obj=obj))
    except tarfile.TarError as e:
        raise FetchError(obj, f"not a readable tar archive: {e}") from None


def extract_archive(
    archive: Path, filename: str, files: dict[str, str], out_dir: Path, *, obj: str
) -> list[Extracted]:
    """Extract the ``files`` members of a tar or zip archive into ``out_dir``."""
    if filename.lower().endswith(".zip"):
        return _extract_zip(archive, files, out_dir, obj=obj)
    if filename.lower().endswith(".tar.zst"):
        proc = subprocess.Popen(["zstd", "-dc", str(archive)], stdout=subprocess.PIPE)
        assert proc.stdout is not None  # noqa: S101 - narrows the type
        try:
            return extract_tar_stream(proc.stdout, files, out_dir, obj=obj)
        finally:
            proc.stdout.close()
            proc.wait()
    with open(archive, "rb") as f:
        return extract_tar_stream(f, files, out_dir, obj=obj)


def _extract_zip(archive: Path, files: dict[str, str], out_dir: Path, *, obj: str) -> list[Extracted]:
    sel = Selector(files, obj=obj)
    out = []
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = normalize(info.filename, obj=obj)
                target = sel.target(name) if name else None
                if target is None:
                    continue
                if info.is_dir():
                    sel.targets.pop(target, None)
                    continue
                unix_mode = info.external_attr >> 16
                if (unix_mode & 0o170000) not in (0, 0o100000):
                    raise FetchError(obj, f"refusing member {name!r}: not a regular file")
                exe = bool(unix_mode & 0o111)
                with zf.open(info) as stream:
                    size, sha = _write(stream, out_dir / target, executable=exe, limit=info.file_size)
                out.append(
                    Extracted(target=target, path=out_dir / target, size=size, sha256=sha, executable=exe)
                )
    except zipfile.BadZipFile as e:
        raise FetchError(obj, f"not a readable zip archive: {e}") from None
    sel.finish()
    return out


def extract_deb(deb: Path, files: dict[str, str], out_dir: Path, *, obj: str) -> list[Extracted]:
    """Extract the ``files`` members of a .deb's data archive (``dpkg-deb --fsys-tarfile``)."""
    try:
        proc = subprocess.Popen(
            ["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except FileNotFoundError:
        raise FetchError(obj, "dpkg-deb is not installed") from None
    assert proc.stdout is not None and proc.stderr is not None  # noqa: S101 - narrows the type
    try:
        result = extract_tar_stream(proc.stdout, files, out_dir, obj=obj)
        proc.stdout.read()  # drain, so dpkg-deb exits cleanly
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        proc.stderr.close()
        rc = proc.wait()
    if rc != 0:
        raise FetchError(obj, f"dpkg-deb --fsys-tarfile failed: {err.splitlines()[-1] if err else rc}")
    return result
