"""Catalog and lock: what goes into a bundle, and exactly which bytes.

A catalog (``bundle/catalog/<channel>.yaml``) names components and where they come from; the lock
(``bundle/catalog/<channel>.lock.yaml``) pins every artifact to an exact URL and upstream sha256.
Building reads only the lock, so a bundle never depends on what an index or mirror says that day.

Catalog format::

    channel: debian
    arch: amd64                      # Debian architecture name
    components:
      - name: prometheus-node-exporter
        version: 1.5.0-1+b6
        license: Apache-2.0          # SPDX expression
        source: {kind: deb, package: prometheus-node-exporter, version: 1.5.0-1+b6}
        files:                       # name inside the source -> path in the component's payload
          usr/bin/prometheus-node-exporter: bin/node_exporter

Source kinds: ``url`` (``url`` + ``sha256`` or ``checksum_url``), ``deb`` (``package``,
``version``, optional ``ship``), ``wheel`` (``requirements`` or ``pyproject``, ``python_version``,
``platform``, optional ``index_url``), ``file`` (``path`` + ``sha256``), ``project`` (``path``, built
at build time).

``files`` keys: an exact member name; a directory ending in ``/`` (its whole subtree, mapped under
the value, which must then be ``""`` or end in ``/``); or a glob such as ``*.whl`` (each match
placed under the value directory by its basename). For a single file (a plain download, a wheel,
a local file) the member name is the file's own name.

A catalog may bring its own apt sources; its ``deb`` components then resolve against those, with
the keyring given (default ``/usr/share/keyrings/debian-archive-keyring.gpg``), not the build
host's apt::

    apt:
      keyring: /usr/share/keyrings/debian-archive-keyring.gpg
      sources:
        - deb http://deb.debian.org/debian trixie main

Locking such a catalog writes an apt configuration of its own under ``<cache>/apt/<channel>/``
(see :class:`vigil.bundle.fetchers.AptEnv`) and runs ``apt-get update`` with it first; the
host's ``/etc/apt`` is neither read nor written.

A ``deb`` source is unpacked (``files`` name members of its data archive) unless it says
``ship: deb``: then the .deb itself is shipped whole, its ``files`` key matching the package's
file name (``"*.deb": debs/``), for roles that install it on hosts with ``dpkg -i``.

This module does the I/O: reading catalog and lock files, resolving a catalog against Debian's
indexes, the Python package index and vendors' checksum files (through the fetchers), and writing
the lock. What a valid catalog or lock is lives in :mod:`vigil.bundle.catalog_model`, which works
on documents already loaded and is re-exported here, so ``from vigil.bundle.catalog import …``
keeps working for the data classes and :func:`check_lock_current`.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from vigil.basics.atomic import write_file_atomic
from vigil.basics.bounded import load_yaml, read_bounded
from vigil.bundle.catalog_model import (
    DEB_SHIP,
    DEFAULT_KEYRING,
    KINDS,
    LOCK_FORMAT,
    AptSettings,
    AptSource,
    Catalog,
    Component,
    DebSource,
    FileSource,
    Lock,
    LockedArtifact,
    LockedComponent,
    ProjectSource,
    Source,
    UrlSource,
    WheelSource,
    check_lock_current,
    is_channel_name,
    parse_catalog,
    parse_lock,
)
from vigil.bundle.errors import CatalogError

if TYPE_CHECKING:
    from vigil.bundle.fetchers import AptEnv

__all__ = [
    "CATALOG_DIR",
    "DEB_SHIP",
    "DEFAULT_KEYRING",
    "KINDS",
    "LOCK_FORMAT",
    "AptSettings",
    "AptSource",
    "Catalog",
    "Component",
    "DebSource",
    "FileSource",
    "Lock",
    "LockedArtifact",
    "LockedComponent",
    "ProjectSource",
    "Source",
    "UrlSource",
    "WheelSource",
    "catalog_path",
    "check_lock_current",
    "dump_lock",
    "load_catalog",
    "load_lock",
    "lock_channel",
    "lock_document",
]

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"


# --- read ---------------------------------------------------------------------------------------


def _read_yaml(path: Path) -> tuple[bytes, Any]:
    obj = str(path)
    raw = read_bounded(path, error=CatalogError)  # --catalog-dir: any directory an operator names
    try:
        return raw, load_yaml(raw, obj, error=CatalogError)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise CatalogError(obj, f"not valid YAML{at}: {getattr(e, 'problem', None) or e}") from None


def _display(path: Path) -> str:
    """The path as an operator typed it, relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_catalog(path: Path | str) -> Catalog:
    """Read and validate a catalog; raises :class:`CatalogError` naming the first problem."""
    path = Path(path)
    raw, data = _read_yaml(path)
    return parse_catalog(data, path=path, sha256=hashlib.sha256(raw).hexdigest(), display=_display(path))


def load_lock(path: Path | str) -> Lock:
    """Read and validate a lock file; raises :class:`CatalogError` naming the first problem."""
    path = Path(path)
    _, data = _read_yaml(path)
    return parse_lock(data, path=path, base_dir=path.resolve().parent, display=_display(path))


def catalog_path(channel: str, catalog_dir: Path = CATALOG_DIR) -> Path:
    """``<catalog_dir>/<channel>.yaml``."""
    if not is_channel_name(channel):
        raise CatalogError(channel, "not a valid channel name")
    return Path(catalog_dir) / f"{channel}.yaml"


# --- lock: resolve ------------------------------------------------------------------------------


