"""The payload: a deterministic tar stream of the bundle's files, zstd-compressed.

Writing: entries sorted by path, fixed mtime, uid/gid 0, no user or group names, modes
0644/0755, PAX format; zstd level 3 with worker threads and a frame checksum. zstd's
multi-threaded output does not depend on the number of workers, so builds on machines
with different core counts give the same bytes.

Reading: one streaming pass. The compressed bytes are hashed as they are read (the
manifest pins their SHA-256), decompressed, parsed as tar, and every member is checked
against the manifest before a byte of it is used; the files' own SHA-256 is computed on
a second thread so that verification runs at the speed of hashing.
"""

from __future__ import annotations

import hashlib
import os
import queue
import tarfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import zstandard

from bundle.errors import BundleError, BundleRejected, TamperedFile
from bundle.manifest import FileEntry, Manifest, PayloadEntry, check_member_name

CHUNK = 1 << 20
ZSTD_LEVEL = 3
MAX_WINDOW = 1 << 27

Progress = Callable[[int, int], None]


class PayloadFile(Protocol):
    """What the builder needs to know about one file going into the payload."""

    path: str
    source: Path
    mode: int
    component: str
    version: str
    license: str
    upstream_url: str
    upstream_sha256: str


@dataclass(frozen=True)
class WrittenFile:
    path: str
    size: int
    sha256: str
    mode: int


class _HashingWriter:
    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.hasher = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hasher.update(data)
        self.size += len(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def write_payload(
    files: Iterable[PayloadFile],
    out: Path,
    *,
    mtime: int,
    lead: str | None = None,
    progress: Progress | None = None,
) -> tuple[PayloadEntry, list[WrittenFile]]:
    """Write ``out`` (tar.zst) from ``files``; return the payload's digest and each file's.

    Entries are sorted by path, except ``lead`` (the SBOM), which goes first so that
    ``inspect`` finds it without decompressing the whole payload.
    """
    ordered = sorted(files, key=lambda f: (f.path != lead, f.path))
    seen: set[str] = set()
    for f in ordered:
        problem = check_member_name(f.path)
        if problem:
            raise BundleError(f.path, f"cannot go into a payload: {problem}")
        if f.path in seen:
            raise BundleError(f.path, "two staged files share this payload path")
        seen.add(f.path)
    total = sum(os.stat(f.source).st_size for f in ordered)
    done = 0
    written: list[WrittenFile] = []
    cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=-1, write_checksum=True)
    with open(out, "wb") as raw:
        sink = _HashingWriter(raw)
        with cctx.stream_writer(sink, closefd=False) as zw:  # type: ignore[arg-type]
            tar_size = 0
            for f in ordered:
                mode = 0o755 if f.mode & 0o111 else 0o644
                with open(f.source, "rb") as src:
                    size = os.fstat(src.fileno()).st_size
                    info = tarfile.TarInfo(f.path)
                    info.size = size
                    info.mtime = mtime
                    info.mode = mode
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    header = info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="strict")
                    zw.write(header)
                    hasher = hashlib.sha256()
                    copied = 0
                    while copied < size:
                        chunk = src.read(min(CHUNK, size - copied))
                        if not chunk:
                            break
                        hasher.update(chunk)
                        zw.write(chunk)
                        copied += len(chunk)
                    if copied != size or src.read(1):
                        raise BundleError(str(f.source), "changed size while being written into the payload")
                    zw.write(b"\0" * (-size % tarfile.BLOCKSIZE))
                    tar_size += len(header) + size + (-size % tarfile.BLOCKSIZE)
                written.append(WrittenFile(f.path, size, hasher.hexdigest(), mode))
                done += size
                if progress:
                    progress(done, total)
            # end of archive: two zero blocks, then zeros up to a whole record, as tar(1) writes it
            tar_size += 2 * tarfile.BLOCKSIZE
            zw.write(b"\0" * (2 * tarfile.BLOCKSIZE + (-tar_size % tarfile.RECORDSIZE)))
        raw.flush()
        os.fsync(raw.fileno())
    return PayloadEntry(size=sink.size, sha256=sink.hasher.hexdigest()), written


