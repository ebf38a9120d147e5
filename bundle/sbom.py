"""A CycloneDX 1.6 SBOM of what a bundle carries, made with cyclonedx-python-lib.

One component per upstream artifact (a Debian package, a release archive, each Python
wheel), with its package URL, licence, the upstream SHA-256 and download address. The
serial number is derived from the bundle's identity and the timestamp is the build's, so
the SBOM is byte-for-byte reproducible like the rest of the bundle.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import DisjunctiveLicense, LicenseExpression
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

if TYPE_CHECKING:  # the builder's staged files; the SBOM reads their names and provenance
    from vigil.bundle.payload import PayloadFile

SBOM_PATH = "sbom.cdx.json"
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_NAMESPACE = uuid.UUID("9b5e0b8e-4d0e-4c8a-8f0a-76696769c001")


@dataclass(frozen=True)
class SbomItem:
    name: str
    version: str
    license: str
    kind: str  # deb | url | wheel | file | project
    upstream_url: str
    upstream_sha256: str
    arch: str = ""


def items_from_files(files: Iterable[PayloadFile], kinds: dict[str, str], arch: str) -> list[SbomItem]:
    """One item per component, and one per wheel file (each wheel is its own package)."""
    items: dict[tuple[str, str], SbomItem] = {}
    for f in files:
        path: str = f.path
        kind = kinds.get(f.component, "file")
        base = path.rsplit("/", 1)[-1]
        match = _WHEEL.match(base) if base.endswith(".whl") else None
        if match:
            name, version = match["name"].replace("_", "-").lower(), match["version"]
            items[(name, version)] = SbomItem(
                name,
                version,
                f.license,
                "wheel",
                f.upstream_url,
                f.upstream_sha256,
            )
            continue
        key = (f.component, f.version)
        if key not in items:
            items[key] = SbomItem(
                f.component,
                f.version,
                f.license,
                kind,
                f.upstream_url,
                f.upstream_sha256,
                arch,
            )
    return [items[k] for k in sorted(items)]


def _purl(item: SbomItem) -> PackageURL:
    if item.kind == "deb":
        return PackageURL(
            type="deb",
            namespace="debian",
            name=item.name,
            version=item.version,
            qualifiers={"arch": item.arch} if item.arch else None,
        )
    if item.kind in ("wheel", "project"):
        return PackageURL(type="pypi", name=item.name, version=item.version)
    qualifiers = (
        {"download_url": item.upstream_url} if item.upstream_url.startswith(("http://", "https://")) else None
    )
    return PackageURL(type="generic", name=item.name, version=item.version, qualifiers=qualifiers)


def _license(spdx: str) -> list[LicenseExpression | DisjunctiveLicense]:
    if not spdx or spdx == "NOASSERTION":
        return []
    if any(op in spdx for op in (" AND ", " OR ", " WITH ")):
        return [LicenseExpression(spdx)]
    return (
        [DisjunctiveLicense(id=spdx)]
        if re.fullmatch(r"[A-Za-z0-9.+-]+", spdx)
        else [DisjunctiveLicense(name=spdx)]
    )


def render_sbom(items: list[SbomItem], *, bundle_name: str, bundle_version: int, created: datetime) -> bytes:
    components = []
    for item in items:
        purl = _purl(item)
        hashes = (
            [HashType(alg=HashAlgorithm.SHA_256, content=item.upstream_sha256)]
            if re.fullmatch(r"[0-9a-f]{64}", item.upstream_sha256)
            else []
        )
        refs = []
        if item.upstream_url.startswith(("http://", "https://")):
            refs.append(
                ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(item.upstream_url))
            )
        components.append(
            Component(
                name=item.name,
                version=item.version,
                type=ComponentType.APPLICATION if item.kind in ("deb", "url") else ComponentType.LIBRARY,
                bom_ref=purl.to_string(),
                purl=purl,
                hashes=hashes,
                licenses=_license(item.license),
                external_references=refs,
            )
        )
    root = Component(
        name="vigil-bundle",
        version=str(bundle_version),
        type=ComponentType.APPLICATION,
        bom_ref=f"vigil-bundle:{bundle_name}",
    )
    bom = Bom(
        components=components,
        serial_number=uuid.uuid5(_NAMESPACE, f"{bundle_name}:{bundle_version}:{created.isoformat()}"),
        metadata=BomMetaData(timestamp=created, component=root),
    )
    bom.register_dependency(root, components)
    text = JsonV1Dot6(bom).output_as_string(indent=1)
    return json.dumps(json.loads(text), sort_keys=True, indent=1).encode() + b"\n"


def summarize_sbom(data: bytes) -> dict[str, object]:
    """A short summary for ``vigil bundle inspect``: format, count, licences."""
    doc = json.loads(data)
    comps = doc.get("components", [])
    licenses: dict[str, int] = {}
    for c in comps:
        for lic in c.get("licenses", []) or [{}]:
            key = (
                (lic.get("license", {}) or {}).get("id")
                or (lic.get("license", {}) or {}).get("name")
                or lic.get("expression", "unknown")
            )
            licenses[key] = licenses.get(key, 0) + 1
    return {
        "format": f"{doc.get('bomFormat', '?')} {doc.get('specVersion', '?')}",
        "serial": doc.get("serialNumber", ""),
        "components": len(comps),
        "licenses": dict(sorted(licenses.items())),
    }
