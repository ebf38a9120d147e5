"""File handling for the audit directory: layout, lock, tail read, durable append.

Every write to the log or the checkpoints happens with an exclusive ``flock`` held on
``audit/.lock``, so concurrent vigil processes serialize their read-tail/append sequence.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from vigil.installer.audit.errors import AuditError

DIR_MODE = 0o750
LOG_MODE = 0o640
PRIVATE_KEY_MODE = 0o600
PUBLIC_KEY_MODE = 0o644
PIN_MODE = 0o644
#: mode of ``$VIGIL_HOME/trust/`` when the audit log creates it (as ``vigil trust install`` does)
TRUST_DIR_MODE = 0o755
#: the file that pins the audit key's id: in ``$VIGIL_HOME/trust/`` and in an exported copy
PIN_NAME = "audit-key-id"

_TAIL_CHUNK = 8192


@dataclass(frozen=True)
class AuditPaths:
    """Where the audit log lives under a vigil home."""

    dir: Path

    @classmethod
    def under(cls, home: Path) -> AuditPaths:
        return cls(Path(home) / "audit")

    @property
    def log(self) -> Path:
        return self.dir / "log.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.dir / "checkpoints.jsonl"

    @property
    def private_key(self) -> Path:
        return self.dir / "audit.key"

    @property
    def public_key(self) -> Path:
        return self.dir / "audit.pub"

    @property
    def lock(self) -> Path:
        return self.dir / ".lock"

    @property
    def pin(self) -> Path:
        """The audit key's id, pinned at first use outside the audit directory (``trust/audit-key-id``)."""
        return self.dir.parent / "trust" / PIN_NAME


def cannot(path: Path, what: str, exc: OSError) -> AuditError:
    reason = exc.strerror or exc.__class__.__name__
    return AuditError(f"{path}: cannot {what} ({reason})")


def ensure_dir(path: Path, mode: int = DIR_MODE) -> None:
    """Create ``path`` (and missing parents) with ``mode`` (0750); an existing one is left as it is."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
            os.chmod(d, mode)  # mkdir's mode is masked by the umask
        except FileExistsError:
            pass
        except OSError as exc:
            raise cannot(d, "create directory", exc) from None
    if not path.is_dir():
        raise AuditError(f"{path}: cannot write (not a directory)")


@contextmanager
def locked(paths: AuditPaths) -> Iterator[None]:
    """Hold the audit directory's exclusive lock for the duration of the block."""
    ensure_dir(paths.dir)
    try:
        fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, LOG_MODE)
    except OSError as exc:
        raise cannot(paths.lock, "open lock", exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def last_line(path: Path) -> bytes | None:
    """The last line of ``path`` (with its newline, if it has one), reading only the tail.

    ``None`` when the file is missing or empty.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise cannot(path, "read", exc) from None
    with f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return None
        # read backwards a block at a time, looking for a newline only in the block just read,
        # and join the blocks once: linear in the line's length, however long the line is
        blocks: list[bytes] = []
        pos = end
        while pos > 0:
            step = min(_TAIL_CHUNK, pos)
            pos -= step
            f.seek(pos)
            block = f.read(step)
            # the file's own final newline ends the last line; it does not start it
            search_end = len(block) - 1 if pos + step == end else len(block)
            cut = block.rfind(b"\n", 0, search_end)
            if cut >= 0:
                blocks.append(block[cut + 1 :])
                break
            blocks.append(block)
        blocks.reverse()
        return b"".join(blocks)


def count_lines(path: Path) -> int:
    """How many lines ``path`` has (0 when missing); reads in blocks, constant memory."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        return 0
    n = 0
    with f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
    return n


def create_empty(path: Path) -> None:
    """Create an empty log file (mode 0640, append-only where possible) unless it exists."""
    if not path.exists():
        append_line(path, b"")


def append_line(path: Path, line: bytes) -> None:
    """Append one complete line durably: O_APPEND write, then fsync.

    A file created here gets mode 0640 and, where the file system allows it, the
    append-only attribute (``chattr +a``).
    """
    assert line == b"" or (line.endswith(b"\n") and b"\n" not in line[:-1])  # noqa: S101 - the caller's invariant
    created = False
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, LOG_MODE)
            created = True
        except FileExistsError:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError as exc:
        raise cannot(path, "open for append", exc) from None
    try:
        if created:
            os.fchmod(fd, LOG_MODE)  # before +a, which forbids mode changes
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        raise cannot(path, "append", exc) from None
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
        try_append_only(path)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def try_append_only(path: Path) -> bool:
    """Set the append-only attribute; ``False`` (and no error) where that is not possible."""
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    try:
        done = subprocess.run(
            [chattr, "+a", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` whole (staged next to it, fsync'd, renamed); refuse to replace one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            os.fchmod(fd, mode)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)  # fails if path appeared meanwhile, unlike rename
        os.unlink(tmp)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise cannot(path, "write", exc) from None
    fsync_dir(path.parent)
