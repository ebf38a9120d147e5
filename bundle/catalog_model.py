"""The catalog and lock as data, and the checks that decide whether a document is one.

Everything here works on values already in memory: a catalog or lock document as YAML loads it
(plain dicts, lists and scalars), and the paths and digests its loader observed. Nothing here reads
a file, asks an index or writes a lock; :mod:`vigil.bundle.catalog` does that I/O and hands the
results in. Keeping the two apart means every rule about what a valid catalog or lock is can be
tested with a literal document, and a check cannot quietly depend on what a mirror says that day.
A unit test holds this module to imports that do no I/O.

The formats are described in :mod:`vigil.bundle.catalog`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from vigil.bundle.errors import CatalogError

__all__ = [
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
    "check_lock_current",
    "is_channel_name",
    "parse_catalog",
    "parse_lock",
]

KINDS = ("url", "deb", "wheel", "file", "project")
DEB_SHIP = ("files", "deb")  # a deb source: unpack the listed members, or ship the .deb whole
LOCK_FORMAT = 1

_NAME = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
_SPDX = re.compile(r"^[A-Za-z0-9.+\-:() ]+$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_GLOB = re.compile(r"[*?\[]")

DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# apt: what may stand in a sources line and a keyring path. Nothing here can end a quoted apt
# configuration value or start an option, a comment or a second line.
_ARCH = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_URI = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+/-]*)?$")
_SUITE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9._-]+)*$")
_APT_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9._-]+)*$")
_KEYRING = re.compile(r"^/[A-Za-z0-9._+-]+(/[A-Za-z0-9._+-]+)*\.(gpg|asc)$")


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


Source = UrlSource | DebSource | WheelSource | FileSource | ProjectSource


@dataclass(frozen=True)
class AptSource:
    """One ``deb URI SUITE COMPONENT...`` line of a catalog's ``apt.sources``."""

    uri: str
    suite: str
    components: tuple[str, ...]

    def line(self, keyring: str) -> str:
        """The one-line sources.list entry, signed by ``keyring`` only."""
        return f"deb [signed-by={keyring}] {self.uri} {self.suite} {' '.join(self.components)}"


