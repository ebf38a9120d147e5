"""The appliance's audit key: an Ed25519 pair that signs checkpoints, and only that.

It lives in ``$VIGIL_HOME/audit/`` (``audit.key`` PKCS#8 PEM, mode 0600; ``audit.pub``
SubjectPublicKeyInfo PEM) and is separate from the bundle signing keys: an auditor who is
given ``audit.pub`` can check checkpoints and nothing else. It is created on first use.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from vigil.installer.audit._canonical import canonical
from vigil.installer.audit._files import PRIVATE_KEY_MODE, PUBLIC_KEY_MODE, AuditPaths, cannot, write_new_file
from vigil.installer.audit.errors import AuditError


def key_id(public_key: Ed25519PublicKey) -> str:
    """First 16 hex digits of SHA-256 over the raw 32-byte public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Read an audit public key file (PEM)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise AuditError(f"public key {path}: not found") from None
    except OSError as exc:
        raise cannot(Path(path), "read", exc) from None
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise AuditError(f"public key {path}: not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise AuditError(f"public key {path}: not an Ed25519 key")
    return key


def load_or_create(paths: AuditPaths) -> Ed25519PrivateKey:
    """The appliance's audit signing key, created on first use.

    Call with the audit lock held, so two first uses do not make two keys.
    """
    path = paths.private_key
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        write_new_file(path, pem, PRIVATE_KEY_MODE)
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise cannot(path, "read", exc) from None
        try:
            loaded = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise AuditError(f"{path}: not an unencrypted PEM private key") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise AuditError(f"{path}: not an Ed25519 key")
        key = loaded
    pub = public_pem(key.public_key())
    if not paths.public_key.exists():
        write_new_file(paths.public_key, pub, PUBLIC_KEY_MODE)
    elif paths.public_key.read_bytes() != pub:
        raise AuditError(f"{paths.public_key}: does not match {path}")
    return key


def sign(key: Ed25519PrivateKey, fields: dict[str, Any]) -> str:
    """Base64 Ed25519 signature over the canonical JSON of ``fields``."""
    return base64.b64encode(key.sign(canonical(fields))).decode("ascii")


def check_signature(public_key: Ed25519PublicKey, fields: dict[str, Any], sig: str, where: str) -> None:
    """Return if ``sig`` is ``public_key``'s signature over ``fields``; raise otherwise."""
    try:
        public_key.verify(base64.b64decode(sig, validate=True), canonical(fields))
    except (InvalidSignature, ValueError):
        raise AuditError(f"{where}: bad signature (checkpoint forged or altered)") from None
