"""Signing keys and trust roots: which keys may sign bundles, and how many of them must."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil.bundle.errors import TrustError
from vigil.bundle.signing import PublicKey, SigningKey, generate_keypair, load_public_key, load_signing_key
from vigil.bundle.trust import TrustRoot, check_rotation, load_root, new_root, write_root
from vigil.installer.ops._invocation import Invocation


@dataclass(frozen=True)
class NewKey:
    key: Path
    pub: Path
    key_id: str


def generate_key(inv: Invocation, prefix: Path, passphrase: bytes | None) -> NewKey:
    """``keys.generate``: PREFIX.key (0600, encrypted when a passphrase is given) and PREFIX.pub."""
    inv.object = str(prefix)
    key_path, pub_path = generate_keypair(prefix, passphrase)
    pub = load_public_key(pub_path)
    inv.details.update(key_id=pub.id_hex, encrypted=passphrase is not None)
    return NewKey(key_path, pub_path, pub.id_hex)


def show_key(inv: Invocation, pub_path: Path) -> PublicKey:
    inv.object = str(pub_path)
    return load_public_key(pub_path)


def load_keys(paths: Sequence[Path], passphrase: bytes | None) -> list[SigningKey]:
    return [load_signing_key(p, passphrase) for p in paths]


def installed_trust_path(home: Path) -> Path:
    return home / "trust" / "root.json"


def resolve_trust(home: Path, given: Path | None) -> Path:
    """The trust root an action uses: the one given, else the one installed on this host."""
    if given is not None:
        return given
    path = installed_trust_path(home)
    if not path.exists():
        raise TrustError(str(path), "no trust root installed; pass --trust or run `vigil trust install`")
    return path


def load_trust(home: Path, given: Path | None) -> tuple[Path, TrustRoot]:
    """The trust root to verify with, and where it was read from."""
    path = resolve_trust(home, given)
    return path, load_root(path)


def init_trust(inv: Invocation, out: Path, pubs: Sequence[Path], threshold: int, version: int) -> TrustRoot:
    """``trust.init``: a new trust root file; never overwrites one."""
    inv.object = str(out)
    if out.exists():
        raise TrustError(str(out), "already exists; refusing to overwrite a trust root")
    root = new_root([load_public_key(p) for p in pubs], threshold, version)
    write_root(root, out)
    inv.details.update(version=root.version, threshold=root.threshold, keys=sorted(root.keys))
    return root


def sign_trust(inv: Invocation, path: Path, key: SigningKey) -> TrustRoot:
    """``trust.sign``: add KEY's signature to the root at PATH, in place."""
    inv.object = str(path)
    root = load_root(path)
    root.sign(key)
    write_root(root, path)
    inv.details.update(version=root.version, signer=key.id_hex)
    return root


def install_trust(inv: Invocation, path: Path) -> tuple[Path, TrustRoot]:
    """``trust.install``: the first root as given; a later one only as a signed rotation."""
    inv.object = str(path)
    new = load_root(path)
    dest = installed_trust_path(inv.home)
    dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if dest.exists():
        current = load_root(dest)
        signers = check_rotation(current, new, where=str(path))
        inv.details.update(rotation=True, from_version=current.version, signers=signers)
    else:
        inv.details.update(rotation=False)
    write_root(new, dest)
    inv.details.update(version=new.version, threshold=new.threshold, keys=sorted(new.keys))
    return dest, new


def show_trust(inv: Invocation, given: Path | None) -> tuple[Path, TrustRoot]:
    path = resolve_trust(inv.home, given)
    inv.object = str(path)
    return path, load_root(path)
