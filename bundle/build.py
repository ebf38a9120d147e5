"""Build a signed bundle from staged files.

1 SBOM of the staged components; 2 payload (deterministic tar.zst) with every file's, every
frame's (the frame table) and the payload's own SHA-256; 3 manifest; 4 one minisign
signature per key; 5 the bundle file, written under a temporary name and renamed into place.

With the same inputs and ``SOURCE_DATE_EPOCH``, two builds give byte-identical bundles:
entries are sorted, times come from ``SOURCE_DATE_EPOCH``, owners and modes are fixed,
zstd's threaded output does not depend on the core count, and Ed25519 signatures are
deterministic.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from vigil.basics.atomic import fsync_dir
from vigil.bundle.container import write_bundle
from vigil.bundle.errors import BundleError
from vigil.bundle.manifest import ComponentEntry, FileEntry, Manifest, format_time
from vigil.bundle.payload import PayloadFile, Progress, write_payload
from vigil.bundle.sbom import NOASSERTION, SBOM_PATH, combine_licenses, items_from_files, render_sbom
from vigil.bundle.signing import SigningKey

DEFAULT_VALID_DAYS = 365


def bundle_filename(version: int, arch: str) -> str:
    return f"vigil-{version}-{arch}.bundle"


def build_time() -> datetime:
    """``SOURCE_DATE_EPOCH`` when set (reproducible builds), else now; whole seconds, UTC."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch), UTC)
        except ValueError:
            raise BundleError("SOURCE_DATE_EPOCH", f"{epoch!r} is not an integer") from None
    return datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class _SbomFile:
    path: str
    source: Path
    mode: int = 0o644
    component: str = "vigil-bundle"
    version: str = ""
    license: str = "CC0-1.0"
    upstream_url: str = ""
    upstream_sha256: str = ""


def _component_licenses(files: Sequence[PayloadFile]) -> dict[str, str]:
    """Each component's licence: the one SPDX expression its files' licences add up to."""
    by_component: dict[str, list[str]] = {}
    for f in files:
        by_component.setdefault(f.component, []).append(f.license)
    return {name: combine_licenses(found) for name, found in by_component.items()}


def build_bundle(
    files: Sequence[PayloadFile],
    *,
    version: int,
    arch: str,
    channel: str,
    keys: Sequence[SigningKey],
    out_dir: Path,
    min_vigil_version: str,
    builder_version: str,
    kinds: dict[str, str] | None = None,
    components: Sequence[ComponentEntry] = (),
    created: datetime | None = None,
    valid_days: int = DEFAULT_VALID_DAYS,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Build ``out_dir/vigil-<version>-<arch>.bundle`` and return its path. ``log`` hears each step
    (``compress …``, ``sign …``)."""
    if version < 1:
        raise BundleError(f"version {version}", "bundle versions are integers from 1 up")
    if not keys:
        raise BundleError("bundle build", "at least one --key is needed to sign the manifest")
    if valid_days < 1:
        raise BundleError(f"valid days {valid_days}", "must be at least 1")
    if not out_dir.is_dir():
        raise BundleError(str(out_dir), "output directory does not exist")
    created = created or build_time()
    mtime = int(created.timestamp())
    kinds = kinds or {}
    name = bundle_filename(version, arch)
    target = out_dir / name

    with tempfile.TemporaryDirectory(prefix=".vigil-build-", dir=out_dir) as tmp_str:
        tmp = Path(tmp_str)
        # 1 SBOM
        sbom_path = tmp / "sbom.cdx.json"
        sbom_path.write_bytes(
            render_sbom(
                items_from_files(files, kinds, arch),
                bundle_name=name,
                bundle_version=version,
                created=created,
            )
        )
        sbom = _SbomFile(path=SBOM_PATH, source=sbom_path, version=str(version))
        all_files: list[PayloadFile] = [*files, sbom]
        by_path = {f.path: f for f in all_files}
        # 2 payload
        if log:
            log(f"compress {len(all_files)} files into the payload (zstd)")
        payload_path = tmp / "payload.tar.zst"
        payload, written = write_payload(
            all_files, payload_path, mtime=mtime, lead=SBOM_PATH, progress=progress
        )
        # 3 manifest
        components_by_name: dict[str, ComponentEntry] = {}
        licenses = _component_licenses(files)
        entries = []
        for w in written:
            f = by_path[w.path]
            entries.append(
                FileEntry(
                    path=w.path,
                    size=w.size,
                    sha256=w.sha256,
                    mode=w.mode,
                    component=f.component,
                    version=f.version,
                    license=f.license,
                    upstream_url=f.upstream_url,
                    upstream_sha256=f.upstream_sha256,
                )
            )
            if f.component not in components_by_name and f is not sbom:
                components_by_name[f.component] = ComponentEntry(
                    name=f.component,
                    version=f.version,
                    license=licenses[f.component],
                    kind=kinds.get(f.component, "file"),
                    upstream_url=f.upstream_url,
                    upstream_sha256=f.upstream_sha256,
                )
        for given in components:  # the catalog's own description wins over one derived from a file
            if given.name in components_by_name:
                if given.license in ("", NOASSERTION):  # e.g. vigil-deps: each wheel has its own
                    given = replace(given, license=licenses[given.name])
                components_by_name[given.name] = given
        manifest = Manifest(
            version=version,
            arch=arch,
            channel=channel,
            created=format_time(created),
            expires=format_time(created + timedelta(days=valid_days)),
            min_vigil_version=min_vigil_version,
            builder_version=builder_version,
            payload=payload,
            components=list(components_by_name.values()),
            files=entries,
        )
        manifest_bytes = manifest.to_json()
        # 4 signatures
        if log:
            log(f"sign the manifest with {len(keys)} key{'s' if len(keys) > 1 else ''}")
        comment = f"vigil bundle {name} version:{version} channel:{channel} created:{manifest.created}"
        signatures: dict[str, bytes] = {}
        for key in keys:
            if key.id_hex in signatures:
                raise BundleError(f"key {key.id_hex}", "given twice")
            sig = key.sign_minisig(manifest_bytes, trusted_comment=comment)
            signatures[key.id_hex] = sig.to_text().encode()
        # 5 assemble, then rename into place
        staged = tmp / name
        write_bundle(
            staged, manifest=manifest_bytes, signatures=signatures, payload=payload_path, mtime=mtime
        )
        os.chmod(staged, 0o644)
        os.replace(staged, target)
        fsync_dir(out_dir)
    return target
