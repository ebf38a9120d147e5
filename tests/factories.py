"""Factories for tests: keys, trust roots, and bundles — honest ones and crafted hostile ones.

``craft_bundle`` writes a real, correctly signed bundle whose payload holds exactly the tar
members given, with a manifest derived from them and then edited by the test. Hostile cases
are made by giving it members or manifest edits that a real build would never produce, so
each rejection is the verifier's doing, not a broken signature's.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.bundle.container import write_bundle
from vigil.bundle.manifest import FORMAT, format_time
from vigil.bundle.payload import FRAME_BYTES, compress_frames, frame_table
from vigil.bundle.signing import PublicKey, SigningKey, generate_keypair, load_public_key, load_signing_key
from vigil.bundle.trust import TrustRoot, new_root, write_root

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


@dataclass
class KeyPair:
    key: SigningKey
    pub: PublicKey
    key_path: Path
    pub_path: Path


def make_key(directory: Path, name: str, passphrase: bytes | None = None) -> KeyPair:
    directory.mkdir(parents=True, exist_ok=True)
    key_path, pub_path = generate_keypair(directory / name, passphrase)
    return KeyPair(load_signing_key(key_path, passphrase), load_public_key(pub_path), key_path, pub_path)


def make_trust(path: Path, keys: list[KeyPair], threshold: int = 1, version: int = 1) -> TrustRoot:
    root = new_root([k.pub for k in keys], threshold, version)
    write_root(root, path)
    return root


@dataclass
class Member:
    """One tar member of a crafted payload."""

    name: str
    data: bytes = b""
    mode: int = 0o644
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    size: int | None = None  # a header size that lies, when set

    def info(self, mtime: int) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(self.name)
        ti.type = self.type
        ti.mode = self.mode
        ti.mtime = mtime
        ti.linkname = self.linkname
        ti.size = len(self.data) if self.type == tarfile.REGTYPE else 0
        return ti


def default_members() -> list[Member]:
    return [
        Member("components/demo/bin/demo", b"#!/bin/sh\necho demo\n" * 50, 0o755),
        Member("components/demo/share/readme.txt", b"a demo component\n" * 10),
        Member("wheels/demo-1.0-py3-none-any.whl", os.urandom(4096)),
    ]


def _file_entry(m: Member) -> dict[str, Any]:
    return {
        "path": m.name,
        "size": len(m.data),
        "sha256": hashlib.sha256(m.data).hexdigest(),
        "mode": m.mode,
        "component": m.name.split("/")[1] if m.name.startswith("components/") else "wheels",
        "version": "1.0",
        "license": "Apache-2.0",
        "upstream_url": "https://example.invalid/demo-1.0.tar.gz",
        "upstream_sha256": "0" * 64,
    }


def _payload(
    members: list[Member], mtime: int, tar_edit: Callable[[bytes], bytes] | None = None
) -> tuple[bytes, tuple[int, ...]]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            ti = m.info(mtime)
            if m.type == tarfile.REGTYPE:
                tar.addfile(ti, io.BytesIO(m.data))
            else:
                tar.addfile(ti)
    data = raw.getvalue()
    for m in members:  # make a header lie about its size, keeping its checksum valid
        if m.size is not None:
            data = _rewrite_size(data, m.name, m.size)
    if tar_edit is not None:
        data = tar_edit(data)
    return compress_frames(data)


def _rewrite_size(tar_bytes: bytes, name: str, size: int) -> bytes:
    buf = bytearray(tar_bytes)
    off = 0
    while off < len(buf):
        header = buf[off : off + 512]
        if header[:100].split(b"\0", 1)[0] == name.encode():
            header[124:136] = f"{size:011o}\0".encode()
            header[148:156] = b" " * 8
            chk = sum(header)
            header[148:156] = f"{chk:06o}\0 ".encode()
            buf[off : off + 512] = header
            return bytes(buf)
        real = int(header[124:136].rstrip(b"\0 ") or b"0", 8)
        off += 512 + real + (-real % 512)
    raise AssertionError(f"{name} not found in crafted tar")


@dataclass
class Crafted:
    path: Path
    manifest: dict[str, Any]
    manifest_bytes: bytes
    signatures: dict[str, bytes] = field(default_factory=dict)


def craft_bundle(
    out_dir: Path,
    keys: list[KeyPair],
    *,
    members: list[Member] | None = None,
    manifest_members: list[Member] | None = None,
    version: int = 1,
    created: datetime = NOW,
    valid_days: int = 365,
    edit: Callable[[dict[str, Any]], None] | None = None,
    raw_manifest: bytes | None = None,
    name: str | None = None,
    tar_edit: Callable[[bytes], bytes] | None = None,
    frames_edit: Callable[[list[bytes]], list[bytes]] | None = None,
) -> Crafted:
    """A signed bundle whose payload is ``members`` and whose manifest lists ``manifest_members``.

    ``tar_edit`` rewrites the uncompressed tar stream and ``frames_edit`` the compressed frames
    before the manifest's frame table is made from them, so a hostile frame is signed.
    """
    members = default_members() if members is None else members
    listed = members if manifest_members is None else manifest_members
    mtime = int(created.timestamp())
    payload, frames = _payload(members, mtime, tar_edit)
    pieces = [payload[sum(frames[:i]) : sum(frames[: i + 1])] for i in range(len(frames))]
    if frames_edit is not None:
        pieces = frames_edit(pieces)
    payload, table = b"".join(pieces), frame_table(pieces)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": version,
        "arch": "amd64",
        "channel": "test",
        "created": format_time(created),
        "expires": format_time(created + timedelta(days=valid_days)),
        "min_vigil_version": "0.1.0",
        "builder_version": "0.1.0",
        "payload": {
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
            "compression": "zstd",
            "frame_bytes": FRAME_BYTES,
            **table,
        },
        "components": [
            {
                "name": "demo",
                "version": "1.0",
                "license": "Apache-2.0",
                "kind": "file",
                "upstream_url": "https://example.invalid/demo-1.0.tar.gz",
                "upstream_sha256": "0" * 64,
            }
        ],
        "files": [_file_entry(m) for m in listed if m.type == tarfile.REGTYPE],
        "extra": {},
    }
    if edit is not None:
        edit(manifest)
    manifest_bytes = (
        raw_manifest
        if raw_manifest is not None
        else (json.dumps(manifest, sort_keys=True, indent=1).encode() + b"\n")
    )
    sigs = {
        k.key.id_hex: k.key.sign_minisig(manifest_bytes, trusted_comment=f"test bundle v{version}")
        .to_text()
        .encode()
        for k in keys
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (name or f"vigil-{version}-amd64.bundle")
    payload_path = out_dir / f".payload-{version}.tmp"
    payload_path.write_bytes(payload)
    write_bundle(path, manifest=manifest_bytes, signatures=sigs, payload=payload_path, mtime=mtime)
    payload_path.unlink()
    return Crafted(path, manifest, manifest_bytes, sigs)


def rewrite_container(
    src: Path, dst: Path, *, manifest: bytes | None = None, signatures: dict[str, bytes] | None = None
) -> None:
    """Copy a bundle, replacing its manifest and/or signatures (keeping the payload)."""
    from vigil.bundle.container import BundleReader

    with BundleReader(src) as r:
        r.read_head()
        payload = b"".join(r.payload_chunks())
        old_manifest, old_sigs = r.manifest_bytes, r.signatures
    tmp = dst.with_name(dst.name + ".payload")
    tmp.write_bytes(payload)
    write_bundle(
        dst,
        manifest=old_manifest if manifest is None else manifest,
        signatures=old_sigs if signatures is None else signatures,
        payload=tmp,
        mtime=int(NOW.timestamp()),
    )
    tmp.unlink()


def payload_offset(path: Path) -> tuple[int, int]:
    from vigil.bundle.container import BundleReader

    with BundleReader(path) as r:
        r.read_head()
        assert r.payload is not None
        return r.payload.offset, r.payload.size


def tree_snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content digest (dirs as 'dir'), for before/after checks."""
    snap: dict[str, str] = {}
    if not root.exists():
        return snap
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        snap[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return snap


def fixed_members() -> list[Member]:
    """Like :func:`default_members`, but the same bytes on every call (so two crafts share a payload)."""
    return [
        Member("components/demo/bin/demo", b"#!/bin/sh\necho demo\n" * 50, 0o755),
        Member("components/demo/share/readme.txt", b"a demo component\n" * 10),
        Member("wheels/demo-1.0-py3-none-any.whl", hashlib.sha256(b"wheel").digest() * 128),
    ]


def craft_edited_bytes(
    out_dir: Path,
    keys: list[KeyPair],
    edit_bytes: Callable[[bytes], bytes],
    *,
    version: int = 2,
    members: list[Member] | None = None,
) -> Crafted:
    """A signed bundle whose manifest is an honest one with its *bytes* edited (for JSON tricks that
    ``json.dumps`` cannot write: duplicate keys, deep nesting, huge integers)."""
    members = fixed_members() if members is None else members
    draft = craft_bundle(out_dir / ".draft", keys, members=members, version=version)
    raw = edit_bytes(draft.manifest_bytes)
    assert raw != draft.manifest_bytes, "the edit changed nothing"
    return craft_bundle(out_dir, keys, members=members, version=version, raw_manifest=raw)


@dataclass
class StoreEnv:
    """A state root with a trust root installed by use: one good bundle (version 1) imported with it."""

    tmp: Path
    home: Path
    trust: Path
    key: KeyPair
    #: a key the trust root does not name
    other: KeyPair
    out: Path


def make_store_env(
    tmp_path: Path, home_env: Callable[[str, str], None], *, members: list[Member] | None = None
) -> StoreEnv:
    """``home_env`` sets an environment variable for the test (``monkeypatch.setenv``)."""
    from vigil.installer.cli import main

    home = tmp_path / "home"
    home_env("VIGIL_HOME", str(home))
    key = make_key(tmp_path / "keys", "release")
    other = make_key(tmp_path / "keys", "stranger")
    trust = tmp_path / "trust.json"
    make_trust(trust, [key], threshold=1)
    out = tmp_path / "out"
    good = craft_bundle(out, [key], version=1, members=members)
    assert main(["bundle", "import", str(good.path), "--trust", str(trust)]) == 0
    return StoreEnv(tmp_path, home, trust, key, other, out)


@dataclass(frozen=True)
class StagedFile:
    """One file as the builder stages it (a ``PayloadFile``), for builds of hand-made trees."""

    path: str
    source: Path
    mode: int = 0o644
    component: str = "demo"
    version: str = "1.0"
    license: str = "Apache-2.0"
    upstream_url: str = "https://example.invalid/demo-1.0.tar.gz"
    upstream_sha256: str = "ab" * 32
