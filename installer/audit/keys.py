"""The appliance's audit key: an Ed25519 pair that signs checkpoints, and only that.

It lives in ``$VIGIL_HOME/audit/`` (``audit.key`` PKCS#8 PEM, mode 0600; ``audit.pub``
SubjectPublicKeyInfo PEM) and is separate from the bundle signing keys: an auditor who is
given ``audit.pub`` can check checkpoints and nothing else.

It is created on first use, and its id is then pinned outside the audit directory, in
``$VIGIL_HOME/trust/audit-key-id`` (written once). From then on a missing key is an error, never
a reason to make a new one: deleting ``audit/`` must not let the next command start a fresh log
under a fresh key. The same holds without a pin (a log from before pinning) while anything of the
old log is left: ``log.jsonl``, ``checkpoints.jsonl`` or ``audit.pub``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from vigil.installer.audit._canonical import canonical
from vigil.installer.audit._files import (
    PIN_MODE,
    PRIVATE_KEY_MODE,
    PUBLIC_KEY_MODE,
    TRUST_DIR_MODE,
    AuditPaths,
    cannot,
    ensure_dir,
    write_new_file,
)
from vigil.installer.audit.errors import AuditError

_KEY_ID_RE = re.compile(r"[0-9a-f]{16}")


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


def read_pin(path: Path) -> str | None:
    """The audit key id pinned in ``path``; ``None`` when nothing is pinned there."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        if os.path.lexists(path):
            raise AuditError(f"{path}: dangling link where the pinned audit key id should be") from None
        return None
    except UnicodeDecodeError:
        raise AuditError(f"{path}: corrupt: not an audit key id") from None
    except OSError as exc:
        raise cannot(path, "read", exc) from None
    pinned = text.strip()
    if not _KEY_ID_RE.fullmatch(pinned):
        raise AuditError(f"{path}: corrupt: not an audit key id (16 hex digits)")
    return pinned


def check_pin(pin: Path, public_key: Ed25519PublicKey, where: str) -> None:
    """Return if ``pin`` is absent or pins ``public_key``'s id; raise naming both ids otherwise."""
    pinned = read_pin(pin)
    ours = key_id(public_key)
    if pinned is not None and pinned != ours:
        raise AuditError(
            f"{where}: key {ours} is not the audit key {pinned} pinned in {pin} (audit key replaced)"
        )


def _refuse_new_key(paths: AuditPaths) -> None:
    """Raise if a log existed here: then a missing key is lost, not yet to be made."""
    restore = (
        f"restore {paths.dir} from a backup (a new key is refused; docs/audit.md says how to start over)"
    )
    pinned = read_pin(paths.pin)
    if pinned is not None:
        raise AuditError(
            f"{paths.private_key}: missing: the audit key pinned at {pinned} ({paths.pin}) is gone; {restore}"
        )
    for left in (paths.public_key, paths.log, paths.checkpoints):
        if _holds_something(left):
            raise AuditError(f"{paths.private_key}: missing, but {left} is still there; {restore}")


def _holds_something(path: Path) -> bool:
    """``path`` is there and is not an empty regular file (an empty log is what a first use leaves)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise cannot(path, "read", exc) from None
    return not (stat.S_ISREG(st.st_mode) and st.st_size == 0)


def _pin(paths: AuditPaths, public_key: Ed25519PublicKey) -> None:
    """Pin the key's id at first use; refuse a key that is not the pinned one."""
    check_pin(paths.pin, public_key, str(paths.private_key))
    if not os.path.lexists(paths.pin):
        ensure_dir(paths.pin.parent, TRUST_DIR_MODE)
        write_new_file(paths.pin, key_id(public_key).encode("ascii") + b"\n", PIN_MODE)


def load_or_create(paths: AuditPaths) -> Ed25519PrivateKey:
    """The appliance's audit signing key, created on first use and then pinned.

    Call with the audit lock held, so two first uses do not make two keys. Refuses to make a key
    when one existed before (see the module's doc), and refuses a key other than the pinned one.
    """
    path = paths.private_key
    if not os.path.lexists(path):
        _refuse_new_key(paths)
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
    _pin(paths, key.public_key())
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