class _HashWorker:
    """One thread that updates hashers in submission order, so hashing overlaps decompression."""

    _STOP = object()

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue(maxsize=32)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="vigil-hash", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.q.get()
            if item is self._STOP:
                return
            if self.error is not None:
                continue
            try:
                hasher, data, check = item
                if data is not None:
                    hasher.update(data)
                if check is not None:
                    check(hasher)
            except BaseException as exc:  # handed to the main thread
                self.error = exc

    def update(self, hasher: Any, data: bytes) -> None:
        self.q.put((hasher, data, None))

    def then(self, hasher: Any, check: Callable[[Any], None]) -> None:
        self.q.put((hasher, None, check))

    def raise_pending(self) -> None:
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.q.put(self._STOP)
        self.thread.join()


class _PayloadSource:
    """File-like view of the payload's compressed bytes, hashed as they are read."""

    def __init__(self, chunks: Iterator[bytes], total: int, progress: Progress | None) -> None:
        self.chunks = chunks
        self.hasher = hashlib.sha256()
        self.buf = b""
        self.done = 0
        self.total = total
        self.progress = progress

    def read(self, n: int = -1) -> bytes:
        if not self.buf:
            self.buf = next(self.chunks, b"")
            if self.buf:
                self.hasher.update(self.buf)
                self.done += len(self.buf)
                if self.progress:
                    self.progress(self.done, self.total)
        if n < 0 or n >= len(self.buf):
            data, self.buf = self.buf, b""
        else:
            data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def drain(self) -> None:
        self.buf = b""
        while self.read(CHUNK):
            pass


def verify_payload(
    bundle_name: str,
    manifest: Manifest,
    chunks: Iterator[bytes],
    *,
    extract_to: Path | None = None,
    progress: Progress | None = None,
) -> None:
    """Stream the payload: every member checked, every file hashed, the whole payload hashed.

    With ``extract_to``, files are also written there (a staging directory the caller renames
    into place only after this returns). Raises TamperedFile / BundleRejected naming the file.
    """
    source = _PayloadSource(chunks, manifest.payload.size, progress)
    try:
        _stream_members(bundle_name, manifest, source, extract_to)
    except BundleRejected:
        source.drain()
        _check_payload_digest(bundle_name, manifest, source)  # the root cause, when it is one
        raise
    source.drain()
    _check_payload_digest(bundle_name, manifest, source)


def _check_payload_digest(bundle_name: str, manifest: Manifest, source: _PayloadSource) -> None:
    if source.done != manifest.payload.size:
        raise TamperedFile(
            f"{bundle_name}: payload.tar.zst", f"is {source.done} bytes, manifest says {manifest.payload.size}"
        )
    actual = source.hasher.hexdigest()
    if actual != manifest.payload.sha256:
        raise TamperedFile(
            f"{bundle_name}: payload.tar.zst",
            f"altered: sha256 {actual[:12]}… differs from the signed manifest's {manifest.payload.sha256[:12]}…",
        )


def _stream_members(bundle_name: str, manifest: Manifest, source: _PayloadSource, extract_to: Path | None) -> None:
    expected = manifest.files_by_path()
    seen: set[str] = set()
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    worker = _HashWorker()
    try:
        with dctx.stream_reader(source, read_size=CHUNK, read_across_frames=False) as plain:  # type: ignore[arg-type]
            try:
                tar = tarfile.open(fileobj=plain, mode="r|", bufsize=CHUNK)  # type: ignore[call-overload]
                for member in tar:
                    _check_member(bundle_name, member, expected, seen)
                    entry = expected[member.name]
                    seen.add(member.name)
                    _read_member(bundle_name, tar, member, entry, worker, extract_to)
                    worker.raise_pending()
                # after the end-of-archive marker only zero padding may follow
                rest = plain.read(CHUNK)
                while rest:
                    if rest.strip(b"\0"):
                        raise BundleRejected(f"{bundle_name}: payload.tar.zst", "data after the end of the tar stream")
                    rest = plain.read(CHUNK)
            except tarfile.TarError as exc:
                raise BundleRejected(f"{bundle_name}: payload.tar.zst", f"corrupt tar stream ({exc})") from None
            except zstandard.ZstdError as exc:
                raise BundleRejected(f"{bundle_name}: payload.tar.zst", f"corrupt zstd stream ({exc})") from None
    finally:
        worker.close()
    worker.raise_pending()
    missing = sorted(set(expected) - seen)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise TamperedFile(f"{bundle_name}: {missing[0]}", f"listed in the manifest but missing from the payload{more}")


