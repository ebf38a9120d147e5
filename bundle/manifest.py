"""The bundle manifest: what a bundle holds, byte for byte, and for how long it is good.

The manifest is JSON with sorted keys (so the same inputs give the same bytes). It is the
only thing the signatures cover; it pins the compressed payload's size and SHA-256 and
every payload file's path, size, mode and SHA-256, so every byte of a bundle is covered.
"""

from __future__ import annotations

import builtins
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from vigil.bundle.errors import BundleRejected

FORMAT = "vigil-bundle/1"
MAX_MANIFEST_BYTES = 64 << 20
MAX_FRAME_BYTES = 64 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_VERSION = re.compile(r"^\d+(\.\d+)*$")


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
    size: int
    sha256: str
    frames: tuple[int, ...]  # compressed size of each zstd frame, in order
    frame_bytes: int  # the most uncompressed bytes one frame may hold
    compression: str = "zstd"


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


def parse_manifest(data: bytes) -> Manifest:
    """Parse and type-check manifest bytes; raise BundleRejected naming the first bad field."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BundleRejected("manifest.json", "malformed: not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise BundleRejected(
            "manifest.json", f"malformed: not JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    top = _Fields(doc, "")
    fmt = top.str("format")
    if fmt != FORMAT:
        raise BundleRejected(
            "manifest.json", f"format {fmt!r} is not {FORMAT!r}; a newer vigil may be needed"
        )
    pay = _Fields(top._get("payload"), "payload")
    frames = pay.list("frames")
    if not frames or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in frames):
        raise _bad("payload.frames", "must be a non-empty list of positive integers")
    payload = PayloadEntry(
        size=pay.int("size"),
        sha256=pay.str("sha256", pattern=_SHA256),
        frames=tuple(frames),
        frame_bytes=pay.int("frame_bytes", minimum=1),
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


def check_member_name(name: str) -> str | None:
    """Why ``name`` may not appear in a payload, or None when it is a plain relative path."""
    if not name:
        return "empty name"
    if name.startswith("/"):
        return "absolute path"
    if "\\" in name or "\x00" in name:
        return "backslash or NUL in name"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in path"
    if any(p in ("", ".") for p in parts):
        return "non-normal path (empty or '.' component)"
    return None


def _check_paths(manifest: Manifest) -> None:
    seen: set[str] = set()
    for entry in manifest.files:
        problem = check_member_name(entry.path)
        if problem:
            raise BundleRejected(f"manifest.json: {entry.path[:120]}", problem)
        if entry.path in seen:
            raise BundleRejected(f"manifest.json: {entry.path}", "listed twice")
        if entry.mode & ~0o777:
            raise BundleRejected(f"manifest.json: {entry.path}", f"mode {entry.mode:o} has special bits")
        seen.add(entry.path)
