"""Downloads into a content-addressed cache, checked against an upstream sha256.

The cache holds one file per content hash, ``<cache>/sha256/<hex>``. A file only ever appears
there after its bytes were hashed and matched; a cached file is hashed again before each use.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from vigil.basics.atomic import copy_file_atomic
from vigil.bundle.errors import CatalogError, FetchError

Progress = Callable[[int, "int | None"], None]

CHUNK = 1 << 20
TIMEOUT_S = 60
USER_AGENT = "vigil-bundle (+https://github.com/vigil)"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def short(digest: str) -> str:
    return digest[:12]


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and bool(_HEX64.match(value))


def hash_file(path: Path) -> tuple[str, int]:
    """The sha256 and size of ``path``, read in chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never from https to anything that is not https."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: object,
        newurl: str,
    ) -> urllib.request.Request | None:
        old = urllib.parse.urlsplit(req.full_url).scheme
        new = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl)).scheme
        if old == "https" and new != "https":
            raise FetchError(req.full_url, f"refusing redirect from https to {new}: {newurl}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)  # type: ignore[arg-type]


_opener = urllib.request.build_opener(_HttpsOnlyRedirects())


def check_url(url: str) -> None:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise FetchError(url, f"scheme {scheme!r} is not one of http, https, file")


def open_url(url: str) -> tuple[IO[bytes], int | None]:
    """Open ``url`` for reading; returns the stream and its announced length, if any."""
    check_url(url)
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})  # noqa: S310 - check_url allows https only
    try:
        resp = _opener.open(req, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        raise FetchError(url, f"HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise FetchError(url, f"cannot open: {e.reason}") from None
    except OSError as e:
        raise FetchError(url, f"cannot open: {e}") from None
    length = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
    try:
        total = int(length) if length is not None else None
    except ValueError:
        total = None
    return resp, total


def read_url(url: str, *, limit: int = 64 << 20) -> bytes:
    """The whole body of a small resource (a checksum file, an index), at most ``limit`` bytes."""
    stream, _ = open_url(url)
    with stream:
        try:
            data = stream.read(limit + 1)
        except OSError as e:
            raise FetchError(url, f"read failed: {e}") from None
    if len(data) > limit:
        raise FetchError(url, f"larger than {limit} bytes")
    return data


class Cache:
    """A content-addressed store of verified downloads: ``<root>/sha256/<hex>``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.dir = self.root / "sha256"

    def path(self, sha256: str) -> Path:
        return self.dir / sha256

    def lookup(self, sha256: str) -> Path | None:
        """The cached file for ``sha256`` after re-hashing it; a corrupt entry is removed."""
        p = self.path(sha256)
        if not p.is_file():
            return None
        actual, _ = hash_file(p)
        if actual == sha256:
            return p
        p.unlink(missing_ok=True)
        return None

    def tempdir(self) -> Path:
        """A scratch directory on the cache's file system (so a rename into the cache is atomic)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".work-", dir=self.root))

    def admit(
        self,
        tmp: Path,
        *,
        expected: str,
        actual: str,
        what: str,
        size: int | None = None,
        expected_size: int | None = None,
    ) -> Path:
        """Move ``tmp`` into the cache if its hash (and size, when known) matched; else remove it."""
        if expected_size is not None and size is not None and size != expected_size:
            tmp.unlink(missing_ok=True)
            raise FetchError(what, f"size mismatch: expected {expected_size} bytes, got {size}")
        if actual != expected:
            tmp.unlink(missing_ok=True)
            raise FetchError(what, f"sha256 mismatch: expected {short(expected)}…, got {short(actual)}…")
        dest = self.path(expected)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
        return dest

    def fetch(
        self, url: str, sha256: str, *, size: int | None = None, progress: Progress | None = None
    ) -> Path:
        """The verified bytes of ``url`` in the cache, downloading them if needed.

        A mismatch raises :class:`FetchError` naming the URL and both digests, and leaves
        nothing in the cache.
        """
        if not is_sha256(sha256):
            raise FetchError(url, f"expected sha256 {sha256!r} is not 64 lowercase hex digits")
        hit = self.lookup(sha256)
        if hit is not None:
            if progress is not None:
                n = hit.stat().st_size
                progress(n, n)
            return hit
        self.dir.mkdir(parents=True, exist_ok=True)
        stream, total = open_url(url)
        if size is not None:
            total = size
        fd, name = tempfile.mkstemp(prefix=".part-", dir=self.dir)
        tmp = Path(name)
        h = hashlib.sha256()
        done = 0
        try:
            with stream, os.fdopen(fd, "wb") as out:
                for chunk in _chunks(stream, url):
                    done += len(chunk)
                    if size is not None and done > size:
                        raise FetchError(url, f"longer than the locked size of {size} bytes")
                    h.update(chunk)
                    out.write(chunk)
                    if progress is not None:
                        progress(done, total)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return self.admit(tmp, expected=sha256, actual=h.hexdigest(), what=url, size=done, expected_size=size)


def _chunks(stream: IO[bytes], url: str) -> Iterator[bytes]:
    while True:
        try:
            chunk = stream.read(CHUNK)
        except OSError as e:
            raise FetchError(url, f"read failed: {e}") from None
        if not chunk:
            return
        yield chunk


def copy_file(src: Path, dest: Path, *, mode: int) -> None:
    """Copy ``src`` to ``dest`` through a temporary name, then rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    copy_file_atomic(src, dest, mode=mode)


# --- upstream checksum files -------------------------------------------------------------------

_SUMS_LINE = re.compile(r"^([0-9a-fA-F]{64})\s+[* ]?(.+?)\s*$")
_BSD_LINE = re.compile(r"^SHA256\s*\((.+)\)\s*=\s*([0-9a-fA-F]{64})\s*$")


def sha256_from_checksum_file(text: str, basename: str, *, source: str) -> str:
    """The sha256 that an upstream checksum file gives for ``basename``.

    Understood: ``sha256sum`` output (``HEX  name`` / ``HEX *name``, names may carry a directory),
    BSD style (``SHA256 (name) = HEX``), a file holding one bare digest (``grafana-….tar.gz.sha256``),
    and a Debian ``Packages`` index (``Filename:`` + ``SHA256:`` stanzas, as in vendor apt repos).
    """
    found: set[str] = set()
    stripped = text.strip()
    if "\nFilename:" in "\n" + text:
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(
                (k.strip(), v.strip())
                for k, _, v in (
                    line.partition(":")
                    for line in stanza.splitlines()
                    if ":" in line and not line.startswith((" ", "\t"))
                )
            )
            if fields.get("Filename", "").rsplit("/", 1)[-1] == basename and "SHA256" in fields:
                found.add(fields["SHA256"].lower())
    elif _HEX64.match(stripped.lower()) and len(stripped.split()) == 1:
        found.add(stripped.lower())
    else:
        for line in text.splitlines():
            m = _SUMS_LINE.match(line.strip())
            if m and m.group(2).rsplit("/", 1)[-1] == basename:
                found.add(m.group(1).lower())
                continue
            m = _BSD_LINE.match(line.strip())
            if m and m.group(1).rsplit("/", 1)[-1] == basename:
                found.add(m.group(2).lower())
    if not found:
        raise CatalogError(source, f"no sha256 for {basename!r} in this checksum file")
    if len(found) > 1:
        raise CatalogError(source, f"conflicting sha256 lines for {basename!r}")
    return found.pop()
