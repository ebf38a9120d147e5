"""The bundle manifest: what a bundle holds, byte for byte, and for how long it is good.

The manifest is JSON with sorted keys (so the same inputs give the same bytes). It is the
only thing the signatures cover; it pins the compressed payload's size and SHA-256, each
zstd frame's compressed size, SHA-256 and uncompressed size (the frame table), and every
payload file's path, size, mode and SHA-256, so every byte of a bundle is covered, and every
frame is authenticated before a decompressor sees it.
"""

from __future__ import annotations

import builtins
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from vigil.bundle.errors import BundleRejected

FORMAT = "vigil-bundle/2"
#: formats this vigil refuses, and why (the refusal names the bundle: it must be rebuilt)
RETIRED_FORMATS = {
    "vigil-bundle/1": "its payload frames are not signed one by one, so a swapped frame would reach "
    "the decompressor and the tar parser before any signed digest is compared",
}
MAX_MANIFEST_BYTES = 64 << 20
MAX_FRAME_BYTES = 16 << 20  # the builder writes 4 MiB; this caps what one frame may make us hold
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_VERSION = re.compile(r"^\d+(\.\d+)*$")
#: the only modes a payload file may have (what the builder writes)
FILE_MODES = (0o644, 0o755)
#: a path's length and each of its components', in UTF-8 bytes (NAME_MAX is 255; the store and the
#: hosts put a prefix in front, so a whole path stays well below PATH_MAX)
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
#: what signed JSON (a manifest, a trust root) may hold: no deeper nesting, no longer integers
MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    sha256: str
    mode: int
    component: str
    version: str
    license: str
    upstream_url: str
    upstream_sha256: str


@dataclass(frozen=True)
class ComponentEntry:
    name: str
    version: str
    license: str
    kind: str
    upstream_url: str
    upstream_sha256: str


@dataclass(frozen=True)
class PayloadEntry:
    """The payload and its frame table: three lists, one entry per zstd frame, in order."""

    size: int
    sha256: str
    frames: tuple[int, ...]  # compressed size of each zstd frame, in order
    frame_bytes: int  # the most uncompressed bytes one frame may hold
    frame_sha256: tuple[str, ...]  # SHA-256 of each frame's compressed bytes
    frame_content_sizes: tuple[int, ...]  # uncompressed size of each frame (its zstd content size)
    compression: str = "zstd"


class RetiredFormat(BundleRejected):
    """A manifest in a format this vigil no longer accepts: the bundle must be rebuilt."""


def zstd_bound(size: int) -> int:
    """The most bytes zstd may write for ``size`` bytes of input, frame header and checksum included
    (``ZSTD_COMPRESSBOUND`` of zstd.h); a frame larger than this is not what a compressor wrote."""
    small = ((128 << 10) - size) >> 11 if size < (128 << 10) else 0
    return size + (size >> 8) + small


@dataclass
class Manifest:
    version: int
    arch: str
    channel: str
    created: str
    expires: str
    min_vigil_version: str
    builder_version: str
    payload: PayloadEntry
    components: list[ComponentEntry]
    files: list[FileEntry]
    format: str = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["files"] = sorted(doc["files"], key=lambda f: f["path"])
        doc["components"] = sorted(doc["components"], key=lambda c: c["name"])
        return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False).encode() + b"\n"

    @property
    def created_at(self) -> datetime:
        return parse_time(self.created, "created")

    @property
    def expires_at(self) -> datetime:
        return parse_time(self.expires, "expires")

    def files_by_path(self) -> dict[str, FileEntry]:
        return {f.path: f for f in self.files}

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str, name: str) -> datetime:
    try:
        moment = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise BundleRejected(
            "manifest.json", f"field '{name}' is not a UTC time like 2026-01-31T12:00:00Z"
        ) from None
    return moment.replace(tzinfo=UTC)


def parse_version(value: str) -> tuple[int, ...]:
    """A dotted numeric version ("0.1.0") as a tuple; pre-release tails are not used by vigil."""
    if not _VERSION.match(value):
        raise ValueError(value)
    return tuple(int(p) for p in value.split("."))


