"""What a deploy takes from the bundle store: verified artifacts and the signed Ansible content.

Before a deploy uses an imported bundle, its manifest is checked again against the installed
trust root and every file in the store is re-hashed against it: the store sits on the admin
host's disk between import and deploy, and "verify before use" means at use.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.basics.errors import VigilError
from vigil.bundle.errors import TamperedFile
from vigil.bundle.manifest import Manifest, parse_manifest
from vigil.bundle.signing import Minisig
from vigil.bundle.store import BundleStore
from vigil.bundle.trust import TrustRoot

CHUNK = 1 << 20


class DeployError(VigilError):
    """A deploy could not start or did not finish cleanly."""


@dataclass(frozen=True)
class StoredBundle:
    version: int
    root: Path  # bundles/<N>
    files: Path  # bundles/<N>/files
    manifest: Manifest
    manifest_sha256: str

    @property
    def ansible_dir(self) -> Path:
        return self.files / "ansible"


def open_stored(store: BundleStore, trust: TrustRoot, version: int | None = None) -> StoredBundle:
    """The imported bundle to deploy (default: the highest imported), re-verified."""
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
    trust.verify_minisigs(raw, sigs, what=f"{root}/manifest.json")
    manifest = parse_manifest(raw)
    if manifest.version != chosen:
        raise TamperedFile(str(root), f"holds a manifest for version {manifest.version}")
    files = root / "files"
    for entry in manifest.files:
        path = files / entry.path
        h = hashlib.sha256()
        size = 0
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    h.update(chunk)
                    size += len(chunk)
        except OSError as exc:
            raise TamperedFile(str(path), f"cannot read: {exc.strerror}") from None
        if size != entry.size or h.hexdigest() != entry.sha256:
            raise TamperedFile(str(path), "changed in the store since it was imported")
    return StoredBundle(chosen, root, files, manifest, hashlib.sha256(raw).hexdigest())


def artifact_vars(bundle: StoredBundle) -> dict[str, Any]:
    """The extra vars every role reads: where each artifact is on the controller, and its version.

    ``vigil_artifacts`` is keyed by the path inside the component directory (``bin/vmalert``),
    so roles do not care which channel (and so which component name) brought it.
    """
    artifacts: dict[str, dict[str, str]] = {}
    for entry in bundle.manifest.files:
        parts = entry.path.split("/", 2)
        if len(parts) != 3 or parts[0] != "components":
            continue
        key = parts[2]
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
        "vigil_bundle_dir": str(bundle.files),
        "vigil_bundle_manifest_sha256": bundle.manifest_sha256,
        "vigil_artifacts": artifacts,
    }


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True))
