"""The trust root: which keys may sign bundles, and how many of them must.

A trust root is a JSON document::

    {"signed": {"type": "vigil-trust-root", "version": 1, "threshold": 2,
                "keys": [{"id": "4F1C…", "public": "<minisign public key line>"}, …]},
     "signatures": [{"key_id": "4F1C…", "sig": "<base64 Ed25519 over canonical(signed)>"}]}

The first root of a site is installed by hand (``vigil trust init``, carried in on
media, checked out of band). Every later root — a key rotation — is accepted only
when it is signed by at least ``threshold`` keys of the root it replaces and its
version is higher (k-of-n, as TUF does for its root role).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.basics.atomic import write_file_atomic
from vigil.basics.canonical import canonical_json
from vigil.bundle.errors import KeyFileError, SignatureError, TrustError
from vigil.bundle.manifest import StrictJSONError, loads_strict
from vigil.bundle.signing import Minisig, PublicKey, SigningKey, key_id_hex

TRUST_TYPE = "vigil-trust-root"


@dataclass
class TrustRoot:
    version: int
    threshold: int
    keys: dict[str, PublicKey]
    signatures: list[dict[str, str]] = field(default_factory=list)

    def signed_part(self) -> dict[str, Any]:
        return {
            "type": TRUST_TYPE,
            "version": self.version,
            "threshold": self.threshold,
            "keys": [{"id": k, "public": self.keys[k].minisign_line()} for k in sorted(self.keys)],
        }

    def signed_bytes(self) -> bytes:
        return canonical_json(self.signed_part())

    def to_json(self) -> bytes:
        doc = {"signed": self.signed_part(), "signatures": sorted(self.signatures, key=lambda s: s["key_id"])}
        return json.dumps(doc, sort_keys=True, indent=2).encode() + b"\n"

    def sign(self, key: SigningKey) -> None:
        """Add (or replace) ``key``'s signature over this root."""
        sig = base64.b64encode(key.sign_raw(self.signed_bytes())).decode()
        self.signatures = [s for s in self.signatures if s["key_id"] != key.id_hex]
        self.signatures.append({"key_id": key.id_hex, "sig": sig})

    def count_valid(self, message: bytes, signatures: list[dict[str, str]]) -> set[str]:
        """Ids of this root's keys that made a valid signature over ``message``."""
        good: set[str] = set()
        for entry in signatures:
            key = self.keys.get(entry.get("key_id", ""))
            if key is None:
                continue
            try:
                raw = base64.b64decode(entry.get("sig", ""), validate=True)
            except (binascii.Error, ValueError):
                continue
            if key.verify_raw(message, raw):
                good.add(key.id_hex)
        return good

    def verify_minisigs(self, message: bytes, sigs: list[Minisig], *, what: str) -> list[str]:
        """Check bundle signatures against this root: 1 known keys, 2 each signature, 3 threshold.

        Returns the ids of the keys whose signatures verified; raises SignatureError otherwise.
        """
        if not sigs:
            raise SignatureError(what, "has no signatures")
        good: list[str] = []
        unknown: list[str] = []
        for sig in sigs:
            key = self.keys.get(sig.key_id_hex)
            if key is None:
                unknown.append(sig.key_id_hex)
                continue
            key.verify_minisig(message, sig, what=what)  # a bad signature by a trusted key is fatal
            if key.id_hex not in good:
                good.append(key.id_hex)
        if len(good) < self.threshold:
            detail = f"; signed by unknown key {', '.join(unknown)}" if unknown else ""
            raise SignatureError(
                what,
                f"{len(good)} valid signature(s) from trusted keys, threshold is {self.threshold}{detail}",
            )
        return good


def new_root(public_keys: list[PublicKey], threshold: int, version: int = 1) -> TrustRoot:
    keys = {k.id_hex: k for k in public_keys}
    if len(keys) != len(public_keys):
        raise TrustError("trust root", "the same key is listed twice")
    if not keys:
        raise TrustError("trust root", "needs at least one key")
    if not 1 <= threshold <= len(keys):
        raise TrustError(
            "trust root", f"threshold {threshold} must be between 1 and {len(keys)} (the key count)"
        )
    if version < 1:
        raise TrustError("trust root", f"version {version} must be 1 or higher")
    return TrustRoot(version=version, threshold=threshold, keys=keys)


def parse_root(data: bytes, *, where: str) -> TrustRoot:
    try:
        doc = loads_strict(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrustError(where, f"not JSON ({exc.__class__.__name__})") from None
    except StrictJSONError as exc:
        raise TrustError(where, f"malformed: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("signed"), dict):
        raise TrustError(where, "lacks a 'signed' object")
    signed = doc["signed"]
    if signed.get("type") != TRUST_TYPE:
        raise TrustError(where, f"type is {signed.get('type')!r}, expected {TRUST_TYPE!r}")
    version, threshold, keys = signed.get("version"), signed.get("threshold"), signed.get("keys")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TrustError(where, "version must be an integer")
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        raise TrustError(where, "threshold must be an integer")
    if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
        raise TrustError(where, "keys must be a list of objects")
    public: list[PublicKey] = []
    for entry in keys:
        line = entry.get("public")
        if not isinstance(line, str):
            raise TrustError(where, "a key lacks its 'public' line")
        try:
            key = PublicKey.from_minisign_line(line, where=where)
        except KeyFileError as exc:
            raise TrustError(where, exc.reason) from None
        if entry.get("id") != key.id_hex:
            raise TrustError(
                where, f"key id {entry.get('id')!r} does not match its public key ({key.id_hex})"
            )
        public.append(key)
    root = new_root(public, threshold, version)
    sigs = doc.get("signatures", [])
    if not isinstance(sigs, list) or not all(
        isinstance(s, dict) and isinstance(s.get("key_id"), str) and isinstance(s.get("sig"), str)
        for s in sigs
    ):
        raise TrustError(where, "signatures must be a list of {key_id, sig}")
    root.signatures = list(sigs)
    return root


def load_root(path: Path) -> TrustRoot:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TrustError(str(path), f"cannot read trust root: {exc.strerror}") from None
    return parse_root(data, where=str(path))


def write_root(root: TrustRoot, path: Path) -> None:
    write_file_atomic(path, root.to_json(), mode=0o644)


def check_rotation(current: TrustRoot, new: TrustRoot, *, where: str) -> list[str]:
    """Accept ``new`` in place of ``current``: 1 higher version, 2 threshold of current keys signed it,
    3 every key it adds signed it too (no one is made a signer without agreeing to it)."""
    if new.version <= current.version:
        raise TrustError(
            where, f"version {new.version} is not newer than the current trust root's {current.version}"
        )
    message = new.signed_bytes()
    good = current.count_valid(message, new.signatures)
    if len(good) < current.threshold:
        raise TrustError(
            where,
            f"signed by {len(good)} key(s) of the current trust root, {current.threshold} required",
        )
    added = sorted(set(new.keys) - set(current.keys))
    consented = new.count_valid(message, new.signatures)
    for key_id in added:
        if key_id not in consented:
            raise TrustError(
                where, f"added key {key_id} did not sign this root; every key a rotation adds must sign it"
            )
    return sorted(good)


__all__ = [
    "TrustRoot",
    "check_rotation",
    "key_id_hex",
    "load_root",
    "new_root",
    "parse_root",
    "write_root",
]
