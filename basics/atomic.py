"""Stage, then rename: files are never seen half-written, and a failure leaves nothing behind.

Every file vigil writes goes through here. The temporary file is created beside its target with
``mkstemp`` (``O_CREAT|O_EXCL``, a random name, mode 0600 until the content is complete), so a link
planted under a predictable name is never followed, and the rename is atomic on the target's own
file system.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20


@contextmanager
def atomic_writer(
    path: Path, *, mode: int = 0o644, owner: tuple[int, int] | None = None, fsync: bool = True
) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into.

    On a clean exit the file gets ``mode`` (and ``owner``, a ``(uid, gid)``), is flushed (and, with
    ``fsync``, synced with its directory) and renamed over ``path``. On an exception it is removed
    and ``path`` is as it was.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fchmod(out.fileno(), mode)
            if owner is not None:
                os.fchown(out.fileno(), *owner)
            if fsync:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def write_file_atomic(
    path: Path, data: bytes, *, mode: int = 0o644, owner: tuple[int, int] | None = None, fsync: bool = True
) -> None:
    """Write ``data`` to a temporary file beside ``path``, sync it, then rename it into place."""
    with atomic_writer(path, mode=mode, owner=owner, fsync=fsync) as out:
        out.write(data)


def copy_file_atomic(src: Path, dest: Path, *, mode: int = 0o644, fsync: bool = False) -> None:
    """Copy ``src`` to ``dest`` through a temporary file beside ``dest``, then rename."""
    with open(src, "rb") as inp, atomic_writer(dest, mode=mode, fsync=fsync) as out:
        shutil.copyfileobj(inp, out, CHUNK)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