def _check_member(bundle_name: str, member: tarfile.TarInfo, expected: dict[str, FileEntry], seen: set[str]) -> None:
    obj = f"{bundle_name}: {member.name[:200]}"
    problem = check_member_name(member.name)
    if problem:
        raise BundleRejected(obj, f"{problem} in the payload")
    if member.issym() or member.islnk():
        target = member.linkname
        leaves = target.startswith("/") or ".." in target.split("/")
        kind = "symlink" if member.issym() else "hardlink"
        if leaves:
            raise BundleRejected(obj, f"{kind} to {target[:200]!r} leaves the bundle")
        raise BundleRejected(obj, f"{kind} entries are not allowed in a payload")
    if member.ischr() or member.isblk() or member.isfifo():
        raise BundleRejected(obj, "device or fifo entries are not allowed in a payload")
    if not member.isreg() or member.issparse():
        raise BundleRejected(obj, "only regular files are allowed in a payload")
    if member.name in seen:
        raise BundleRejected(obj, "appears twice in the payload")
    entry = expected.get(member.name)
    if entry is None:
        raise TamperedFile(obj, "is in the payload but not in the manifest")
    if member.size != entry.size:
        raise TamperedFile(obj, f"size lie: payload says {member.size} bytes, manifest says {entry.size}")
    if member.mode != entry.mode:
        raise TamperedFile(obj, f"mode {member.mode:04o} differs from the manifest's {entry.mode:04o}")


def _read_member(
    bundle_name: str,
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    entry: FileEntry,
    worker: _HashWorker,
    extract_to: Path | None,
) -> None:
    obj = f"{bundle_name}: {member.name}"
    fh = tar.extractfile(member)
    assert fh is not None
    out_fd = -1
    if extract_to is not None:
        target = extract_to / member.name
        target.parent.mkdir(parents=True, exist_ok=True)
        out_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, entry.mode)
    hasher = hashlib.sha256()
    left = entry.size  # the manifest's size is a hard cap
    try:
        while left:
            data = fh.read(min(CHUNK, left))
            if not data:
                raise TamperedFile(obj, f"truncated: {entry.size - left} of {entry.size} bytes")
            left -= len(data)
            worker.update(hasher, data)
            if out_fd >= 0:
                view = memoryview(data)
                while view:
                    view = view[os.write(out_fd, view) :]
        if out_fd >= 0:
            os.fchmod(out_fd, entry.mode)
            os.fsync(out_fd)
    finally:
        if out_fd >= 0:
            os.close(out_fd)

    def check(h: Any) -> None:
        if h.hexdigest() != entry.sha256:
            raise TamperedFile(obj, f"sha256 {h.hexdigest()[:12]}… differs from the manifest's {entry.sha256[:12]}…")

    worker.then(hasher, check)


def read_leading_member(chunks: Iterator[bytes], name: str, *, max_size: int = 16 << 20) -> bytes | None:
    """The bytes of the payload's first member when it is ``name`` (the SBOM), else None.

    Used by ``inspect`` for display only; nothing read here is trusted or written anywhere.
    """
    source = _PayloadSource(chunks, 0, None)
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    try:
        with dctx.stream_reader(source, read_size=CHUNK) as plain:  # type: ignore[arg-type]
            tar = tarfile.open(fileobj=plain, mode="r|", bufsize=CHUNK)  # type: ignore[call-overload]
            member = tar.next()
            if member is None or member.name != name or not member.isreg() or member.size > max_size:
                return None
            fh = tar.extractfile(member)
            return fh.read(member.size) if fh else None
    except (tarfile.TarError, zstandard.ZstdError):
        return None
