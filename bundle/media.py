"""Split a bundle into parts that fit removable media, and join them back.

``split`` writes ``NAME.part001 …`` and ``NAME.parts.json``, an index of every part's size
and SHA-256 (and the whole bundle's), signed like a trust root with one or more release
keys. ``join`` checks the index's signatures against the trust root, then each part in
order while copying it into a staging file, and renames the result into place only when
every part and the whole matched. A missing, reordered or altered part is named.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vigil.basics.atomic import atomic_writer, fsync_dir, write_file_atomic
from vigil.basics.bounded import load_json_file
from vigil.basics.canonical import canonical_json
from vigil.bundle.errors import BundleError, BundleRejected, SignatureError, TamperedFile
from vigil.bundle.signing import SigningKey
from vigil.bundle.trust import TrustRoot

INDEX_TYPE = "vigil-bundle-parts"
CHUNK = 1 << 20
_SIZE = re.compile(r"^(\d+)([KMGT]?)(i?B)?$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``4G``, ``700M``, ``512K`` or a byte count; binary units (4G = 4 GiB)."""
    m = _SIZE.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise BundleError(f"size {text!r}", "must be a positive number with an optional K, M, G or T suffix")
    return int(m.group(1)) << 10 * " KMGT".index((m.group(2) or " ").upper())


def part_name(bundle_name: str, index: int) -> str:
    return f"{bundle_name}.part{index:03d}"


def split_bundle(bundle: Path, part_size: int, out_dir: Path, keys: Sequence[SigningKey]) -> Path:
    """Write the parts and their signed index into ``out_dir``; return the index's path."""
    if not keys:
        raise BundleError("bundle split", "at least one --key is needed to sign the parts index")
    if part_size < 1:
        raise BundleError(f"size {part_size}", "must be positive")
    try:
        total = bundle.stat().st_size
    except OSError as exc:
        raise BundleError(str(bundle), f"cannot read: {exc.strerror}") from None
    count = max(1, -(-total // part_size))
    if count > 999:
        raise BundleError(str(bundle), f"would need {count} parts; use a larger --size")
    out_dir.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    parts: list[dict[str, Any]] = []
    with open(bundle, "rb") as src:
        for i in range(1, count + 1):
            name = part_name(bundle.name, i)
            h = hashlib.sha256()
            size = 0
            with atomic_writer(out_dir / name) as dst:
                while size < part_size:
                    data = src.read(min(CHUNK, part_size - size))
                    if not data:
                        break
                    h.update(data)
                    whole.update(data)
                    dst.write(data)
                    size += len(data)
            parts.append({"index": i, "name": name, "size": size, "sha256": h.hexdigest()})
    signed = {
        "type": INDEX_TYPE,
        "bundle": bundle.name,
        "size": total,
        "sha256": whole.hexdigest(),
        "part_size": part_size,
        "parts": parts,
    }
    message = canonical_json(signed)
    sigs = [{"key_id": k.id_hex, "sig": base64.b64encode(k.sign_raw(message)).decode()} for k in keys]
    index = out_dir / f"{bundle.name}.parts.json"
    write_file_atomic(
        index, json.dumps({"signed": signed, "signatures": sigs}, indent=1, sort_keys=True).encode()
    )
    fsync_dir(out_dir)
    return index


def _load_index(index: Path, trust: TrustRoot) -> dict[str, Any]:
    where = index.name
    try:
        # the courier's file: bounded before it is parsed (a signed index is a few KiB)
        doc = load_json_file(index, error=BundleRejected)
    except BundleRejected as exc:
        raise BundleRejected(where, f"parts index: {exc.reason}") from None
    except ValueError:  # UnicodeDecodeError, json.JSONDecodeError
        raise BundleRejected(where, "parts index is not JSON") from None
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("signed"), dict)
        or not isinstance(doc.get("signatures"), list)
    ):
        raise BundleRejected(where, "parts index lacks 'signed' and 'signatures'")
    signed: dict[str, Any] = doc["signed"]
    sigs = [s for s in doc["signatures"] if isinstance(s, dict)]
    good = trust.count_valid(canonical_json(signed), sigs)
    if len(good) < trust.threshold:
        raise SignatureError(
            where, f"{len(good)} valid signature(s) from trusted keys, threshold is {trust.threshold}"
        )
    if signed.get("type") != INDEX_TYPE:
        raise BundleRejected(where, f"type is {signed.get('type')!r}, not {INDEX_TYPE!r}")
    parts = signed.get("parts")
    name = signed.get("bundle")
    if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
        raise BundleRejected(where, "bundle name is not a plain file name")
    if not isinstance(parts, list) or not parts:
        raise BundleRejected(where, "lists no parts")
    for i, p in enumerate(parts, 1):
        if not (
            isinstance(p, dict)
            and p.get("index") == i
            and p.get("name") == part_name(name, i)
            and isinstance(p.get("size"), int)
            and isinstance(p.get("sha256"), str)
        ):
            raise BundleRejected(where, f"entry {i} of the parts list is malformed")
    return signed


def join_parts(index: Path, trust: TrustRoot, out: Path | None = None) -> Path:
    """Check and concatenate the parts named in ``index``; return the joined bundle's path."""
    signed = _load_index(index, trust)
    folder = index.parent
    target = out or folder / signed["bundle"]
    if target.exists():
        raise BundleError(str(target), "already exists; refusing to overwrite")
    by_hash = {p["sha256"]: p for p in signed["parts"]}
    for p in signed["parts"]:
        if not (folder / p["name"]).is_file():
            raise TamperedFile(p["name"], f"part {p['index']} of {len(signed['parts'])} is missing")
    whole = hashlib.sha256()
    with atomic_writer(target) as dst:
        for p in signed["parts"]:
            h = hashlib.sha256()
            size = 0
            with open(folder / p["name"], "rb") as src:
                while True:
                    data = src.read(CHUNK)
                    if not data:
                        break
                    size += len(data)
                    if size > p["size"]:
                        break
                    h.update(data)
                    whole.update(data)
                    dst.write(data)
            digest = h.hexdigest()
            if size == p["size"] and digest == p["sha256"]:
                continue
            other = by_hash.get(digest)
            if other is not None and other is not p:
                raise TamperedFile(
                    p["name"], f"holds the bytes of part {other['index']}: parts are out of order"
                )
            if size != p["size"]:
                raise TamperedFile(
                    p["name"], f"is {size}{'+' if size > p['size'] else ''} bytes, index says {p['size']}"
                )
            raise TamperedFile(
                p["name"], f"altered: sha256 {digest[:12]}… differs from the index's {p['sha256'][:12]}…"
            )
        if whole.hexdigest() != signed["sha256"]:
            raise TamperedFile(signed["bundle"], "joined bytes differ from the index's sha256")
    return target