def _lock_component(cat: Catalog, comp: Component, apt: AptEnv | None = None) -> dict[str, Any]:
    # the resolvers, imported only to lock: reading a catalog or a lock needs none of them
    from vigil.bundle.fetchers import _apt, _http, _pip

    obj = f"{cat.obj}: component {comp.name!r}"
    src = comp.source
    version = comp.version
    artifacts: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    if isinstance(src, UrlSource):
        basename = src.url.rstrip("/").rsplit("/", 1)[-1]
        if src.sha256:
            sha = src.sha256
        elif src.checksum_url:
            text = _http.read_url(src.checksum_url).decode("utf-8", "replace")
            sha = _http.sha256_from_checksum_file(text, basename, source=src.checksum_url)
        else:
            raise CatalogError(
                obj,
                f"url source {src.url} has neither sha256 nor checksum_url; add "
                "the vendor's published sha256 to the catalog",
            )
        artifacts.append(
            {"filename": basename, "url": src.url, "sha256": sha, "checksum_url": src.checksum_url}
        )
    elif isinstance(src, DebSource):
        pkg = _apt.resolve(src.package, src.version, cat.arch, obj=obj, apt=apt)
        artifacts.append(
            {
                "filename": pkg.filename,
                "url": pkg.url,
                "sha256": pkg.sha256,
                "size": pkg.size,
                "name": pkg.package,
                "version": pkg.version,
            }
        )
        if src.ship != "files":
            extra = {"ship": src.ship}
    elif isinstance(src, WheelSource):
        reqs = list(src.requirements)
        if src.pyproject is not None:
            pyproject = cat.resolve_path(src.pyproject)
            reqs += _pip.pyproject_dependencies(pyproject, obj=obj)
            version = version or _pip.pyproject_version(pyproject, obj=obj)
        extra = {
            "requirements": reqs,
            "python_version": src.python_version,
            "platforms": list(src.platforms),
            "index_url": src.index_url,
        }
        for w in _pip.resolve(
            reqs,
            python_version=src.python_version,
            platforms=list(src.platforms),
            index_url=src.index_url,
            obj=obj,
        ):
            artifacts.append(
                {
                    "filename": w.filename,
                    "url": w.url,
                    "sha256": w.sha256,
                    "name": w.name,
                    "version": w.version,
                    "license": w.license,
                }
            )
    elif isinstance(src, FileSource):
        p = cat.resolve_path(src.path)
        if not p.is_file():
            raise CatalogError(obj, f"file {src.path} does not exist")
        actual, size = _http.hash_file(p)
        if actual != src.sha256:
            raise CatalogError(
                obj, f"file {src.path}: sha256 mismatch: expected {src.sha256[:12]}…, got {actual[:12]}…"
            )
        artifacts.append({"filename": p.name, "path": src.path, "sha256": actual, "size": size})
    else:
        project = cat.resolve_path(src.path)
        if not (project / "pyproject.toml").is_file():
            raise CatalogError(obj, f"project {src.path} has no pyproject.toml")
        version = version or _pip.pyproject_version(project / "pyproject.toml", obj=obj)
        artifacts.append({"filename": "*.whl", "path": src.path})
    artifacts = [{k: v for k, v in a.items() if v is not None} for a in artifacts]
    artifacts.sort(key=lambda a: a["filename"])
    return {
        "name": comp.name,
        "version": version,
        "license": comp.license,
        "kind": src.kind,
        **extra,
        "artifacts": artifacts,
        "files": dict(comp.files),
    }


def lock_document(cat: Catalog, *, cache_dir: Path | None = None) -> dict[str, Any]:
    """The lock for ``cat`` as plain data (resolving every component now).

    A catalog with ``apt:`` is resolved through its own apt configuration under
    ``<cache_dir>/apt/<channel>/`` (default: the vigil cache), whose lists are updated first.
    """
    apt = _channel_apt(cat, cache_dir)
    doc: dict[str, Any] = {
        "lock_format": LOCK_FORMAT,
        "channel": cat.channel,
        "arch": cat.arch,
        "catalog_sha256": cat.sha256,
    }
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        doc["locked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch)))
    doc["components"] = sorted(
        (_lock_component(cat, c, apt) for c in cat.components), key=lambda c: c["name"]
    )
    return doc


def _channel_apt(cat: Catalog, cache_dir: Path | None) -> AptEnv | None:
    """The catalog's own apt, its lists freshly updated; None without ``apt:`` or deb components."""
    if cat.apt is None or not any(isinstance(c.source, DebSource) for c in cat.components):
        return None
    from vigil.bundle.fetchers import apt_env, default_cache_dir

    apt = apt_env(cat, cache_dir or default_cache_dir())
    assert apt is not None  # noqa: S101 - cat.apt is set
    apt.prepare(update=True, obj=f"{cat.obj}: apt")
    return apt


def dump_lock(doc: Mapping[str, Any]) -> bytes:
    header = (
        f"# Lock for channel {doc['channel']!s}: written by `vigil bundle lock`, do not edit.\n"
        "# Every artifact is pinned to an exact URL (or path) and its upstream sha256.\n"
    )
    body = yaml.safe_dump(
        dict(doc), sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True
    )
    return (header + body).encode("utf-8")


def lock_channel(catalog_path: Path | str, *, cache_dir: Path | None = None) -> Path:
    """Resolve the catalog at ``catalog_path`` and write ``<channel>.lock.yaml`` beside it.

    The lock is written to a temporary file and renamed into place, so a failed lock leaves the
    previous one untouched. ``cache_dir`` holds a catalog's own apt configuration (default: the
    vigil cache). Returns the lock's path.
    """
    cat = load_catalog(catalog_path)
    data = dump_lock(lock_document(cat, cache_dir=cache_dir))
    out = cat.lock_path
    write_file_atomic(out, data, mode=0o644)
    # the lock must read back as what we meant
    load_lock(out)
    return out
