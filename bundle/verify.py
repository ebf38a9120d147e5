"""Verify a bundle against a trust root, streaming, before any of its bytes are used.

The steps, in order (each raises with the object and the reason, nothing returns False):

1. layout: manifest first, signatures, payload, the end of the archive and nothing after;
2. signatures: every signature by a trusted key must verify; at least ``threshold`` do;
3. manifest: in this format (an older one is refused by name), well-formed, with the types it
   must have; its frame table consistent: each frame's content size at most ``frame_bytes``
   (exactly that but for the last), its compressed size within zstd's bound for it;
4. expiry: the bundle's ``expires`` is still in the future;
5. version: this vigil is at least the manifest's ``min_vigil_version``;
6. (import only) rollback: the bundle is newer than any imported before;
7. payload: its size as signed; cut into the signed frames, each frame (a) hashed and
   compared with its signed SHA-256 before zstd sees it, (b) its zstd header declaring the
   signed content size, (c) decompressed to exactly that size with nothing after the zstd
   frame; (d) each member a plain relative regular file named in the manifest, once, with the
   signed size and mode (sizes are hard caps while reading); (e) after the tar stream only its
   zero end-of-archive blocks and padding to a record, where the frames end;
8. each file's SHA-256 and the whole payload's SHA-256 as signed; no file missing.

A shallow verify (``vigil bundle verify`` without ``--deep``) does 1-6 and, of 7-8, the payload's
size and SHA-256 over its compressed bytes as stored: the signature covers that digest, so every
byte is authenticated without decompressing. Import always does 7-8 whole while it unpacks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from vigil.bundle.container import BundleReader
from vigil.bundle.errors import BundleRejected, SignatureError
from vigil.bundle.manifest import Manifest, RetiredFormat, parse_manifest, parse_version
from vigil.bundle.payload import Progress, verify_payload, verify_payload_bytes
from vigil.bundle.signing import Minisig
from vigil.bundle.trust import TrustRoot


@dataclass
class VerifiedHead:
    """What steps 1-5 established; the payload is still unread."""

    path: Path
    manifest: Manifest
    manifest_bytes: bytes
    signatures: dict[str, bytes]
    signers: list[str]
    manifest_sha256: str = field(default="")

    def __post_init__(self) -> None:
        self.manifest_sha256 = hashlib.sha256(self.manifest_bytes).hexdigest()


def verify_head(
    reader: BundleReader, trust: TrustRoot, *, now: datetime | None = None, vigil_version: str
) -> VerifiedHead:
    name = reader.name
    # 1 layout
    reader.read_head()
    reader.check_tail()
    # 2 signatures against the trust root, threshold
    sigs = []
    for key_id, raw in sorted(reader.signatures.items()):
        sig = Minisig.parse(raw, where=f"{name}: signatures/{key_id}.minisig")
        if sig.key_id_hex != key_id:
            raise SignatureError(
                f"{name}: signatures/{key_id}.minisig", f"holds a signature by key {sig.key_id_hex}"
            )
        sigs.append(sig)
    signers = trust.verify_minisigs(reader.manifest_bytes, sigs, what=f"{name}: manifest.json")
    # 3 manifest
    try:
        manifest = parse_manifest(reader.manifest_bytes)
    except BundleRejected as exc:
        raise in_bundle(name, exc) from None
    # 4 expiry
    moment = now or datetime.now(UTC)
    if manifest.expires_at <= moment:
        raise BundleRejected(name, f"expired on {manifest.expires}; build or carry in a newer bundle")
    if manifest.created_at > manifest.expires_at:
        raise BundleRejected(name, "created after it expires")
    # 5 minimum vigil version
    try:
        mine = parse_version(vigil_version)
    except ValueError:
        mine = (0,)
    if parse_version(manifest.min_vigil_version) > mine:
        raise BundleRejected(
            name, f"needs vigil >= {manifest.min_vigil_version}, this is {vigil_version}; upgrade vigil first"
        )
    assert reader.payload is not None  # noqa: S101 - narrows the type
    if reader.payload.size != manifest.payload.size:
        raise BundleRejected(
            f"{name}: payload.tar.zst",
            f"size lie: {reader.payload.size} bytes in the bundle, manifest says {manifest.payload.size}",
        )
    return VerifiedHead(
        path=reader.path,
        manifest=manifest,
        manifest_bytes=reader.manifest_bytes,
        signatures=dict(reader.signatures),
        signers=signers,
    )


def verify_bundle(
    path: Path,
    trust: TrustRoot,
    *,
    vigil_version: str,
    now: datetime | None = None,
    extract_to: Path | None = None,
    before_payload: Callable[[VerifiedHead], None] | None = None,
    progress: Progress | None = None,
    deep: bool = True,
) -> VerifiedHead:
    """Steps 1-8; ``before_payload`` runs between 5 and 7 (the store's rollback check).

    With ``deep=False`` (and nothing to extract), steps 7-8 are the payload's signed size and
    SHA-256 over its bytes as stored: every byte authenticated at disk speed, nothing decompressed.
    The members' own checks (7a-7e, each file's hash) then run where the payload is unpacked.
    """
    with BundleReader(path) as reader:
        head = verify_head(reader, trust, now=now, vigil_version=vigil_version)
        if before_payload is not None:
            before_payload(head)
        if deep or extract_to is not None:
            verify_payload(
                reader.name, head.manifest, reader.payload_chunks(), extract_to=extract_to, progress=progress
            )
        else:
            verify_payload_bytes(reader.name, head.manifest, reader.payload_chunks(), progress=progress)
    return head


def read_unverified(path: Path) -> tuple[Manifest, dict[str, bytes], bytes]:
    """Manifest and signatures without checking them (for ``inspect``; says so in its output)."""
    with BundleReader(path) as reader:
        reader.read_head()
        try:
            manifest = parse_manifest(reader.manifest_bytes)
        except BundleRejected as exc:
            raise in_bundle(reader.name, exc) from None
        return manifest, dict(reader.signatures), reader.manifest_bytes


def in_bundle(name: str, exc: BundleRejected) -> BundleRejected:
    """A manifest error named after the bundle ``name``; a retired format names the bundle alone
    (it is the whole bundle that must be rebuilt)."""
    if isinstance(exc, RetiredFormat):
        return RetiredFormat(name, exc.reason)
    return BundleRejected(f"{name}: {exc.obj}", exc.reason)