@dataclass(frozen=True)
class AptSettings:
    """A catalog's own apt sources: its deb components resolve against these, not the host's."""

    sources: tuple[AptSource, ...]
    keyring: str = DEFAULT_KEYRING


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
    sha256: str  # of the bytes this catalog was parsed from
    display: str = field(default="", compare=False)  # how errors name the file ("" = str(path))
    apt: AptSettings | None = None  # None: deb sources come through the build host's own apt

    @property
    def obj(self) -> str:
        """The catalog file as error messages name it."""
        return self.display or str(self.path)

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
    display: str = field(default="", compare=False)  # how errors name the file ("" = str(path))

    @property
    def obj(self) -> str:
        """The lock file as error messages name it."""
        return self.display or str(self.path)

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

    def keys(
        self, data: Mapping[str, Any], where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> None:
        for k in required:
            if k not in data:
                raise self.fail(where, f"missing {k!r}")
        for k in sorted(data):
            if k not in required and k not in optional:
                allowed = ", ".join((*required, *optional))
                raise self.fail(where, f"unknown key {k!r} (allowed: {allowed})")

    def string(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
        value = data.get(key)
        if value is None and not required and key not in data:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"{key} must be a non-empty string, not {_typename(value)}")
        return value

    def sha256(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
        value = self.string(data, key, where, required=required)
        if value is not None and not _HEX64.match(value):
            raise self.fail(where, f"{key} must be 64 lowercase hex digits, not {value!r}")
        return value

    def url(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
        value = self.string(data, key, where, required=required)
        if value is not None and value.split(":", 1)[0] not in ("http", "https", "file"):
            raise self.fail(where, f"{key} {value!r} must be an http, https or file URL")
        return value


def _typename(value: object) -> str:
    return {
        type(None): "null",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


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
            raise chk.fail(where, f"files[{key!r}] target {target!r} must be a relative path without '..'")
        is_dir = key.endswith("/") or bool(_GLOB.search(key))
        if is_dir and target and not target.endswith("/"):
            raise chk.fail(
                where, f"files[{key!r}] maps several files, so its target must be a directory ending in '/'"
            )
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
        return DebSource(
            package=str(chk.string(data, "package", w)),
            version=str(chk.string(data, "version", w)),
            ship=ship,
        )
    if kind == "wheel":
        chk.keys(data, w, ("kind", "python_version", "platform"), ("requirements", "pyproject", "index_url"))
        pyver = str(chk.string(data, "python_version", w))
        if not re.fullmatch(r"3\.\d{1,2}", pyver):
            raise chk.fail(w, f"python_version {pyver!r} must look like '3.11'")
        plat = data["platform"]
        platforms = [plat] if isinstance(plat, str) else plat
        if (
            not isinstance(platforms, list)
            or not platforms
            or not all(isinstance(p, str) and p for p in platforms)
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
        return WheelSource(
            python_version=pyver,
            platforms=tuple(platforms),
            requirements=tuple(reqs),
            pyproject=pyproject,
            index_url=index,
        )
    if kind == "file":
        chk.keys(data, w, ("kind", "path", "sha256"))
        return FileSource(path=str(chk.string(data, "path", w)), sha256=str(chk.sha256(data, "sha256", w)))
    chk.keys(data, w, ("kind", "path"))
    return ProjectSource(path=str(chk.string(data, "path", w)))


def _component(chk: _Check, value: object, index: int) -> Component:
    data = chk.mapping(value, f"components[{index}]")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise chk.fail(
            f"components[{index}]", f"name {name!r} must be lowercase letters, digits, '.', '_', '+', '-'"
        )
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
    return Component(
        name=name, version=version, license=lic, source=source, files=_files(chk, data["files"], where)
    )


def _apt_source(chk: _Check, value: object, where: str) -> AptSource:
    if not isinstance(value, str):
        raise chk.fail(where, f"must be a string 'deb URI SUITE COMPONENT...', not {_typename(value)}")
    if not value.isascii() or not value.isprintable():
        raise chk.fail(where, "must be one line of printable ASCII")
    words = value.split()
    if not words or words[0] != "deb":
        raise chk.fail(where, f"{value!r} must start with 'deb' (binary packages only)")
    if len(words) > 1 and words[1].startswith("["):
        raise chk.fail(
            where, f"{value!r}: options in [...] are not allowed; vigil sets signed-by from apt.keyring"
        )
    if len(words) < 2 or not _URI.match(words[1]):
        uri = words[1] if len(words) > 1 else ""
        raise chk.fail(where, f"URI {uri!r} must be an http or https URL (host, optional port and path)")
    if len(words) < 3:
        raise chk.fail(where, f"{value!r} names no suite")
    uri, suite, components = words[1], words[2], tuple(words[3:])
    if suite.endswith("/") or not _SUITE.match(suite) or ".." in suite.split("/"):
        raise chk.fail(
            where, f"suite {suite!r} must be a suite name such as 'bookworm' (no flat repositories)"
        )
    if not components:
        raise chk.fail(where, f"{value!r} names no component (such as 'main')")
    for comp in components:
        if not _APT_COMPONENT.match(comp) or ".." in comp.split("/"):
            raise chk.fail(where, f"component {comp!r} must be a component name such as 'main'")
    if len(set(components)) != len(components):
        raise chk.fail(where, f"{value!r} names a component twice")
    return AptSource(uri=uri, suite=suite, components=components)


def _apt(chk: _Check, value: object, arch: str) -> AptSettings:
    data = chk.mapping(value, "apt")
    chk.keys(data, "apt", ("sources",), ("keyring",))
    sources = data["sources"]
    if not isinstance(sources, list) or not sources:
        raise chk.fail("apt", "sources must be a non-empty list of 'deb URI SUITE COMPONENT...' lines")
    parsed = tuple(_apt_source(chk, s, f"apt: sources[{i}]") for i, s in enumerate(sources))
    seen: set[tuple[str, str]] = set()
    for src in parsed:
        if (src.uri, src.suite) in seen:
            raise chk.fail("apt", f"sources name {src.uri} {src.suite} twice")
        seen.add((src.uri, src.suite))
    keyring = data.get("keyring", DEFAULT_KEYRING)
    if not isinstance(keyring, str):
        raise chk.fail("apt", f"keyring must be an absolute path, not {_typename(keyring)}")
    if not keyring.startswith("/"):
        raise chk.fail("apt", f"keyring {keyring!r} must be an absolute path")
    if not _KEYRING.match(keyring) or ".." in keyring.split("/"):
        raise chk.fail(
            "apt",
            f"keyring {keyring!r} must be a plain path to a .gpg or .asc file "
            "(letters, digits, '.', '_', '+', '-', no '..')",
        )
    if not _ARCH.match(arch):
        raise chk.fail("apt", f"arch {arch!r} must be a Debian architecture name such as 'amd64'")
    return AptSettings(sources=parsed, keyring=keyring)


# --- lock: parse -------------------------------------------------------------------------------

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
    chk.keys(
        data,
        where,
        ("name", "version", "license", "kind", "artifacts", "files"),
        ("requirements", "python_version", "platforms", "index_url", "ship"),
    )
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
        name=name,
        version=str(chk.string(data, "version", where)),
        license=str(chk.string(data, "license", where)),
        kind=kind,
        artifacts=artifacts,
        files=_files(chk, data["files"], where),
        ship=str(ship),
        base_dir=base,
    )


# --- documents ----------------------------------------------------------------------------------


def is_channel_name(name: str) -> bool:
    """Whether ``name`` can name a channel (and so a catalog file)."""
    return bool(_NAME.match(name))


def parse_catalog(data: object, *, path: Path, sha256: str, display: str = "") -> Catalog:
    """Validate a loaded catalog document; raises :class:`CatalogError` naming the first problem.

    ``path`` is where the document was read, ``sha256`` the digest of its bytes, ``display`` how
    errors name the file (``str(path)`` when empty).
    """
    chk = _Check(display or str(path))
    doc = chk.mapping(data, "")
    chk.keys(doc, "", ("channel", "arch", "components"), ("apt",))
    channel = str(chk.string(doc, "channel", ""))
    if not _NAME.match(channel):
        raise chk.fail("", f"channel {channel!r} must be lowercase letters, digits, '.', '_', '-'")
    arch = str(chk.string(doc, "arch", ""))
    comps = doc["components"]
    if not isinstance(comps, list) or not comps:
        raise chk.fail("", "components must be a non-empty list")
    components = tuple(_component(chk, c, i) for i, c in enumerate(comps))
    seen: set[str] = set()
    for c in components:
        if c.name in seen:
            raise chk.fail(f"component {c.name!r}", "appears twice")
        seen.add(c.name)
    apt = _apt(chk, doc["apt"], arch) if "apt" in doc else None
    return Catalog(
        path=path,
        channel=channel,
        arch=arch,
        components=components,
        sha256=sha256,
        display=display,
        apt=apt,
    )


def parse_lock(data: object, *, path: Path, base_dir: Path, display: str = "") -> Lock:
    """Validate a loaded lock document; raises :class:`CatalogError` naming the first problem.

    ``base_dir`` is the absolute directory that the lock's relative ``path`` entries start from
    (the lock file's own); ``display`` as for :func:`parse_catalog`.
    """
    chk = _Check(display or str(path))
    doc = chk.mapping(data, "")
    chk.keys(doc, "", ("lock_format", "channel", "arch", "catalog_sha256", "components"), ("locked_at",))
    if doc["lock_format"] != LOCK_FORMAT:
        raise chk.fail(
            "", f"lock_format {doc['lock_format']!r} is not {LOCK_FORMAT}; re-run `vigil bundle lock`"
        )
    comps = doc["components"]
    if not isinstance(comps, list) or not comps:
        raise chk.fail("", "components must be a non-empty list")
    components = tuple(_locked_component(chk, c, i, base_dir) for i, c in enumerate(comps))
    if len({c.name for c in components}) != len(components):
        raise chk.fail("", "a component appears twice")
    return Lock(
        path=path,
        channel=str(chk.string(doc, "channel", "")),
        arch=str(chk.string(doc, "arch", "")),
        catalog_sha256=str(chk.sha256(doc, "catalog_sha256", "")),
        components=components,
        locked_at=chk.string(doc, "locked_at", "", required=False),
        display=display,
    )


def check_lock_current(catalog: Catalog, lock: Lock) -> None:
    """Raise unless ``lock`` was made from exactly the catalog bytes ``catalog`` was parsed from."""
    if catalog.sha256 != lock.catalog_sha256:
        raise CatalogError(
            lock.obj, f"stale: {catalog.obj} changed since it was locked; re-run `vigil bundle lock`"
        )
