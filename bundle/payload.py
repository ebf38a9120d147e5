"""The payload: a deterministic tar stream of the bundle's files, zstd-compressed.

Writing: entries sorted by path, fixed mtime, uid/gid 0, no user or group names, modes
0644/0755, PAX format. The tar stream is cut into pieces of ``FRAME_BYTES`` and each piece
is compressed as its own zstd frame (level 3, content size and checksum in the frame) on a
pool of threads. Concatenated zstd frames are one valid ``.zst`` stream, so ``zstd -d |
tar -x`` reads the payload as it is; each frame is compressed alone, so the bytes do not
depend on the number of threads or cores. The manifest's frame table lists each frame's
compressed size, SHA-256 and uncompressed (content) size.

Reading: one streaming pass. The compressed bytes are hashed as they are read (the
manifest pins their SHA-256) and cut into the signed frame sizes. Then, for each frame, on
a pool of threads, in this order (the numbers are the verifier's step 7):

7a. its SHA-256 against the signed frame table: no unsigned byte reaches zstd;
7b. its zstd header: one frame, the signed content size, a checksum, no dictionary;
7c. decompression into exactly the signed content size; bytes after the zstd frame inside
    the signed frame are refused, not skipped;

then the frames' output is parsed as tar in order, every member checked against the
manifest before a byte of it is used (7d), and after the end-of-archive blocks only zeros
up to the next tar record may follow, ending exactly where the frame table says (7e).
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import zstandard

from vigil.bundle.container import read_ustar_header
from vigil.bundle.errors import BundleError, BundleRejected, TamperedFile
from vigil.bundle.manifest import FileEntry, Manifest, PayloadEntry, check_member_name

CHUNK = 1 << 20
ZSTD_LEVEL = 3
FRAME_BYTES = 4 << 20  # uncompressed bytes per zstd frame
WORKERS = max(2, min(8, os.cpu_count() or 2))

Progress = Callable[[int, int], None]


class PayloadFile(Protocol):
    """What the builder needs to know about one file going into the payload.

    Read-only members: the builder only reads them, so frozen dataclasses (the catalog's files, the
    SBOM) satisfy the protocol as well as mutable objects do.
    """

    @property
    def path(self) -> str: ...
    @property
    def source(self) -> Path: ...
    @property
    def mode(self) -> int: ...
    @property
    def component(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def license(self) -> str: ...
    @property
    def upstream_url(self) -> str: ...
    @property
    def upstream_sha256(self) -> str: ...


@dataclass(frozen=True)
class Frame:
    """One compressed frame and what the frame table says of it."""

    data: bytes
    sha256: str
    content_size: int


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


class _FrameWriter:
    """Cuts a byte stream into FRAME_BYTES pieces and compresses each as its own frame, in parallel."""

    def __init__(self, sink: _HashingWriter) -> None:
        self.sink = sink
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="vigil-zstd")
        self.local = threading.local()
        self.pending: deque[Future[Frame]] = deque()
        self.buf = bytearray()
        self.frames: list[Frame] = []  # the frame table (data dropped once written)
        self.sizes: list[int] = []

    def _compress(self, piece: bytes) -> Frame:
        cctx = getattr(self.local, "cctx", None)
        if cctx is None:
            cctx = self.local.cctx = zstandard.ZstdCompressor(
                level=ZSTD_LEVEL, write_checksum=True, write_content_size=True
            )
        data = cctx.compress(piece)
        return Frame(data, hashlib.sha256(data).hexdigest(), len(piece))

    def _submit(self, piece: bytes) -> None:
        self.pending.append(self.pool.submit(self._compress, piece))
        while len(self.pending) > 2 * WORKERS:
            self._drain_one()

    def _drain_one(self) -> None:
        frame = self.pending.popleft().result()
        self.sink.write(frame.data)
        self.frames.append(Frame(b"", frame.sha256, frame.content_size))
        self.sizes.append(len(frame.data))

    def write(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= FRAME_BYTES:
            self._submit(bytes(self.buf[:FRAME_BYTES]))
            del self.buf[:FRAME_BYTES]

    def close(self) -> None:
        if self.buf or not self.frames and not self.pending:
            self._submit(bytes(self.buf))
            self.buf.clear()
        while self.pending:
            self._drain_one()

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def compress_frames(data: bytes) -> tuple[bytes, tuple[int, ...]]:
    """``data`` as vigil frames (for tests and tools that hold a whole tar stream in memory)."""
    out: list[bytes] = []
    cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, write_content_size=True)
    for i in range(0, max(len(data), 1), FRAME_BYTES):
        out.append(cctx.compress(data[i : i + FRAME_BYTES]))
    return b"".join(out), tuple(len(f) for f in out)


def frame_table(frames: Sequence[bytes]) -> dict[str, list[int] | list[str]]:
    """The manifest's frame table for these compressed frames, as the builder writes it (for tests
    and tools); the content size is the one each frame's zstd header declares."""
    return {
        "frames": [len(f) for f in frames],
        "frame_sha256": [hashlib.sha256(f).hexdigest() for f in frames],
        "frame_content_sizes": [max(zstandard.frame_content_size(f), 0) for f in frames],
    }


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
    with open(out, "wb") as raw:
        sink = _HashingWriter(raw)
        zw = _FrameWriter(sink)
        try:
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
            zw.close()
        finally:
            zw.shutdown()
        raw.flush()
        os.fsync(raw.fileno())
    return (
        PayloadEntry(
            size=sink.size,
            sha256=sink.hasher.hexdigest(),
            frames=tuple(zw.sizes),
            frame_bytes=FRAME_BYTES,
            frame_sha256=tuple(f.sha256 for f in zw.frames),
            frame_content_sizes=tuple(f.content_size for f in zw.frames),
        ),
        written,
    )


