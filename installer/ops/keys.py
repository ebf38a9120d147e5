"""Signing keys and trust roots: which keys may sign bundles, and how many of them must."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.basics.atomic import write_file_atomic
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


def installed_version_path(home: Path) -> Path:
    """The marker that a root was installed here, and its version: it outlives a lost root.json."""
    return home / "trust" / "installed-version"


def _installed_version(home: Path) -> int | None:
    path = installed_version_path(home)
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrustError(str(path), f"cannot read: {exc}") from None
    if not text.isdigit() or len(text) > 20:
        raise TrustError(str(path), f"corrupt: {text[:40]!r} is not a version number")
    return int(text)


def installed_root(home: Path) -> TrustRoot | None:
    """The root installed on this host; None only when none was ever installed here.

    A root.json that is missing, a dangling link, unreadable or older than the version the marker
    records is an error, never "nothing installed": that would make the next install a first one.
    """
    path = installed_trust_path(home)
    marker = _installed_version(home)
    restore = "restore root.json from a backup; a new first install is refused"
    if not os.path.lexists(path):
        if marker is None:
            return None
        raise TrustError(str(path), f"missing, but trust root version {marker} was installed here; {restore}")
    try:
        root = load_root(path)
    except TrustError as exc:
        if marker is None:
            raise
        raise TrustError(
            str(path), f"{exc.reason}, but trust root version {marker} was installed here; {restore}"
        ) from None
    if marker is not None and root.version < marker:
        raise TrustError(
            str(path), f"version {root.version} is older than version {marker} installed here; {restore}"
        )
    return root


def resolve_trust(home: Path, given: Path | None) -> Path:
    """The trust root an action uses: the one given, else the one installed on this host."""
    if given is not None:
        return given
    path = installed_trust_path(home)
    if not path.exists() and installed_root(home) is None:
        raise TrustError(str(path), "no trust root installed; pass --trust or run `vigil trust install`")
    return path


def load_trust(home: Path, given: Path | None) -> tuple[Path, TrustRoot]:
    """The trust root to verify with, and where it was read from."""
    path = resolve_trust(home, given)
    return path, load_root(path)


@dataclass(frozen=True)
class BundleTrust:
    """The root a bundle is verified with, and how it stands to the root installed here."""

    path: Path
    root: TrustRoot
    #: the very root installed here (given with --trust or not)
    installed: bool
    #: whether an import with it may raise the store's highest version: it is the installed root,
    #: or no root was ever installed here (it is then the only one there is)
    raises_highest: bool

    def record(self, details: dict[str, Any]) -> None:
        details.update(trust=str(self.path), trust_version=self.root.version, trust_installed=self.installed)


def trust_for_bundle(home: Path, given: Path | None, details: dict[str, Any]) -> BundleTrust:
    """The root to verify a bundle with: the installed one, or a ``--trust`` root that is that same
    root or a signed successor of it (a higher version ``check_rotation`` accepts from it). An older
    root, another root of the same version, or an unsigned newer one is refused: it could still
    trust a revoked key. ``details`` (the audit record's) names the root, also when it is refused.
    """
    path = installed_trust_path(home) if given is None else given
    details.update(trust=str(path))
    current = installed_root(home)
    if given is None:
        if current is None:
            raise TrustError(str(path), "no trust root installed; pass --trust or run `vigil trust install`")
        chosen = BundleTrust(path, current, installed=True, raises_highest=True)
    else:
        root = load_root(given)
        if current is None:
            chosen = BundleTrust(given, root, installed=False, raises_highest=True)
        elif root.version < current.version:
            raise TrustError(
                str(given),
                f"version {root.version} is older than the installed trust root's {current.version}; "
                "it may still trust revoked keys (omit --trust to use the installed root)",
            )
        elif root.version == current.version:
            if root.signed_bytes() != current.signed_bytes():
                raise TrustError(
                    str(given),
                    f"version {root.version} is not the installed trust root (other keys or threshold)",
                )
            chosen = BundleTrust(given, root, installed=True, raises_highest=True)
        else:
            check_rotation(current, root, where=str(given))
            chosen = BundleTrust(given, root, installed=False, raises_highest=False)
    chosen.record(details)
    return chosen


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
    current = installed_root(inv.home)
    dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if current is not None:
        signers = check_rotation(current, new, where=str(path))
        inv.details.update(rotation=True, from_version=current.version, signers=signers)
    else:
        inv.details.update(rotation=False)
    write_root(new, dest)
    write_file_atomic(installed_version_path(inv.home), f"{new.version}\n".encode(), mode=0o644)
    inv.details.update(version=new.version, threshold=new.threshold, keys=sorted(new.keys))
    return dest, new


def show_trust(inv: Invocation, given: Path | None) -> tuple[Path, TrustRoot]:
    path = resolve_trust(inv.home, given)
    inv.object = str(path)
    return path, load_root(path)