class _Fields:
    """Typed access to one JSON object, each failure naming the field."""

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            raise _bad(where, "must be an object")
        self.obj = obj
        self.where = where

    def _get(self, key: str) -> Any:
        if key not in self.obj:
            raise _bad(f"{self.where}.{key}" if self.where else key, "is missing")
        return self.obj[key]

    def str(self, key: str, *, pattern: re.Pattern[str] | None = None) -> str:
        value = self._get(key)
        name = f"{self.where}.{key}" if self.where else key
        if not isinstance(value, str):
            raise _bad(name, "must be a string")
        if pattern is not None and not pattern.match(value):
            raise _bad(name, f"has an invalid value {value[:80]!r}")
        return value

    # (the methods are named after the types they return: builtins.* inside the class body)
    def int(self, key: builtins.str, *, minimum: builtins.int = 0) -> builtins.int:
        value = self._get(key)
        name = f"{self.where}.{key}" if self.where else key
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise _bad(name, f"must be an integer >= {minimum}")
        return value

    def list(self, key: builtins.str) -> builtins.list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            raise _bad(f"{self.where}.{key}" if self.where else key, "must be a list")
        return value


def _bad(name: str, reason: str) -> BundleRejected:
    return BundleRejected("manifest.json", f"malformed: field '{name}' {reason}")


class StrictJSONError(ValueError):
    """Bytes that are JSON, but not JSON vigil takes from a signed document (the message says why)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:  # another reader would take the other value
            raise StrictJSONError(f"duplicate key {key[:80]!r}")
        obj[key] = value
    return obj


def _short_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise StrictJSONError(f"integer with {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not JSON")


def loads_strict(data: bytes) -> Any:
    """Parse signed JSON: UTF-8, no duplicate keys, no NaN or infinity, integers of at most
    ``MAX_INT_DIGITS`` digits, nesting at most ``MAX_JSON_DEPTH`` deep.

    Raises ``UnicodeDecodeError``, ``json.JSONDecodeError`` or :class:`StrictJSONError`.
    """
    text = data.decode("utf-8")
    try:
        doc = json.loads(
            text, object_pairs_hook=_unique_keys, parse_int=_short_int, parse_constant=_no_constant
        )
    except RecursionError:
        raise StrictJSONError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    raise StrictJSONError(f"nested deeper than {MAX_JSON_DEPTH} levels")
                stack.append((child, depth + 1))
    return doc


def parse_manifest(data: bytes) -> Manifest:
    """Parse and type-check manifest bytes; raise BundleRejected naming the first bad field."""
    try:
        doc = loads_strict(data)
    except UnicodeDecodeError:
        raise BundleRejected("manifest.json", "malformed: not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise BundleRejected(
            "manifest.json", f"malformed: not JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    except StrictJSONError as exc:
        raise BundleRejected("manifest.json", f"malformed: {exc}") from None
    top = _Fields(doc, "")
    fmt = top.str("format")
    if fmt in RETIRED_FORMATS:
        number = fmt.rpartition("/")[2]
        raise RetiredFormat(
            "manifest.json",
            f"format {number} is no longer accepted: {RETIRED_FORMATS[fmt]}, rebuild with this vigil",
        )
    if fmt != FORMAT:
        raise BundleRejected(
            "manifest.json", f"format {fmt[:80]!r} is not {FORMAT!r}; a newer vigil may be needed"
        )
    payload = _parse_payload(_Fields(top._get("payload"), "payload"))
    components = []
    for i, raw in enumerate(top.list("components")):
        c = _Fields(raw, f"components[{i}]")
        components.append(
            ComponentEntry(
                name=c.str("name"),
                version=c.str("version"),
                license=c.str("license"),
                kind=c.str("kind"),
                upstream_url=c.str("upstream_url"),
                upstream_sha256=c.str("upstream_sha256"),
            )
        )
    files = []
    for i, raw in enumerate(top.list("files")):
        f = _Fields(raw, f"files[{i}]")
        files.append(
            FileEntry(
                path=f.str("path"),
                size=f.int("size"),
                sha256=f.str("sha256", pattern=_SHA256),
                mode=f.int("mode"),
                component=f.str("component"),
                version=f.str("version"),
                license=f.str("license"),
                upstream_url=f.str("upstream_url"),
                upstream_sha256=f.str("upstream_sha256"),
            )
        )
    extra = doc.get("extra", {})
    if not isinstance(extra, dict):
        raise _bad("extra", "must be an object")
    manifest = Manifest(
        version=top.int("version", minimum=1),
        arch=top.str("arch"),
        channel=top.str("channel"),
        created=top.str("created"),
        expires=top.str("expires"),
        min_vigil_version=top.str("min_vigil_version", pattern=_VERSION),
        builder_version=top.str("builder_version"),
        payload=payload,
        components=components,
        files=files,
        format=fmt,
        extra=extra,
    )
    manifest.created_at, manifest.expires_at  # noqa: B018 - validates both times
    _check_paths(manifest)
    return manifest


def _parse_payload(pay: _Fields) -> PayloadEntry:
    """The payload entry and its frame table, each frame checked against zstd's bound."""
    frames = pay.list("frames")
    if not frames or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in frames):
        raise _bad("payload.frames", "must be a non-empty list of positive integers")
    digests = pay.list("frame_sha256")
    if len(digests) != len(frames) or not all(isinstance(d, str) and _SHA256.match(d) for d in digests):
        raise _bad("payload.frame_sha256", f"must list {len(frames)} SHA-256 digests, one per frame")
    contents = pay.list("frame_content_sizes")
    if len(contents) != len(frames) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in contents
    ):
        raise _bad("payload.frame_content_sizes", f"must list {len(frames)} positive integers, one per frame")
    payload = PayloadEntry(
        size=pay.int("size"),
        sha256=pay.str("sha256", pattern=_SHA256),
        frames=tuple(frames),
        frame_bytes=pay.int("frame_bytes", minimum=1),
        frame_sha256=tuple(digests),
        frame_content_sizes=tuple(contents),
        compression=pay.str("compression"),
    )
    if payload.compression != "zstd":
        raise _bad("payload.compression", f"is {payload.compression!r}, only 'zstd' is read")
    if sum(payload.frames) != payload.size:
        raise _bad(
            "payload.frames", f"add up to {sum(payload.frames)} bytes, not the payload's {payload.size}"
        )
    if payload.frame_bytes > MAX_FRAME_BYTES:
        raise _bad("payload.frame_bytes", f"is larger than {MAX_FRAME_BYTES}")
    last = len(frames) - 1
    for i, (size, content) in enumerate(zip(payload.frames, payload.frame_content_sizes, strict=True)):
        if content > payload.frame_bytes:
            raise BundleRejected(
                "manifest.json",
                f"malformed: payload.tar.zst frame {i} holds {content} bytes, "
                f"more than {payload.frame_bytes} (payload.frame_bytes)",
            )
        if i < last and content != payload.frame_bytes:
            raise BundleRejected(
                "manifest.json",
                f"malformed: payload.tar.zst frame {i} holds {content} bytes; every frame but the "
                f"last holds {payload.frame_bytes} (payload.frame_bytes)",
            )
        if size > zstd_bound(content):
            raise BundleRejected(
                "manifest.json",
                f"malformed: payload.tar.zst frame {i} is {size} bytes compressed, more than zstd's "
                f"bound {zstd_bound(content)} for its {content} bytes",
            )
    return payload


