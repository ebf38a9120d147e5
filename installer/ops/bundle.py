"""Bundles: lock a channel, build, verify, inspect, import, split for media and join."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.bundle.inspect import inspect_bundle as _inspect
from vigil.bundle.media import join_parts, parse_size
from vigil.bundle.media import split_bundle as _split
from vigil.bundle.signing import SigningKey
from vigil.bundle.store import BundleStore, ImportResult
from vigil.bundle.verify import VerifiedHead
from vigil.bundle.verify import verify_bundle as _verify
from vigil.installer import __version__
from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.keys import load_trust, trust_for_bundle


def lock_channel(inv: Invocation, channel: str, catalog_dir: Path | None = None) -> Path:
    """``bundle.lock``: resolve CHANNEL's catalog into exact URLs and upstream checksums."""
    from vigil.bundle.catalog import CATALOG_DIR, catalog_path
    from vigil.bundle.catalog import lock_channel as _lock

    path = catalog_path(channel, catalog_dir or CATALOG_DIR)
    inv.object = str(path)
    lock = _lock(path)
    inv.details.update(channel=channel, lock=str(lock))
    return lock


@dataclass(frozen=True)
class Built:
    path: Path
    #: the bundle's summary, as :func:`inspect_bundle` gives it
    info: dict[str, Any]
    signers: list[str]


def build_bundle(
    inv: Invocation,
    *,
    channel: str,
    version: int,
    keys: Sequence[SigningKey],
    out_dir: Path,
    valid_days: int = 365,
    min_vigil_version: str | None = None,
    catalog_dir: Path | None = None,
    cache_dir: Path | None = None,
) -> Built:
    """``bundle.build``: fetch CHANNEL's locked artifacts, stage, sign with every key, write the bundle."""
    from vigil.bundle.catalog import CATALOG_DIR
    from vigil.bundle.channel import build_channel

    inv.object = f"channel {channel} version {version}"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = build_channel(
        channel,
        version=version,
        keys=keys,
        out_dir=out_dir,
        builder_version=__version__,
        min_vigil_version=min_vigil_version,
        catalog_dir=catalog_dir or CATALOG_DIR,
        cache_dir=cache_dir,
        valid_days=valid_days,
        progress=inv.byte_progress(f"build {channel}"),
        log=inv.step,
    )
    info = _inspect(path)
    signers = [k.id_hex for k in keys]
    inv.object = str(path)
    inv.details.update(
        channel=channel,
        version=version,
        signers=signers,
        payload_sha256=info["payload"]["sha256"],
        files=info["files"],
    )
    return Built(path, info, signers)


def verified_message(head: VerifiedHead, *, deep: bool) -> str:
    """What ``bundle verify`` says of a verified bundle (after ``OK: <name>: ``), in every front end."""
    m = head.manifest
    how = (
        "every file decompressed and hashed"
        if deep
        else f"payload sha256 over its {m.payload.size} bytes as stored; --deep checks each file"
    )
    return (
        f"version {m.version}, {len(m.files)} files, {m.total_size} bytes verified ({how}); "
        f"signed by {', '.join(head.signers)}; expires {m.expires}"
    )


def verify_bundle(
    inv: Invocation, path: Path, trust: Path | None = None, *, deep: bool = False
) -> VerifiedHead:
    """``bundle.verify``: signatures, threshold, expiry, then every byte; nothing is written.

    Every byte is authenticated either way: by default through the payload's signed SHA-256 over
    its bytes as stored (disk speed); ``deep`` also decompresses it and checks every member and
    every file's hash, as an import does while it unpacks."""
    inv.object = str(path)
    used = trust_for_bundle(inv.home, trust, inv.details)
    head = _verify(
        path,
        used.root,
        vigil_version=__version__,
        progress=inv.byte_progress(f"verify {path.name}"),
        deep=deep,
    )
    inv.details.update(
        version=head.manifest.version,
        manifest_sha256=head.manifest_sha256,
        signers=head.signers,
        deep=deep,
    )
    return head


def inspect_bundle(inv: Invocation, path: Path) -> dict[str, Any]:
    """``bundle.inspect``: what a bundle holds, read without verifying."""
    inv.object = str(path)
    info = _inspect(path)
    inv.details.update(version=info["version"])
    return info


def import_bundle(
    inv: Invocation, path: Path, trust: Path | None = None, *, allow_downgrade: bool = False
) -> ImportResult:
    """``bundle.import``: verify while unpacking into the store's staging, then rename into place.

    Only the installed root (or, with none installed, the ``--trust`` given) raises the store's
    highest version; a signed successor given with ``--trust`` verifies but does not.
    """
    inv.object = str(path)
    used = trust_for_bundle(inv.home, trust, inv.details)
    store = BundleStore(inv.home)
    stale = store.clean_staging()
    if stale:
        inv.details.update(stale_staging_removed=stale)
    inv.details.update(allow_downgrade=allow_downgrade, highest_before=store.highest())
    result = store.import_bundle(
        path,
        used.root,
        vigil_version=__version__,
        allow_downgrade=allow_downgrade,
        raise_highest=used.raises_highest,
        progress=inv.byte_progress(f"import {path.name}"),
    )
    if result.stale_staging:
        inv.details.update(stale_staging_removed=sorted({*stale, *result.stale_staging}))
    inv.details.update(
        version=result.version,
        manifest_sha256=result.manifest_sha256,
        signers=result.signers,
        downgrade=result.downgrade,
        already_imported=result.already_imported,
        highest_raised=result.highest_raised,
    )
    return result


@dataclass(frozen=True)
class Split:
    index: Path
    parts: int
    part_size: int


def split_bundle(
    inv: Invocation, path: Path, size: str, keys: Sequence[SigningKey], out_dir: Path | None = None
) -> Split:
    """``bundle.split``: parts of at most SIZE (``4G``, ``700M``) and their signed index."""
    inv.object = str(path)
    part_size = parse_size(size)
    index = _split(path, part_size, out_dir or path.parent, keys)
    parts = len(json.loads(index.read_text())["signed"]["parts"])
    inv.details.update(parts=parts, part_size=part_size, index=str(index), signers=[k.id_hex for k in keys])
    return Split(index, parts, part_size)


def join_bundle(inv: Invocation, index: Path, trust: Path | None = None, out: Path | None = None) -> Path:
    """``bundle.join``: the index checked against the trust root, each part in order, then joined."""
    inv.object = str(index)
    _, root = load_trust(inv.home, trust)
    joined = join_parts(index, root, out)
    inv.details.update(bundle=str(joined))
    return joined