class _PayloadSource:
    """The payload's compressed bytes, hashed as they are pulled, cut into the signed frame sizes."""

    def __init__(
        self, chunks: Iterator[bytes], total: int, progress: Progress | None, *, keep: bool = True
    ) -> None:
        self.chunks = chunks
        self.hasher = hashlib.sha256()
        self.buf = bytearray()
        self.done = 0
        self.total = total
        self.progress = progress
        self.keep = keep  # False: the bytes are only hashed (nothing reads the frames)

    def _pull(self) -> bool:
        chunk = next(self.chunks, b"")
        if not chunk:
            return False
        self.hasher.update(chunk)
        self.done += len(chunk)
        if self.keep:
            self.buf += chunk
        if self.progress:
            self.progress(self.done, self.total)
        return True

    def frames(self, sizes: Iterable[int]) -> Iterator[bytes]:
        for size in sizes:
            while len(self.buf) < size and self._pull():
                pass
            frame = bytes(self.buf[:size])
            del self.buf[:size]
            yield frame

    def drain(self) -> None:
        self.buf.clear()
        while self._pull():
            self.buf.clear()


class _FrameReader:
    """File-like view of the decompressed frames, in order; decompression runs ahead on a pool.

    Each frame is authenticated against the signed frame table before zstd sees a byte of it
    (steps 7a-7c). The last few pieces handed out are kept, so that what follows the tar stream can
    be checked byte for byte even when the tar reader has buffered it (step 7e).
    """

    KEEP = 2 * CHUNK + tarfile.RECORDSIZE

    def __init__(self, frames: Iterator[bytes], *, payload: PayloadEntry, where: str) -> None:
        self.frames = enumerate(frames)
        self.payload = payload
        self.where = where
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="vigil-unzstd")
        self.local = threading.local()
        self.pending: deque[Future[bytes]] = deque()
        self.current = memoryview(b"")
        self.delivered = 0  # bytes handed out so far
        self.recent: deque[bytes] = deque()  # the last pieces handed out, at least KEEP bytes of them
        self.recent_size = 0

    def _decompress(self, index: int, frame: bytes) -> bytes:
        where = f"{self.where} frame {index}"
        # 7a the frame's bytes as signed, before anything parses them
        digest = hashlib.sha256(frame).hexdigest()
        signed = self.payload.frame_sha256[index]
        if digest != signed:
            raise TamperedFile(
                where, f"altered: sha256 {digest[:12]}… differs from the signed manifest's {signed[:12]}…"
            )
        # 7b its zstd header (signed bytes, but a builder's mistake is named here, not in tar)
        content = self.payload.frame_content_sizes[index]
        try:
            params = zstandard.get_frame_parameters(frame)
        except zstandard.ZstdError as exc:
            raise BundleRejected(where, f"corrupt zstd frame ({exc})") from None
        if params.content_size != content:
            declared = "no size" if params.content_size < 0 else f"{params.content_size} bytes"
            raise BundleRejected(where, f"zstd frame declares {declared}, the manifest says {content}")
        if not params.has_checksum or params.dict_id:
            raise BundleRejected(where, "zstd frame without a checksum or with a dictionary")
        # 7c exactly the signed content size out, and nothing after the zstd frame
        dctx = getattr(self.local, "dctx", None)
        if dctx is None:
            dctx = self.local.dctx = zstandard.ZstdDecompressor()
        try:
            out = dctx.decompress(frame, max_output_size=content, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            if "unused data" in str(exc):
                raise BundleRejected(
                    where, f"extra data inside the signed frame after its zstd frame ({exc})"
                ) from None
            raise BundleRejected(where, f"corrupt zstd frame ({exc})") from None
        if len(out) != content:
            raise BundleRejected(where, f"zstd frame gave {len(out)} bytes, the manifest says {content}")
        return out

    def _top_up(self) -> None:
        while len(self.pending) < WORKERS + 1:
            item = next(self.frames, None)
            if item is None:
                return
            self.pending.append(self.pool.submit(self._decompress, *item))

    def read(self, n: int = -1) -> bytes:
        while not self.current:
            self._top_up()
            if not self.pending:
                return b""
            self.current = memoryview(self.pending.popleft().result())
            self._top_up()
        if n < 0 or n >= len(self.current):
            data, self.current = bytes(self.current), memoryview(b"")
        else:
            data, self.current = bytes(self.current[:n]), self.current[n:]
        self.delivered += len(data)
        self.recent.append(data)
        self.recent_size += len(data)
        while self.recent_size - len(self.recent[0]) >= self.KEEP:
            self.recent_size -= len(self.recent.popleft())
        return data

    def since(self, offset: int) -> bytes:
        """The bytes handed out from ``offset`` on (only the last ``KEEP`` or more are kept)."""
        first = self.delivered - self.recent_size
        if offset < first:
            raise BundleRejected(self.where, "cannot check the end of the tar stream")  # not reached
        return b"".join(self.recent)[offset - first :]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


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
    into place only after this returns). Raises TamperedFile / BundleRejected naming the file or
    the frame. Every frame is checked against its signed SHA-256 before it is decompressed, so
    the first failure in stream order is the root cause: nothing more is read after it.
    """
    source = _PayloadSource(chunks, manifest.payload.size, progress)
    _stream_members(bundle_name, manifest, source, extract_to)
    source.drain()
    _check_payload_digest(bundle_name, manifest, source)  # 8 (the frames' digests already agreed)


def verify_payload_bytes(
    bundle_name: str,
    manifest: Manifest,
    chunks: Iterator[bytes],
    *,
    progress: Progress | None = None,
) -> None:
    """Step 8's whole-payload check alone: the compressed payload, as stored, hashed in one pass and
    compared with its signed size and SHA-256. Every byte is authenticated, at the speed of reading
    and hashing the file; nothing is decompressed or parsed. What a payload's members are (paths,
    types, modes, each file's hash) is checked by :func:`verify_payload` wherever it is unpacked,
    and by ``vigil bundle verify --deep``.
    """
    source = _PayloadSource(chunks, manifest.payload.size, progress, keep=False)
    source.drain()
    _check_payload_digest(bundle_name, manifest, source)


def _check_payload_digest(bundle_name: str, manifest: Manifest, source: _PayloadSource) -> None:
    if source.done != manifest.payload.size:
        raise TamperedFile(
            f"{bundle_name}: payload.tar.zst",
            f"is {source.done} bytes, manifest says {manifest.payload.size}",
        )
    actual = source.hasher.hexdigest()
    if actual != manifest.payload.sha256:
        raise TamperedFile(
            f"{bundle_name}: payload.tar.zst",
            f"altered: sha256 {actual[:12]}… differs from the signed manifest's "
            f"{manifest.payload.sha256[:12]}…",
        )


def _stream_members(
    bundle_name: str, manifest: Manifest, source: _PayloadSource, extract_to: Path | None
) -> None:
    expected = manifest.files_by_path()
    seen: set[str] = set()
    where = f"{bundle_name}: payload.tar.zst"
    plain = _FrameReader(source.frames(manifest.payload.frames), payload=manifest.payload, where=where)
    try:
        try:
            tar = tarfile.open(fileobj=plain, mode="r|", bufsize=CHUNK)  # type: ignore[call-overload]  # noqa: SIM115 - closed in finally
            for member in tar:  # 7d
                _check_member(bundle_name, member, expected, seen)
                entry = expected[member.name]
                seen.add(member.name)
                _read_member(bundle_name, tar, member, entry, extract_to)
            _check_end(plain, tar.offset, sum(manifest.payload.frame_content_sizes), where)  # 7e
        except tarfile.TarError as exc:
            raise BundleRejected(where, f"corrupt tar stream ({exc})") from None
    finally:
        plain.close()
    missing = sorted(set(expected) - seen)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise TamperedFile(
            f"{bundle_name}: {missing[0]}", f"listed in the manifest but missing from the payload{more}"
        )


def _check_end(plain: _FrameReader, end: int, total: int, where: str) -> None:
    """Step 7e: after the last member (at ``end``) come two zero blocks and zeros up to the next tar
    record, as tar(1) and the builder write them, and the frames end exactly there."""
    tail = 2 * tarfile.BLOCKSIZE
    tail += -(end + tail) % tarfile.RECORDSIZE
    if total > end + tail:
        raise BundleRejected(
            where,
            f"data after the end of the tar stream: the frames hold {total - end} bytes after the last "
            f"member, the end-of-archive blocks and their padding are {tail}",
        )
    if total < end + tail:
        raise BundleRejected(where, "the tar stream's end-of-archive blocks are missing or short")
    rest = plain.since(end)
    while len(rest) < tail:  # at most one record is still unread: the size is checked above
        more = plain.read(tarfile.RECORDSIZE)
        if not more:
            break
        rest += more
    if len(rest) != tail or rest.strip(b"\0"):
        raise BundleRejected(
            where, "data after the end of the tar stream: the end-of-archive blocks are not zeros"
        )


def _check_member(
    bundle_name: str, member: tarfile.TarInfo, expected: dict[str, FileEntry], seen: set[str]
) -> None:
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
    extract_to: Path | None,
) -> None:
    obj = f"{bundle_name}: {member.name}"
    fh = tar.extractfile(member)
    assert fh is not None  # noqa: S101 - narrows the type
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
            hasher.update(data)
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

    digest = hasher.hexdigest()
    if digest != entry.sha256:
        raise TamperedFile(obj, f"sha256 {digest[:12]}… differs from the manifest's {entry.sha256[:12]}…")


def read_leading_member(
    chunks: Iterator[bytes], payload: PayloadEntry, name: str, *, where: str, max_size: int = 16 << 20
) -> bytes | None:
    """The bytes of the payload's first member when it is ``name`` (the SBOM), else None.

    Used by ``inspect`` for display only; nothing read here is trusted or written anywhere. The
    frames read are checked against the (unverified) manifest's frame table like ``verify`` does,
    and a mismatch raises as it does there; the member's header is read by vigil's own strict
    ustar parser, never by ``tarfile``, since inspect checks no signature.
    """
    source = _PayloadSource(chunks, 0, None)
    plain = _FrameReader(source.frames(payload.frames), payload=payload, where=where)
    try:
        block = _read_exactly(plain, tarfile.BLOCKSIZE)
        try:
            header = read_ustar_header(block, where) if len(block) == tarfile.BLOCKSIZE else None
        except BundleRejected:
            return None
        if header is None or header[0] != name or header[1] > max_size:
            return None
        data = _read_exactly(plain, header[1])
        return data if len(data) == header[1] else None
    finally:
        plain.close()


def _read_exactly(plain: _FrameReader, n: int) -> bytes:
    parts: list[bytes] = []
    left = n
    while left:
        data = plain.read(min(left, CHUNK))
        if not data:
            break
        parts.append(data)
        left -= len(data)
    return b"".join(parts)
