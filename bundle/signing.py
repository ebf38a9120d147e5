"""Ed25519 keys and signatures in minisign's file formats.

vigil signs with ``cryptography``'s Ed25519 and writes what the stock ``minisign``
tool reads, so an operator can check a bundle's manifest with nothing but
``minisign -Vm manifest.json -x manifest.json.<KEYID>.minisig -p KEY.pub``.

Formats (as minisign 0.11 reads them):

* public key file: an untrusted comment line, then base64 of
  ``b"Ed" + key_id (8 bytes) + public key (32 bytes)``;
* signature file: an untrusted comment line; base64 of
  ``b"ED" + key_id + Ed25519(BLAKE2b-512(message))`` (the pre-hashed variant, so
  a signer never holds the whole message in memory); a ``trusted comment:``
  line; base64 of the "global" signature ``Ed25519(signature + trusted comment)``
  which binds the comment to the signature.

Our private key is a PKCS#8 PEM file (encrypted when a passphrase is given) rather
than minisign's scrypt box: vigil, not minisign, does the signing. The key id is
derived from the public key (first 8 bytes of its SHA-256), so it never needs storing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from vigil.basics.atomic import write_file_atomic
from vigil.bundle.errors import KeyFileError, SignatureError

_PK_ALG = b"Ed"
_SIG_ALG_PREHASHED = b"ED"
_SIG_ALG_LEGACY = b"Ed"
_UNTRUSTED = "untrusted comment: "
_TRUSTED = "trusted comment: "


def _key_id_for(public_raw: bytes) -> bytes:
    return hashlib.sha256(public_raw).digest()[:8]


def key_id_hex(key_id: bytes) -> str:
    """The key id as minisign prints it: the 8 bytes as a little-endian integer, upper-case hex."""
    return f"{int.from_bytes(key_id, 'little'):016X}"


@dataclass(frozen=True)
class PublicKey:
    key_id: bytes
    raw: bytes

    @property
    def id_hex(self) -> str:
        return key_id_hex(self.key_id)

    def _key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(self.raw)

    def minisign_line(self) -> str:
        """The base64 line of a minisign public key file."""
        return base64.b64encode(_PK_ALG + self.key_id + self.raw).decode()

    def to_minisign_text(self) -> str:
        return f"{_UNTRUSTED}minisign public key {self.id_hex}\n{self.minisign_line()}\n"

    @classmethod
    def from_minisign_line(cls, line: str, *, where: str = "public key") -> PublicKey:
        try:
            blob = base64.b64decode(line.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise KeyFileError(where, "not base64") from None
        if len(blob) != 42 or blob[:2] != _PK_ALG:
            raise KeyFileError(where, "not an Ed25519 minisign public key")
        return cls(key_id=blob[2:10], raw=blob[10:])

    def verify_raw(self, message: bytes, signature: bytes) -> bool:
        try:
            self._key().verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def verify_minisig(self, message: bytes, sig: Minisig, *, what: str) -> None:
        """1 key id, 2 signature over the message, 3 global signature over the trusted comment."""
        if sig.key_id != self.key_id:
            raise SignatureError(what, f"signature is by key {key_id_hex(sig.key_id)}, not {self.id_hex}")
        signed = hashlib.blake2b(message, digest_size=64).digest() if sig.prehashed else message
        if not self.verify_raw(signed, sig.signature):
            raise SignatureError(what, f"signature by key {self.id_hex} does not match")
        if not self.verify_raw(sig.signature + sig.trusted_comment.encode(), sig.global_signature):
            raise SignatureError(what, f"trusted comment of key {self.id_hex}'s signature was altered")


@dataclass(frozen=True)
class Minisig:
    """One parsed minisign signature file."""

    key_id: bytes
    signature: bytes
    prehashed: bool
    trusted_comment: str
    global_signature: bytes
    untrusted_comment: str = ""

    @property
    def key_id_hex(self) -> str:
        return key_id_hex(self.key_id)

    def to_text(self) -> str:
        alg = _SIG_ALG_PREHASHED if self.prehashed else _SIG_ALG_LEGACY
        return (
            f"{_UNTRUSTED}{self.untrusted_comment}\n"
            f"{base64.b64encode(alg + self.key_id + self.signature).decode()}\n"
            f"{_TRUSTED}{self.trusted_comment}\n"
            f"{base64.b64encode(self.global_signature).decode()}\n"
        )

    @classmethod
    def parse(cls, text: str | bytes, *, where: str) -> Minisig:
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise SignatureError(where, "signature file is not UTF-8 text") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) != 4:
            raise SignatureError(where, f"signature file has {len(lines)} lines, expected 4")
        if not lines[0].startswith(_UNTRUSTED) or not lines[2].startswith(_TRUSTED):
            raise SignatureError(where, "signature file lacks its comment lines")
        try:
            blob = base64.b64decode(lines[1], validate=True)
            global_sig = base64.b64decode(lines[3], validate=True)
        except (binascii.Error, ValueError):
            raise SignatureError(where, "signature is not base64") from None
        if len(blob) != 74 or blob[:2] not in (_SIG_ALG_PREHASHED, _SIG_ALG_LEGACY) or len(global_sig) != 64:
            raise SignatureError(where, "not an Ed25519 minisign signature")
        return cls(
            key_id=blob[2:10],
            signature=blob[10:],
            prehashed=blob[:2] == _SIG_ALG_PREHASHED,
            trusted_comment=lines[2][len(_TRUSTED) :],
            global_signature=global_sig,
            untrusted_comment=lines[0][len(_UNTRUSTED) :],
        )


@dataclass(frozen=True)
class SigningKey:
    private: Ed25519PrivateKey
    public: PublicKey

    @property
    def id_hex(self) -> str:
        return self.public.id_hex

    def sign_raw(self, message: bytes) -> bytes:
        return self.private.sign(message)

    def sign_minisig(self, message: bytes, *, trusted_comment: str, untrusted_comment: str = "") -> Minisig:
        if "\n" in trusted_comment or "\r" in trusted_comment:
            raise ValueError("trusted comment must be one line")
        sig = self.private.sign(hashlib.blake2b(message, digest_size=64).digest())
        global_sig = self.private.sign(sig + trusted_comment.encode())
        return Minisig(
            key_id=self.public.key_id,
            signature=sig,
            prehashed=True,
            trusted_comment=trusted_comment,
            global_signature=global_sig,
            untrusted_comment=untrusted_comment or f"signature from vigil key {self.id_hex}",
        )

    @classmethod
    def from_private(cls, private: Ed25519PrivateKey) -> SigningKey:
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(private=private, public=PublicKey(key_id=_key_id_for(raw), raw=raw))


def generate_keypair(prefix: Path, passphrase: bytes | None = None) -> tuple[Path, Path]:
    """Write ``PREFIX.key`` (0600, PKCS#8 PEM) and ``PREFIX.pub`` (minisign format); refuse to overwrite."""
    key_path = prefix.with_name(prefix.name + ".key")
    pub_path = prefix.with_name(prefix.name + ".pub")
    for path in (key_path, pub_path):
        if path.exists():
            raise KeyFileError(str(path), "already exists; refusing to overwrite a key")
    if not key_path.parent.is_dir():
        raise KeyFileError(str(key_path.parent), "directory does not exist")
    key = SigningKey.from_private(Ed25519PrivateKey.generate())
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    pem = key.private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    write_file_atomic(key_path, pem, mode=0o600)
    write_file_atomic(pub_path, key.public.to_minisign_text().encode(), mode=0o644)
    return key_path, pub_path


def load_signing_key(path: Path, passphrase: bytes | None = None) -> SigningKey:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(str(path), f"cannot read: {exc.strerror}") from None
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise KeyFileError(str(path), f"private key is readable by others (mode {mode:04o}); chmod 600 it")
    try:
        private = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError:
        if passphrase is None:
            raise KeyFileError(str(path), "key is encrypted; give --passphrase-file") from None
        raise KeyFileError(str(path), "key is not encrypted but a passphrase was given") from None
    except ValueError:
        if passphrase is not None:
            raise KeyFileError(str(path), "wrong passphrase or not a PEM private key") from None
        raise KeyFileError(str(path), "not a PEM private key") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise KeyFileError(str(path), "not an Ed25519 private key")
    return SigningKey.from_private(private)


def load_public_key(path: Path) -> PublicKey:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(str(path), f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith(_UNTRUSTED):
        lines = lines[1:]
    if len(lines) != 1:
        raise KeyFileError(str(path), "not a minisign public key file")
    return PublicKey.from_minisign_line(lines[0], where=str(path))


def read_passphrase(path: Path | None) -> bytes | None:
    """A passphrase from a file (first line, no trailing newline); ``None`` when no file is given."""
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(str(path), f"cannot read passphrase file: {exc.strerror}") from None
    first = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not first:
        raise KeyFileError(str(path), "passphrase file is empty")
    return first
