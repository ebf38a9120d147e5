"""The ``.bundle`` file: a strict, minimal ustar archive with a fixed layout.

::

    manifest.json                  signed JSON (see bundle.manifest)
    signatures/<KEYID>.minisig     one minisign signature of manifest.json per signer
    payload.tar.zst                the payload (a tar stream, zstd-compressed)
    two zero blocks                end of archive; nothing may follow

It is an ordinary tar file, so an operator with no vigil at hand can run
``tar -xf vigil-7-amd64.bundle manifest.json signatures`` and check the manifest
with the stock ``minisign -V``. vigil itself reads it with its own strict parser:
the order of members is fixed, only regular files are allowed, header checksums are
checked, and a short or over-long file is named as such.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from vigil.bundle.errors import BundleRejected

BLOCK = 512
MANIFEST = "manifest.json"
PAYLOAD = "payload.tar.zst"
SIG_DIR = "signatures/"
MAX_SIGNATURES = 64
MAX_SIG_BYTES = 4096
_SIG_NAME = re.compile(r"^signatures/[0-9A-F]{16}\.minisig$")
USTAR_MAX_SIZE = 8**11 - 1


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    offset: int  # where the member's data starts in the file


def _header(name: str, size: int, mtime: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info.tobuf(format=tarfile.USTAR_FORMAT, encoding="utf-8", errors="strict")


def _pad(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


def write_bundle(
    out: Path, *, manifest: bytes, signatures: dict[str, bytes], payload: Path, mtime: int
) -> None:
    """Assemble a bundle file at ``out`` (the caller stages and renames it)."""
    payload_size = payload.stat().st_size
    if payload_size > USTAR_MAX_SIZE:
        raise BundleRejected(
            str(payload), "payload larger than 8 GiB; split the channel into smaller bundles"
        )
    with open(out, "wb") as fh:
        fh.write(_header(MANIFEST, len(manifest), mtime))
        fh.write(manifest + _pad(len(manifest)))
        for key_id in sorted(signatures):
            sig = signatures[key_id]
            fh.write(_header(f"{SIG_DIR}{key_id}.minisig", len(sig), mtime))
            fh.write(sig + _pad(len(sig)))
        fh.write(_header(PAYLOAD, payload_size, mtime))
        with open(payload, "rb") as src:
            fh.flush()
            _copy(src, fh, payload_size)
        fh.write(_pad(payload_size))
        fh.write(b"\0" * (2 * BLOCK))
        fh.flush()
        os.fsync(fh.fileno())


def _copy(src: BinaryIO, dst: BinaryIO, size: int) -> None:
    try:
        copied = 0
        while copied < size:
            n = os.copy_file_range(src.fileno(), dst.fileno(), size - copied)
            if n == 0:
                break
            copied += n
        if copied == size:
            dst.seek(0, os.SEEK_END)
            return
    except OSError:
        pass
    src.seek(0)
    dst.seek(0, os.SEEK_END)
    shutil.copyfileobj(src, dst, 1 << 20)


def _parse_number(field: bytes, what: str, where: str) -> int:
    text = field.rstrip(b"\0 ").lstrip(b" ")
    if not text:
        return 0
    if not re.fullmatch(rb"[0-7]+", text):
        raise BundleRejected(where, f"corrupt tar header: {what} field is not octal")
    return int(text, 8)


def _parse_header(block: bytes, where: str) -> tuple[str, int] | None:
    """(name, size) of a ustar header, or None for an end-of-archive zero block."""
    if block == b"\0" * BLOCK:
        return None
    stored = _parse_number(block[148:156], "checksum", where)
    computed = sum(block[:148]) + 8 * 32 + sum(block[156:])
    if stored != computed:
        raise BundleRejected(where, "corrupt tar header: checksum mismatch")
    if block[257:263] != b"ustar\x00":
        raise BundleRejected(where, "not a vigil bundle (no ustar header)")
    typeflag = block[156:157]
    name = block[0:100].split(b"\0", 1)[0]
    prefix = block[345:500].split(b"\0", 1)[0]
    full = (prefix + b"/" + name) if prefix else name
    try:
        text = full.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleRejected(where, "corrupt tar header: member name is not UTF-8") from None
    if typeflag not in (b"0", b"\0"):
        raise BundleRejected(where, f"member {text!r} is not a regular file")
    return text, _parse_number(block[124:136], "size", where)


def read_ustar_header(block: bytes, where: str) -> tuple[str, int] | None:
    """(name, size) of one strict ustar header of a regular file, None for a zero block; raises
    BundleRejected for anything else. For reading untrusted tar headers without ``tarfile``."""
    return _parse_header(block, where)


class BundleReader:
    """Reads a bundle's layout without trusting any of it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = self.path.name
        try:
            self.fh: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise BundleRejected(str(path), f"cannot open: {exc.strerror}") from None
        self.file_size = os.fstat(self.fh.fileno()).st_size
        self.manifest_bytes = b""
        self.signatures: dict[str, bytes] = {}
        self.payload: Member | None = None

    def close(self) -> None:
        self.fh.close()

    def __enter__(self) -> BundleReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_exact(self, n: int, what: str) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise BundleRejected(self.name, f"truncated: file ends inside {what}")
        return data

    def _check_is_tar(self) -> None:
        """A file that is not a tar archive at all (a text file, a download error page, a part of a
        split bundle) is named as such, not as a damaged bundle."""
        head = self.fh.read(BLOCK)
        self.fh.seek(0)
        if not head:
            raise BundleRejected(self.name, "not a vigil bundle: the file is empty")
        if len(head) < BLOCK or head[257:263] != b"ustar\x00":
            hint = (
                " (a part of a split bundle? run `vigil bundle join` on its .parts.json)"
                if ".part" in self.name
                else ""
            )
            raise BundleRejected(self.name, f"not a vigil bundle: not a tar archive{hint}")

    def _next_header(self) -> tuple[str, int] | None:
        offset = self.fh.tell()
        block = self._read_exact(BLOCK, f"the tar header at byte {offset}")
        return _parse_header(block, self.name)

    def read_head(self) -> None:
        """Read manifest and signatures; locate the payload (its bytes are read later, streamed)."""
        self._check_is_tar()
        first = self._next_header()
        if first is None or first[0] != MANIFEST:
            raise BundleRejected(self.name, f"first member must be {MANIFEST}")
        if first[1] > 64 << 20:
            raise BundleRejected(self.name, f"{MANIFEST} is {first[1]} bytes, larger than any real manifest")
        self.manifest_bytes = self._read_exact(first[1], MANIFEST)
        self._read_exact(-first[1] % BLOCK, MANIFEST)
        while True:
            header = self._next_header()
            if header is None:
                raise BundleRejected(self.name, f"has no {PAYLOAD}")
            name, size = header
            if name == PAYLOAD:
                offset = self.fh.tell()
                end = offset + size + (-size % BLOCK)
                if end > self.file_size:
                    raise BundleRejected(
                        self.name, f"truncated: payload needs {end} bytes of file, it has {self.file_size}"
                    )
                self.payload = Member(PAYLOAD, size, offset)
                return
            if not _SIG_NAME.match(name):
                raise BundleRejected(self.name, f"unexpected member {name!r} before the payload")
            if name in self.signatures:
                raise BundleRejected(self.name, f"member {name!r} appears twice")
            if len(self.signatures) >= MAX_SIGNATURES or size > MAX_SIG_BYTES:
                raise BundleRejected(self.name, f"member {name!r} is too large or one of too many signatures")
            self.signatures[name[len(SIG_DIR) : -len(".minisig")]] = self._read_exact(size, name)
            self._read_exact(-size % BLOCK, name)

    def payload_chunks(self, chunk: int = 1 << 20) -> Iterator[bytes]:
        """The payload's bytes, exactly ``payload.size`` of them."""
        assert self.payload is not None  # noqa: S101 - narrows the type
        self.fh.seek(self.payload.offset)
        left = self.payload.size
        while left:
            data = self.fh.read(min(chunk, left))
            if not data:
                raise BundleRejected(self.name, "truncated: file ends inside the payload")
            left -= len(data)
            yield data

    def check_tail(self) -> None:
        """After the payload: padding, two zero blocks, and the end of the file."""
        assert self.payload is not None  # noqa: S101 - narrows the type
        self.fh.seek(self.payload.offset + self.payload.size)
        pad = -self.payload.size % BLOCK
        tail = self.fh.read(pad + 2 * BLOCK + 1)
        if len(tail) < pad + 2 * BLOCK:
            raise BundleRejected(self.name, "truncated: the end-of-archive blocks are missing")
        if len(tail) > pad + 2 * BLOCK:
            extra = self.file_size - (self.payload.offset + self.payload.size + pad + 2 * BLOCK)
            raise BundleRejected(self.name, f"{extra} bytes of trailing data after the end of the bundle")
        if tail.strip(b"\0"):
            raise BundleRejected(self.name, "non-zero bytes in the end-of-archive blocks")