def check_member_name(name: str) -> str | None:
    """Why ``name`` may not appear in a payload, or None when it is a plain relative path."""
    if not name:
        return "empty name"
    if name.startswith("/"):
        return "absolute path"
    if "\\" in name or "\x00" in name:
        return "backslash or NUL in name"
    if _CONTROL.search(name):
        return "control character in name"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "name is not valid UTF-8"
    if size > MAX_PATH_BYTES:
        return f"path longer than {MAX_PATH_BYTES} bytes"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in path"
    if any(p in ("", ".") for p in parts):
        return "non-normal path (empty or '.' component)"
    if any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in parts):
        return f"path component longer than {MAX_NAME_BYTES} bytes"
    return None


def _check_paths(manifest: Manifest) -> None:
    seen: set[str] = set()
    for entry in manifest.files:
        problem = check_member_name(entry.path)
        if problem:
            raise BundleRejected(f"manifest.json: {entry.path[:120]}", problem)
        if entry.path in seen:
            raise BundleRejected(f"manifest.json: {entry.path}", "listed twice")
        if entry.mode not in FILE_MODES:
            raise BundleRejected(
                f"manifest.json: {entry.path}", f"mode {entry.mode:04o} is not allowed (only 0644 and 0755)"
            )
        seen.add(entry.path)
    # a path that is a file and also the directory of another cannot be unpacked: in the order of
    # their components, whatever lies under a path directly follows it
    ordered = sorted(manifest.files, key=lambda f: f.path.split("/"))
    for here, after in zip(ordered, ordered[1:], strict=False):
        if after.path.startswith(here.path + "/"):
            raise BundleRejected(
                f"manifest.json: {here.path}",
                f"is both a file and a directory ({after.path[:120]!r} is under it)",
            )
