"""What a bundle holds, for people: components, versions, sizes, licences, signers, SBOM."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from vigil.bundle.container import BundleReader
from vigil.bundle.errors import BundleRejected
from vigil.bundle.manifest import parse_manifest
from vigil.bundle.payload import read_leading_member
from vigil.bundle.sbom import SBOM_PATH, summarize_sbom
from vigil.bundle.signing import Minisig
from vigil.bundle.verify import in_bundle


def inspect_bundle(path: Path) -> dict[str, Any]:
    """A summary of the bundle's manifest, signatures and SBOM. It does not verify them."""
    with BundleReader(path) as reader:
        reader.read_head()
        try:
            manifest = parse_manifest(reader.manifest_bytes)
        except BundleRejected as exc:
            raise in_bundle(reader.name, exc) from None
        signers = []
        for key_id, raw in sorted(reader.signatures.items()):
            try:
                sig = Minisig.parse(raw, where=key_id)
                signers.append({"key_id": sig.key_id_hex, "trusted_comment": sig.trusted_comment})
            except BundleRejected:
                signers.append({"key_id": key_id, "trusted_comment": "(unreadable signature)"})
        sbom_bytes = read_leading_member(
            reader.payload_chunks(), manifest.payload, SBOM_PATH, where=f"{reader.name}: payload.tar.zst"
        )
    per_component: dict[str, dict[str, Any]] = defaultdict(lambda: {"files": 0, "bytes": 0})
    for f in manifest.files:
        per_component[f.component]["files"] += 1
        per_component[f.component]["bytes"] += f.size
    components = []
    for c in sorted(manifest.components, key=lambda c: c.name):
        components.append(
            {
                "name": c.name,
                "version": c.version,
                "license": c.license,
                "kind": c.kind,
                "upstream_url": c.upstream_url,
                "upstream_sha256": c.upstream_sha256,
                **per_component.get(c.name, {"files": 0, "bytes": 0}),
            }
        )
    sbom: dict[str, Any] | None = None
    if sbom_bytes is not None:
        try:
            sbom = summarize_sbom(sbom_bytes)
        except (ValueError, json.JSONDecodeError):
            sbom = None
    return {
        "bundle": Path(path).name,
        "verified": False,
        "version": manifest.version,
        "arch": manifest.arch,
        "channel": manifest.channel,
        "created": manifest.created,
        "expires": manifest.expires,
        "min_vigil_version": manifest.min_vigil_version,
        "builder_version": manifest.builder_version,
        "payload": {"size": manifest.payload.size, "sha256": manifest.payload.sha256},
        "files": len(manifest.files),
        "bytes": manifest.total_size,
        "components": components,
        "signers": signers,
        "sbom": sbom,
    }
