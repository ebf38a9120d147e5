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
from cyclonedx.spdx import is_supported_id
from packageurl import PackageURL

if TYPE_CHECKING:  # the builder's staged files; the SBOM reads their names and provenance
    from vigil.bundle.payload import PayloadFile

SBOM_PATH = "sbom.cdx.json"
NOASSERTION = "NOASSERTION"  # SPDX: no licence is known
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
    """An SPDX id as ``license.id``, an expression as ``expression``, anything else as ``license.name``."""
    if not spdx or spdx == NOASSERTION:
        return []
    if is_supported_id(spdx):
        return [DisjunctiveLicense(id=spdx)]
    if re.search(r"\s(AND|OR|WITH)\s", spdx) or spdx.startswith("("):
        return [LicenseExpression(spdx)]
    return [DisjunctiveLicense(name=spdx)]


def combine_licenses(expressions: Iterable[str]) -> str:
    """One SPDX expression for a component made of several parts (each wheel of vigil-deps).

    Each part's top-level AND terms, deduplicated and sorted, joined with AND; a term with a
    top-level OR keeps its parentheses. A part without a licence (NOASSERTION or empty) makes the
    whole NOASSERTION: a conjunction with an unknown part is unknown.
    """
    terms: dict[str, str] = {}
    for expr in expressions:
        expr = " ".join(expr.split())
        if not expr or expr == NOASSERTION:
            return NOASSERTION
        for term in _and_terms(_unwrap(expr)):
            term = _unwrap(term)
            if _top_level(term, "OR"):
                term = f"({term})"
            terms.setdefault(term.lower(), term)
    if not terms:
        return NOASSERTION
    if len(terms) == 1:
        return _unwrap(next(iter(terms.values())))
    return " AND ".join(terms[k] for k in sorted(terms, key=lambda k: (k.lstrip("("), k)))


def _unwrap(expr: str) -> str:
    """``expr`` without parentheses that enclose all of it."""
    while expr.startswith("(") and expr.endswith(")") and _closing(expr) == len(expr) - 1:
        expr = expr[1:-1].strip()
    return expr


def _closing(expr: str) -> int:
    """Where the parenthesis opened at ``expr[0]`` closes (-1: it does not)."""
    depth = 0
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i
    return -1


def _split_top_level(expr: str, op: str) -> list[str]:
    """``expr`` cut at each ``op`` outside parentheses (SPDX operators stand between blanks)."""
    parts: list[str] = []
    depth = start = 0
    words = expr.split(" ")
    for i, word in enumerate(words):
        if depth == 0 and word.upper() == op and i > start:
            parts.append(" ".join(words[start:i]))
            start = i + 1
        depth += word.count("(") - word.count(")")
    parts.append(" ".join(words[start:]))
    return [p for p in parts if p]


def _and_terms(expr: str) -> list[str]:
    return _split_top_level(expr, "AND")


def _top_level(expr: str, op: str) -> bool:
    return len(_split_top_level(expr, op)) > 1


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
