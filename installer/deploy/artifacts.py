"""What a deploy takes from the bundle store: verified artifacts and the signed Ansible content.

Before a deploy uses an imported bundle, its manifest is checked again against the installed
trust root and every file in the store is re-hashed against it: the store sits on the admin
host's disk between import and deploy, and "verify before use" means at use. So:

1. the manifest's signatures against the trust root, and its version against the directory;
2. nothing in the bundle's directory that the manifest does not list (no added file, no link:
   an ``ansible.cfg`` dropped beside the playbooks would otherwise be read by Ansible);
3. every listed file re-hashed; the Ansible content is copied while it is hashed into a private
   directory of the run (0700), and the run uses that copy, so what runs is what was checked,
   whatever happens to the store after the check. The artifacts the roles copy to the hosts are
   checked again there, against the manifest's sha256, after the copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from vigil.basics.atomic import atomic_writer
from vigil.basics.errors import VigilError
from vigil.bundle.errors import TamperedFile
from vigil.bundle.manifest import Manifest, parse_manifest
from vigil.bundle.signing import Minisig
from vigil.bundle.store import BundleStore
from vigil.bundle.trust import TrustRoot

CHUNK = 1 << 20

#: what the bundle's words that become extra vars may hold. Extra vars are rendered as templates on
#: the admin host, so even signed text gets a strict shape there: no brace, no space, no quote
#: (docs/security.md, "Data read back from hosts").
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:~-]*")
_PATH = re.compile(r"[A-Za-z0-9._+:~@%=,-]+(/[A-Za-z0-9._+:~@%=,-]+)*")


class DeployError(VigilError):
    """A deploy could not start or did not finish cleanly."""


class UnsafeValue(DeployError):
    """A value from a host, a service or a bundle that does not have the strict shape it needs to go
    anywhere near Ansible's templating on the admin host; refused before any change."""

    outcome = "refused"


@dataclass(frozen=True)
class StoredBundle:
    version: int
    root: Path  # bundles/<N>
    files: Path  # bundles/<N>/files
    manifest: Manifest
    manifest_sha256: str

    #: the private copy of the Ansible content, when one was made (see :func:`open_stored`)
    private_ansible: Path | None = None

    @property
    def ansible_dir(self) -> Path:
        return self.private_ansible or self.files / "ansible"


def open_stored(
    store: BundleStore, trust: TrustRoot, version: int | None = None, *, copy_ansible_to: Path | None = None
) -> StoredBundle:
    """The imported bundle to deploy (default: the highest imported), re-verified.

    With ``copy_ansible_to`` (a directory that must not exist), the files under ``ansible/`` are
    copied there while they are hashed; ``StoredBundle.ansible_dir`` is then that copy.
    """
    versions = store.versions()
    if not versions:
        raise DeployError(str(store.root), "no bundle imported; run `vigil bundle import BUNDLE` first")
    chosen = version if version is not None else max(versions)
    if chosen not in versions:
        raise DeployError(
            f"bundle version {chosen}", f"not in the store (imported: {', '.join(map(str, versions))})"
        )
    root = store.root / str(chosen)
    raw = (root / "manifest.json").read_bytes()
    sigs = [
        Minisig.parse(p.read_bytes(), where=f"{root.name}/signatures/{p.name}")
        for p in sorted((root / "signatures").glob("*.minisig"))
    ]
    trust.verify_minisigs(raw, sigs, what=f"{root}/manifest.json")  # 1
    manifest = parse_manifest(raw)
    if manifest.version != chosen:
        raise TamperedFile(str(root), f"holds a manifest for version {manifest.version}")
    files = root / "files"
    _refuse_unlisted(files, {entry.path for entry in manifest.files})  # 2
    if copy_ansible_to is not None:
        copy_ansible_to.mkdir(mode=0o700)
    for entry in manifest.files:  # 3
        path = files / entry.path
        copy = None
        if copy_ansible_to is not None and entry.path.startswith("ansible/"):
            copy = copy_ansible_to / entry.path.removeprefix("ansible/")
            copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_file(path, entry.size, entry.sha256, copy, mode=entry.mode)
    return StoredBundle(chosen, root, files, manifest, hashlib.sha256(raw).hexdigest(), copy_ansible_to)


