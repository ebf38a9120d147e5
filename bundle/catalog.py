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
``version``, optional ``ship``), ``wheel`` (``requirements`` or ``pyproject``, ``python_version``, ``platform``,
optional ``index_url``), ``file`` (``path`` + ``sha256``), ``project`` (``path``, built at build time).

``files`` keys: an exact member name; a directory ending in ``/`` (its whole subtree, mapped under
the value, which must then be ``""`` or end in ``/``); or a glob such as ``*.whl`` (each match
placed under the value directory by its basename). For a single file (a plain download, a wheel,
a local file) the member name is the file's own name.

A ``deb`` source is unpacked (``files`` name members of its data archive) unless it says
``ship: deb``: then the .deb itself is shipped whole, its ``files`` key matching the package's
file name (``"*.deb": debs/``), for roles that install it on hosts with ``dpkg -i``.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Union

import yaml

from vigil.bundle.errors import CatalogError

KINDS = ("url", "deb", "wheel", "file", "project")
DEB_SHIP = ("files", "deb")  # a deb source: unpack the listed members, or ship the .deb whole
CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
LOCK_FORMAT = 1

_NAME = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
_SPDX = re.compile(r"^[A-Za-z0-9.+\-:() ]+$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_GLOB = re.compile(r"[*?\[]")


# --- catalog ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UrlSource:
    url: str
    sha256: str | None = None
    checksum_url: str | None = None
    kind: Literal["url"] = "url"


@dataclass(frozen=True)
class DebSource:
    package: str
    version: str
    ship: Literal["files", "deb"] = "files"
    kind: Literal["deb"] = "deb"


@dataclass(frozen=True)
class WheelSource:
    python_version: str
    platforms: tuple[str, ...]
    requirements: tuple[str, ...] = ()
    pyproject: str | None = None  # read [project].dependencies from here (relative to the catalog)
    index_url: str = "https://pypi.org/simple"
    kind: Literal["wheel"] = "wheel"


@dataclass(frozen=True)
class FileSource:
    path: str
    sha256: str
    kind: Literal["file"] = "file"


@dataclass(frozen=True)
class ProjectSource:
    path: str
    kind: Literal["project"] = "project"


Source = Union[UrlSource, DebSource, WheelSource, FileSource, ProjectSource]


@dataclass(frozen=True)
class Component:
    name: str
    version: str | None  # None only for wheel/project sources that take it from a pyproject
    license: str
    source: Source
    files: tuple[tuple[str, str], ...]  # (name inside the source, payload path), sorted

    @property
    def files_map(self) -> dict[str, str]:
        return dict(self.files)


@dataclass(frozen=True)
class Catalog:
    path: Path
    channel: str
    arch: str
    components: tuple[Component, ...]

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(f"{self.channel}.lock.yaml")

    def resolve_path(self, rel: str) -> Path:
        """A catalog-relative path made absolute."""
        return (self.path.parent / rel).resolve()


# --- lock ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockedArtifact:
    """One upstream file: a .deb, an archive, a wheel, a local file, or a project to build."""

    filename: str
    url: str | None = None  # http(s)/file URL; None for file/project sources
    path: str | None = None  # file/project sources: path relative to the lock file (or absolute)
    sha256: str | None = None  # None only for project sources (built at build time)
    size: int | None = None
    name: str | None = None  # wheels and debs: the distribution/package name
    version: str | None = None  # wheels and debs: their own version
    license: str | None = None  # wheels: the licence the wheel declares
    checksum_url: str | None = None  # url sources: where the sha256 was read


@dataclass(frozen=True)
class LockedComponent:
    name: str
    version: str
    license: str
    kind: str
    artifacts: tuple[LockedArtifact, ...]
    files: tuple[tuple[str, str], ...]
    ship: str = "files"  # deb only: "deb" ships the .deb whole instead of unpacking it
    base_dir: Path = field(default=Path("."), compare=False)  # directory of the lock file

    @property
    def files_map(self) -> dict[str, str]:
        return dict(self.files)

    def resolve_path(self, rel: str) -> Path:
        return (self.base_dir / rel).resolve()


@dataclass(frozen=True)
class Lock:
    path: Path
    channel: str
    arch: str
    catalog_sha256: str
    components: tuple[LockedComponent, ...]
    locked_at: str | None = None

    def component(self, name: str) -> LockedComponent:
        for c in self.components:
            if c.name == name:
                return c
        raise CatalogError(str(self.path), f"no component {name!r} in this lock")


# --- validation helpers -------------------------------------------------------------------------


class _Check:
    def __init__(self, obj: str) -> None:
        self.obj = obj

    def fail(self, where: str, reason: str) -> CatalogError:
        return CatalogError(self.obj, f"{where}: {reason}" if where else reason)

    def mapping(self, value: object, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a mapping, not {_typename(value)}")
        for k in value:
            if not isinstance(k, str):
                raise self.fail(where, f"key {k!r} must be a string")
        return value

    def keys(self, data: Mapping[str, Any], where: str, required: tuple[str, ...],
             optional: tuple[str, ...] = ()) -> None:
        for k in required:
            if k not in data:
                raise self.fail(where, f"missing {k!r}")
        for k in sorted(data):
            if k not in required and k not in optional:
                allowed = ", ".join((*required, *optional))
                raise self.fail(where, f"unknown key {k!r} (allowed: {allowed})")

    def string(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = True
               ) -> str | None:
        value = data.get(key)
        if value is None and not required and key not in data:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"{key} must be a non-empty string, not {_typename(value)}")
        return value

    def sha256(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = True
               ) -> str | None:
        value = self.string(data, key, where, required=required)
        if value is not None and not _HEX64.match(value):
            raise self.fail(where, f"{key} must be 64 lowercase hex digits, not {value!r}")
        return value

    def url(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = True
            ) -> str | None:
        value = self.string(data, key, where, required=required)
        if value is not None and value.split(":", 1)[0] not in ("http", "https", "file"):
            raise self.fail(where, f"{key} {value!r} must be an http, https or file URL")
        return value


def _typename(value: object) -> str:
    return {type(None): "null", str: "a string", int: "an integer", float: "a number",
            bool: "a boolean", list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _clean_rel(p: str) -> bool:
    if not p or p.startswith("/") or "\\" in p or "\0" in p:
        return False
    parts = PurePosixPath(p).parts
    return all(part not in ("..", ".") for part in parts) and not p.startswith("./")


def _files(chk: _Check, value: object, where: str) -> tuple[tuple[str, str], ...]:
    mapping = chk.mapping(value, f"{where}: files")
    if not mapping:
        raise chk.fail(where, "files must name at least one file")
    targets: set[str] = set()
    for key, target in sorted(mapping.items()):
        if not isinstance(target, str):
            raise chk.fail(where, f"files[{key!r}] must be a string path, not {_typename(target)}")
        if not _clean_rel(key.rstrip("/")):
            raise chk.fail(where, f"files key {key!r} must be a relative path without '..'")
        if target and not _clean_rel(target.rstrip("/")):
            raise chk.fail(where, f"files[{key!r}] target {target!r} must be a relative path "
                                  "without '..'")
        is_dir = key.endswith("/") or bool(_GLOB.search(key))
        if is_dir and target and not target.endswith("/"):
            raise chk.fail(where, f"files[{key!r}] maps several files, so its target must be a "
                                  "directory ending in '/'")
        if not is_dir and (not target or target.endswith("/")):
            raise chk.fail(where, f"files[{key!r}] target must be a file path")
        if target in targets:
            raise chk.fail(where, f"files target {target!r} appears twice")
        targets.add(target)
    return tuple(sorted(mapping.items()))


def _source(chk: _Check, value: object, where: str) -> Source:
    data = chk.mapping(value, f"{where}: source")
    kind = data.get("kind")
    if kind not in KINDS:
        raise chk.fail(where, f"source.kind {kind!r} is not one of {', '.join(KINDS)}")
    w = f"{where}: source"
    if kind == "url":
        chk.keys(data, w, ("kind", "url"), ("sha256", "checksum_url"))
        sha = chk.sha256(data, "sha256", w, required=False)
        sums = chk.url(data, "checksum_url", w, required=False)
        if sha is not None and sums is not None:
            raise chk.fail(w, "give sha256 or checksum_url, not both")
        return UrlSource(url=str(chk.url(data, "url", w)), sha256=sha, checksum_url=sums)
    if kind == "deb":
        chk.keys(data, w, ("kind", "package", "version"), ("ship",))
        ship = data.get("ship", "files")
        if ship not in DEB_SHIP:
            raise chk.fail(w, f"ship {ship!r} is not one of {', '.join(DEB_SHIP)}")
        return DebSource(package=str(chk.string(data, "package", w)),
                         version=str(chk.string(data, "version", w)), ship=ship)
    if kind == "wheel":
        chk.keys(data, w, ("kind", "python_version", "platform"),
                 ("requirements", "pyproject", "index_url"))
        pyver = str(chk.string(data, "python_version", w))
        if not re.fullmatch(r"3\.\d{1,2}", pyver):
            raise chk.fail(w, f"python_version {pyver!r} must look like '3.11'")
        plat = data["platform"]
        platforms = [plat] if isinstance(plat, str) else plat
        if not isinstance(platforms, list) or not platforms or not all(
            isinstance(p, str) and p for p in platforms
        ):
            raise chk.fail(w, "platform must be a string or a list of strings")
        reqs = data.get("requirements", [])
        if not isinstance(reqs, list) or not all(isinstance(r, str) and r for r in reqs):
            raise chk.fail(w, "requirements must be a list of strings")
        pyproject = chk.string(data, "pyproject", w, required=False)
        if not reqs and pyproject is None:
            raise chk.fail(w, "give requirements or pyproject")
        index = chk.url(data, "index_url", w, required=False) or WheelSource.index_url
        if not index.startswith("https://"):
            raise chk.fail(w, f"index_url {index!r} must be https")
        return WheelSource(python_version=pyver, platforms=tuple(platforms),
                           requirements=tuple(reqs), pyproject=pyproject, index_url=index)
    if kind == "file":
        chk.keys(data, w, ("kind", "path", "sha256"))
        return FileSource(path=str(chk.string(data, "path", w)), sha256=str(chk.sha256(data, "sha256", w)))
    chk.keys(data, w, ("kind", "path"))
    return ProjectSource(path=str(chk.string(data, "path", w)))


def _component(chk: _Check, value: object, index: int) -> Component:
    data = chk.mapping(value, f"components[{index}]")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise chk.fail(f"components[{index}]", f"name {name!r} must be lowercase letters, digits, "
                                               "'.', '_', '+', '-'")
    where = f"component {name!r}"
    chk.keys(data, where, ("name", "license", "source", "files"), ("version",))
    source = _source(chk, data["source"], where)
    version = chk.string(data, "version", where, required=False)
    if version is None:
        takes_version = isinstance(source, ProjectSource) or (
            isinstance(source, WheelSource) and source.pyproject is not None
        )
        if not takes_version:
            raise chk.fail(where, "missing 'version'")
    lic = chk.string(data, "license", where)
    if lic is None or not _SPDX.match(lic):
        raise chk.fail(where, f"license {lic!r} is not an SPDX expression")
    return Component(name=name, version=version, license=lic, source=source,
                     files=_files(chk, data["files"], where))


def _read_yaml(path: Path) -> tuple[bytes, Any]:
    obj = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise CatalogError(obj, f"cannot read: {e.strerror or e}") from None
    try:
        return raw, yaml.safe_load(raw)
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
    _, data = _read_yaml(path)
    chk = _Check(_display(path))
    data = chk.mapping(data, "")
    chk.keys(data, "", ("channel", "arch", "components"))
    channel = str(chk.string(data, "channel", ""))
    if not _NAME.match(channel):
        raise chk.fail("", f"channel {channel!r} must be lowercase letters, digits, '.', '_', '-'")
    arch = str(chk.string(data, "arch", ""))
    comps = data["components"]
    if not isinstance(comps, list) or not comps:
        raise chk.fail("", "components must be a non-empty list")
    components = tuple(_component(chk, c, i) for i, c in enumerate(comps))
    seen: set[str] = set()
    for c in components:
        if c.name in seen:
            raise chk.fail(f"component {c.name!r}", "appears twice")
        seen.add(c.name)
    return Catalog(path=path, channel=channel, arch=arch, components=components)


def catalog_path(channel: str, catalog_dir: Path = CATALOG_DIR) -> Path:
    """``<catalog_dir>/<channel>.yaml``."""
    if not _NAME.match(channel):
        raise CatalogError(channel, "not a valid channel name")
    return Path(catalog_dir) / f"{channel}.yaml"


# --- lock: resolve ------------------------------------------------------------------------------


def _lock_component(cat: Catalog, comp: Component) -> dict[str, Any]:
    from vigil.bundle.fetchers import _apt, _http, _pip  # the resolvers; imported late (they import us)

    obj = f"{_display(cat.path)}: component {comp.name!r}"
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
            raise CatalogError(obj, f"url source {src.url} has neither sha256 nor checksum_url; add "
                                    "the vendor's published sha256 to the catalog")
        artifacts.append({"filename": basename, "url": src.url, "sha256": sha,
                          "checksum_url": src.checksum_url})
    elif isinstance(src, DebSource):
        pkg = _apt.resolve(src.package, src.version, cat.arch, obj=obj)
        artifacts.append({"filename": pkg.filename, "url": pkg.url, "sha256": pkg.sha256,
                          "size": pkg.size, "name": pkg.package, "version": pkg.version})
        if src.ship != "files":
            extra = {"ship": src.ship}
    elif isinstance(src, WheelSource):
        reqs = list(src.requirements)
        if src.pyproject is not None:
            pyproject = cat.resolve_path(src.pyproject)
            reqs += _pip.pyproject_dependencies(pyproject, obj=obj)
            version = version or _pip.pyproject_version(pyproject, obj=obj)
        extra = {"requirements": reqs, "python_version": src.python_version,
                 "platforms": list(src.platforms), "index_url": src.index_url}
        for w in _pip.resolve(reqs, python_version=src.python_version,
                              platforms=list(src.platforms), index_url=src.index_url, obj=obj):
            artifacts.append({"filename": w.filename, "url": w.url, "sha256": w.sha256,
                              "name": w.name, "version": w.version, "license": w.license})
    elif isinstance(src, FileSource):
        p = cat.resolve_path(src.path)
        if not p.is_file():
            raise CatalogError(obj, f"file {src.path} does not exist")
        actual, size = _http.hash_file(p)
        if actual != src.sha256:
            raise CatalogError(obj, f"file {src.path}: sha256 mismatch: expected "
                                    f"{src.sha256[:12]}…, got {actual[:12]}…")
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


def lock_document(cat: Catalog) -> dict[str, Any]:
    """The lock for ``cat`` as plain data (resolving every component now)."""
    doc: dict[str, Any] = {
        "lock_format": LOCK_FORMAT,
        "channel": cat.channel,
        "arch": cat.arch,
        "catalog_sha256": hashlib.sha256(cat.path.read_bytes()).hexdigest(),
    }
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        doc["locked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch)))
    doc["components"] = sorted((_lock_component(cat, c) for c in cat.components),
                               key=lambda c: c["name"])
    return doc


def dump_lock(doc: Mapping[str, Any]) -> bytes:
    header = (f"# Lock for channel {doc['channel']!s}: written by `vigil bundle lock`, do not edit.\n"
              "# Every artifact is pinned to an exact URL (or path) and its upstream sha256.\n")
    body = yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False, width=4096,
                          allow_unicode=True)
    return (header + body).encode("utf-8")


def lock_channel(catalog_path: Path | str) -> Path:
    """Resolve the catalog at ``catalog_path`` and write ``<channel>.lock.yaml`` beside it.

    The lock is written to a temporary file and renamed into place, so a failed lock leaves the
    previous one untouched. Returns the lock's path.
    """
    cat = load_catalog(catalog_path)
    data = dump_lock(lock_document(cat))
    out = cat.lock_path
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # the lock must read back as what we meant
    load_lock(out)
    return out


# --- lock: load ---------------------------------------------------------------------------------

_ART_KEYS = ("filename", "url", "path", "sha256", "size", "name", "version", "license", "checksum_url")


def _artifact(chk: _Check, value: object, where: str, kind: str) -> LockedArtifact:
    data = chk.mapping(value, where)
    chk.keys(data, where, ("filename",), _ART_KEYS[1:])
    fields: dict[str, Any] = {}
    for k in _ART_KEYS:
        if k == "size":
            size = data.get("size")
            if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
                raise chk.fail(where, f"size must be a non-negative integer, not {size!r}")
            fields["size"] = size
        elif k == "sha256":
            fields[k] = chk.sha256(data, k, where, required=kind != "project")
        elif k in ("url", "checksum_url"):
            fields[k] = chk.url(data, k, where, required=False)
        else:
            fields[k] = chk.string(data, k, where, required=k == "filename")
    if kind in ("url", "deb", "wheel") and fields["url"] is None:
        raise chk.fail(where, "missing 'url'")
    if kind in ("file", "project") and fields["path"] is None:
        raise chk.fail(where, "missing 'path'")
    if kind == "wheel" and not str(fields["url"]).startswith("https://"):
        raise chk.fail(where, f"wheel url {fields['url']!r} must be https")
    return LockedArtifact(**fields)


def _locked_component(chk: _Check, value: object, index: int, base: Path) -> LockedComponent:
    data = chk.mapping(value, f"components[{index}]")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise chk.fail(f"components[{index}]", f"name {name!r} is not a valid component name")
    where = f"component {name!r}"
    chk.keys(data, where, ("name", "version", "license", "kind", "artifacts", "files"),
             ("requirements", "python_version", "platforms", "index_url", "ship"))
    kind = data["kind"]
    if kind not in KINDS:
        raise chk.fail(where, f"kind {kind!r} is not one of {', '.join(KINDS)}")
    ship = data.get("ship", "files")
    if "ship" in data and (kind != "deb" or ship not in DEB_SHIP):
        raise chk.fail(where, f"ship {ship!r} is only for deb components, one of {', '.join(DEB_SHIP)}")
    arts = data["artifacts"]
    if not isinstance(arts, list) or not arts:
        raise chk.fail(where, "artifacts must be a non-empty list")
    artifacts = tuple(_artifact(chk, a, f"{where}: artifacts[{i}]", kind) for i, a in enumerate(arts))
    return LockedComponent(
        name=name, version=str(chk.string(data, "version", where)),
        license=str(chk.string(data, "license", where)), kind=kind, artifacts=artifacts,
        files=_files(chk, data["files"], where), ship=str(ship), base_dir=base,
    )


def load_lock(path: Path | str) -> Lock:
    """Read and validate a lock file; raises :class:`CatalogError` naming the first problem."""
    path = Path(path)
    _, data = _read_yaml(path)
    chk = _Check(_display(path))
    data = chk.mapping(data, "")
    chk.keys(data, "", ("lock_format", "channel", "arch", "catalog_sha256", "components"),
             ("locked_at",))
    if data["lock_format"] != LOCK_FORMAT:
        raise chk.fail("", f"lock_format {data['lock_format']!r} is not {LOCK_FORMAT}; "
                           "re-run `vigil bundle lock`")
    comps = data["components"]
    if not isinstance(comps, list) or not comps:
        raise chk.fail("", "components must be a non-empty list")
    base = path.resolve().parent
    components = tuple(_locked_component(chk, c, i, base) for i, c in enumerate(comps))
    if len({c.name for c in components}) != len(components):
        raise chk.fail("", "a component appears twice")
    return Lock(
        path=path, channel=str(chk.string(data, "channel", "")), arch=str(chk.string(data, "arch", "")),
        catalog_sha256=str(chk.sha256(data, "catalog_sha256", "")), components=components,
        locked_at=chk.string(data, "locked_at", "", required=False),
    )


def check_lock_current(catalog: Catalog, lock: Lock) -> None:
    """Raise if ``lock`` was not made from this exact catalog file."""
    actual = hashlib.sha256(catalog.path.read_bytes()).hexdigest()
    if actual != lock.catalog_sha256:
        raise CatalogError(_display(lock.path), f"stale: {_display(catalog.path)} changed since it "
                                                "was locked; re-run `vigil bundle lock`")
