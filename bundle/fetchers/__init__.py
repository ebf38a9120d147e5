"""Fetchers: turn a locked component into verified files staged for the bundle.

Every upstream byte is checked against the sha256 recorded in the lock before it is used:
downloads land in a content-addressed cache (``<cache>/sha256/<hex>``) only after their hash
matched, and a cached file is hashed again each time it is taken from the cache.

A catalog with ``apt:`` has its own apt configuration under ``<cache>/apt/<channel>/``
(:func:`apt_env`); its deb components are locked and fetched through it, never the host's apt.

Public API::

    fetch_component(locked_component, cache_dir, dest_dir, progress=None, apt=None) -> list[StagedFile]
    apt_env(catalog, cache_dir) -> AptEnv | None
    default_cache_dir() -> Path
    build_project_wheel(project_dir, out_dir) -> Path
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from vigil.bundle.errors import FetchError
from vigil.bundle.fetchers import _apt, _extract
from vigil.bundle.fetchers._apt import AptEnv
from vigil.bundle.fetchers._http import Cache, Progress, copy_file, hash_file
from vigil.bundle.fetchers._pip import wheel_file_license
from vigil.bundle.fetchers._project import build_project_wheel
from vigil.bundle.sbom import NOASSERTION

if TYPE_CHECKING:
    from vigil.bundle.catalog import Catalog, LockedArtifact, LockedComponent

__all__ = [
    "AptEnv",
    "StagedFile",
    "apt_env",
    "build_project_wheel",
    "default_cache_dir",
    "fetch_component",
    "payload_prefix",
]

_EXEC_DIRS = ("bin", "sbin")


@dataclass(frozen=True)
class StagedFile:
    """One file ready to go into a bundle payload."""

    path: str  # payload-relative POSIX path, e.g. components/victoria-metrics/bin/vmalert
    source: Path  # absolute path of the staged bytes
    size: int
    sha256: str
    mode: int  # 0o755 for executables, 0o644 otherwise
    component: str
    version: str
    license: str
    upstream_url: str  # where the upstream artifact came from (URL, or file:// for local sources)
    upstream_sha256: str  # the upstream artifact's sha256 (for extracted files: the archive's)


def payload_prefix(component: str) -> str:
    return f"components/{component}"


def default_cache_dir() -> Path:
    """``$VIGIL_CACHE``, else ``$XDG_CACHE_HOME/vigil``, else ``~/.cache/vigil``."""
    env = os.environ.get("VIGIL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vigil"


def apt_env(catalog: Catalog, cache_dir: Path) -> AptEnv | None:
    """The channel's own apt configuration (``<cache_dir>/apt/<channel>``), or None without ``apt:``.

    Nothing is written until the first apt call needs it.
    """
    if catalog.apt is None:
        return None
    root = Path(cache_dir) / "apt" / catalog.channel
    return AptEnv(catalog.apt, catalog.arch, root, channel=catalog.channel)


def fetch_component(
    locked_component: LockedComponent,
    cache_dir: Path,
    dest_dir: Path,
    progress: Progress | None = None,
    apt: AptEnv | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> list[StagedFile]:
    """Fetch, verify and stage every file of one locked component.

    Files are written under ``dest_dir/components/<name>/…`` and described by the returned
    :class:`StagedFile` list, sorted by path. ``progress(done_bytes, total_bytes | None)`` is called
    while downloading. ``apt`` (from :func:`apt_env`) is the channel's own apt for deb components;
    None uses the host's. Raises :class:`FetchError` on any download or checksum failure.
    """
    comp = locked_component
    cache = Cache(Path(cache_dir))
    dest_dir = Path(dest_dir).resolve()
    out_dir = dest_dir / payload_prefix(comp.name)
    staged: list[StagedFile] = []
    files = comp.files_map
    for art in comp.artifacts:
        if comp.kind == "project":
            staged += _stage_project(comp, art, cache, out_dir)
            continue
        local = _obtain(comp, art, cache, progress, apt)
        upstream_url = art.url or local_uri(comp, art)
        assert art.sha256 is not None  # noqa: S101 - narrows the type
        if log:  # _obtain admits nothing into the cache that does not hash to the lock's sha256
            log(f"check {comp.name} {art.filename}: sha256 {art.sha256[:12]} as locked")
            log(f"stage {comp.name} {art.filename}")
        if comp.kind == "deb" and comp.ship == "deb":
            extracted = _stage_single(comp, art, local, out_dir, per_artifact=False)
        elif comp.kind == "deb":
            obj = f"{comp.name}: {art.filename}"
            extracted = _extract.extract_deb(local, files, out_dir, obj=obj)
        elif comp.kind == "url" and _extract.is_archive(art.filename):
            obj = f"{comp.name}: {art.filename}"
            extracted = _extract.extract_archive(local, art.filename, files, out_dir, obj=obj)
        else:
            extracted = _stage_single(comp, art, local, out_dir, per_artifact=comp.kind == "wheel")
        for e in extracted:
            staged.append(_staged(comp, art, e, upstream_url))
    if comp.kind == "wheel":
        _check_all_used(comp)
    return sorted(staged, key=lambda s: s.path)


def local_uri(comp: LockedComponent, art: LockedArtifact) -> str:
    assert art.path is not None  # noqa: S101 - narrows the type
    return comp.resolve_path(art.path).as_uri()


def _obtain(
    comp: LockedComponent,
    art: LockedArtifact,
    cache: Cache,
    progress: Progress | None,
    apt: AptEnv | None = None,
) -> Path:
    """The verified bytes of one artifact, in the cache."""
    assert art.sha256 is not None  # noqa: S101 - narrows the type
    if comp.kind == "file":
        src = comp.resolve_path(str(art.path))
        if not src.is_file():
            raise FetchError(str(src), "file does not exist")
        hit = cache.lookup(art.sha256)
        if hit is not None:
            return hit
        work = cache.tempdir()
        try:
            tmp = work / "file"
            shutil.copyfile(src, tmp)
            actual, size = hash_file(tmp)
            return cache.admit(
                tmp, expected=art.sha256, actual=actual, what=str(src), size=size, expected_size=art.size
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    assert art.url is not None  # noqa: S101 - narrows the type
    if comp.kind == "deb":
        return _obtain_deb(comp, art, cache, progress, apt)
    return cache.fetch(art.url, art.sha256, size=art.size, progress=progress)


def _obtain_deb(
    comp: LockedComponent,
    art: LockedArtifact,
    cache: Cache,
    progress: Progress | None,
    apt: AptEnv | None = None,
) -> Path:
    """``apt-get download`` the exact package (through ``apt`` when given, else the host's apt);
    if apt cannot, download the locked URL."""
    assert art.sha256 is not None and art.url is not None  # noqa: S101 - narrows the type
    hit = cache.lookup(art.sha256)
    if hit is not None:
        return hit
    obj = f"{comp.name}: {art.filename}"
    work = cache.tempdir()
    try:
        try:
            arch = art.filename[: -len(".deb")].rsplit("_", 1)[-1] if art.filename.endswith(".deb") else ""
            deb = _apt.download(
                art.name or comp.name, art.version or comp.version, arch, work, obj=obj, apt=apt
            )
        except FetchError as apt_error:
            try:
                return cache.fetch(art.url, art.sha256, size=art.size, progress=progress)
            except FetchError as url_error:
                raise FetchError(obj, f"{apt_error.reason}; and from {art.url}: {url_error.reason}") from None
        actual, size = hash_file(deb)
        path = cache.admit(
            deb, expected=art.sha256, actual=actual, what=obj, size=size, expected_size=art.size
        )
        if progress is not None:
            progress(size, size)
        return path
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stage_single(
    comp: LockedComponent, art: LockedArtifact, local: Path, out_dir: Path, *, per_artifact: bool
) -> list[_extract.Extracted]:
    """A file that is shipped as it is (a plain download, a local file, a wheel)."""
    sel = _extract.Selector(comp.files_map, obj=f"{comp.name}: {art.filename}")
    target = sel.target(art.filename)
    if not per_artifact:
        sel.finish()
    if target is None:
        raise FetchError(f"{comp.name}: {art.filename}", "no files entry names this file")
    exe = PurePosixPath(target).parts[0] in _EXEC_DIRS
    dest = out_dir / target
    copy_file(local, dest, mode=0o755 if exe else 0o644)
    sha, size = hash_file(dest)
    return [_extract.Extracted(target=target, path=dest, size=size, sha256=sha, executable=exe)]


def _check_all_used(comp: LockedComponent) -> None:
    sel = _extract.Selector(comp.files_map, obj=comp.name)
    for art in comp.artifacts:
        sel.target(art.filename)
    sel.finish()


def _stage_project(
    comp: LockedComponent, art: LockedArtifact, cache: Cache, out_dir: Path
) -> list[StagedFile]:
    project = comp.resolve_path(str(art.path))
    work = cache.tempdir()
    try:
        wheel = build_project_wheel(project, work)
        extracted = _stage_single(
            comp, art.__class__(filename=wheel.name, path=art.path), wheel, out_dir, per_artifact=False
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    e = extracted[0]
    return [
        StagedFile(
            path=f"{payload_prefix(comp.name)}/{e.target}",
            source=e.path,
            size=e.size,
            sha256=e.sha256,
            mode=0o644,
            component=comp.name,
            version=comp.version,
            license=comp.license,
            upstream_url=project.as_uri(),
            upstream_sha256=e.sha256,
        )
    ]


def _staged(
    comp: LockedComponent, art: LockedArtifact, e: _extract.Extracted, upstream_url: str
) -> StagedFile:
    assert art.sha256 is not None  # noqa: S101 - narrows the type
    per_wheel = comp.kind == "wheel"
    return StagedFile(
        path=f"{payload_prefix(comp.name)}/{e.target}",
        source=e.path,
        size=e.size,
        sha256=e.sha256,
        mode=0o755 if e.executable else 0o644,
        component=comp.name,
        version=(art.version if per_wheel and art.version else comp.version),
        license=_wheel_license(comp, art, e.path) if per_wheel else comp.license,
        upstream_url=upstream_url,
        upstream_sha256=art.sha256,
    )


def _wheel_license(comp: LockedComponent, art: LockedArtifact, staged: Path) -> str:
    """A wheel's licence: its own METADATA's (the verified bytes), else the lock's, else the catalog's."""
    found = wheel_file_license(staged)
    if found != NOASSERTION:
        return found
    return art.license or comp.license