def _refuse_unlisted(files: Path, listed: set[str]) -> None:
    """Step 2: the bundle's directory holds the manifest's files, the directories above them, nothing else."""
    dirs: set[str] = set()
    for p in listed:
        dirs.update(str(parent) for parent in PurePosixPath(p).parents)
    for dirpath, dirnames, filenames in os.walk(files):  # os.walk does not follow links
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = path.relative_to(files).as_posix()
            if path.is_symlink():
                raise TamperedFile(str(path), "is a link in the store; the signed manifest lists no links")
            if name in dirnames and rel not in dirs:
                raise TamperedFile(str(path), "is a directory the signed manifest does not list")
            if name in filenames and rel not in listed:
                raise TamperedFile(
                    str(path), "is not in the signed manifest (added to the store after import)"
                )


def _check_file(path: Path, size: int, sha256: str, copy: Path | None, *, mode: int) -> None:
    """Step 3 for one file: hash it (not following a link), and copy the bytes hashed when asked."""
    h = hashlib.sha256()
    done = 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise TamperedFile(str(path), f"cannot read: {exc.strerror}") from None
    with (
        open(fd, "rb") as fh,
        atomic_writer(copy, mode=mode & 0o755, fsync=False) if copy else nullcontext() as out,
    ):
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            done += len(chunk)
            if out is not None:
                out.write(chunk)
        if done != size or h.hexdigest() != sha256:
            raise TamperedFile(str(path), "changed in the store since it was imported")


def artifact_vars(bundle: StoredBundle) -> dict[str, Any]:
    """The extra vars every role reads: where each artifact is on the controller, and its version.

    ``vigil_artifacts`` is keyed by the path inside the component directory (``bin/vmalert``),
    so roles do not care which channel (and so which component name) brought it.
    """
    artifacts: dict[str, dict[str, str]] = {}
    _shaped(bundle, "channel", bundle.manifest.channel, _NAME)
    for entry in bundle.manifest.files:
        parts = entry.path.split("/", 2)
        if len(parts) != 3 or parts[0] != "components":
            continue
        key = parts[2]
        _shaped(bundle, "path", entry.path, _PATH)
        _shaped(bundle, f"component of {key}", entry.component, _NAME)
        _shaped(bundle, f"version of {key}", entry.version, _VERSION)
        if key in artifacts and artifacts[key]["component"] != entry.component:
            raise DeployError(
                f"bundle {bundle.version}",
                f"{key} is shipped by both {artifacts[key]['component']} and {entry.component}",
            )
        artifacts[key] = {
            "src": str(bundle.files / entry.path),
            "component": entry.component,
            "version": entry.version,
            "sha256": entry.sha256,
            "mode": f"{entry.mode:04o}",
        }
    return {
        "vigil_bundle_version": bundle.version,
        "vigil_bundle_channel": bundle.manifest.channel,
        "vigil_bundle_dir": str(bundle.files),
        "vigil_bundle_manifest_sha256": bundle.manifest_sha256,
        "vigil_artifacts": artifacts,
    }


def _shaped(bundle: StoredBundle, what: str, value: str, pattern: re.Pattern[str]) -> None:
    """Refuse a word of the manifest that does not have the shape an extra var may carry."""
    if not pattern.fullmatch(value):
        shown = json.dumps(value)
        raise UnsafeValue(
            f"bundle {bundle.version}",
            f"{what} {shown[:80]}{'...' if len(shown) > 80 else ''} is not a plain name (letters, "
            "digits, . _ + - : ~; no brace, quote or space): Ansible would read it as a template; refused",
        )


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True))
