"""Debian packages through apt: exact versions, integrity from apt's signed indexes.

The lock asks ``apt-cache show PKG:ARCH=VERSION`` for ``Filename``, ``Size`` and ``SHA256`` (apt has
checked those indexes against the archive's signed ``InRelease``) and ``apt-get download
--print-uris`` for the mirror URL. The fetch runs ``apt-get download`` and checks size and sha256
against the lock, so a later mirror cannot substitute other bytes.

A catalog with ``apt:`` brings its own sources: every apt call then runs with ``APT_CONFIG`` set
to a configuration vigil writes under its cache (:class:`AptEnv`), with its own sources list (each
source ``signed-by`` the catalog's keyring), lists, archives, preferences and an empty dpkg status.
apt reads nothing of the host's ``/etc/apt`` then (``Dir::Etc`` and the configuration parts are
vigil's own, empty), and writes nothing outside that directory. Without ``apt:``, the host's apt
is used as it is.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vigil.basics.atomic import write_file_atomic
from vigil.bundle.catalog_model import AptSettings
from vigil.bundle.errors import CatalogError, FetchError


@dataclass(frozen=True)
class AptPackage:
    package: str
    version: str
    arch: str
    filename: str  # basename of the .deb
    url: str
    size: int
    sha256: str


def _spec(package: str, version: str, arch: str) -> str:
    return f"{package}:{arch}={version}" if arch else f"{package}={version}"


def _run(
    argv: list[str], *, cwd: Path | None = None, apt: AptEnv | None = None
) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise FileNotFoundError(argv[0])
    env = dict(os.environ, LC_ALL="C")
    if apt is not None:
        env["APT_CONFIG"] = str(apt.config_file)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)


# --- a channel's own apt ------------------------------------------------------------------------


def _quoted(value: str, *, obj: str) -> str:
    """``value`` as a double-quoted apt configuration string; refuses what would end the quotes."""
    if '"' in value or "\\" in value or not value.isprintable():
        raise CatalogError(
            obj, f"cannot use {value!r} in an apt configuration (quote, backslash or control character)"
        )
    return f'"{value}"'


class AptEnv:
    """A private apt configuration for one channel, under ``root`` (``<cache>/apt/<channel>``).

    Layout::

        apt.conf                 APT_CONFIG: every Dir:: below, the architecture, no translations
        etc/sources.list         the catalog's sources, each ``[signed-by=KEYRING]``
        etc/apt.conf, etc/apt.conf.d/, etc/preferences, etc/preferences.d/, etc/trusted.gpg.d/
                                 empty: apt reads these instead of the host's
        lists/                   the indexes ``apt-get update`` fetched for these sources
        cache/archives/          apt's own download cache (``apt-get download`` writes to its cwd)
        state/                   apt's state (the dpkg status is /dev/null: nothing is installed)
        updated                  sha256 of apt.conf + sources.list the lists were last updated for

    Every file is staged beside its target and renamed into place. :meth:`prepare` writes the
    files and runs ``apt-get update`` when asked, when the lists are missing, or when the
    configuration changed since the last successful update.
    """

    def __init__(self, settings: AptSettings, arch: str, root: Path, *, channel: str = "") -> None:
        self.settings = settings
        self.arch = arch
        self.root = Path(root).absolute()
        self.channel = channel
        self._ready = False

    @property
    def config_file(self) -> Path:
        return self.root / "apt.conf"

    @property
    def sources_file(self) -> Path:
        return self.root / "etc" / "sources.list"

    @property
    def lists_dir(self) -> Path:
        return self.root / "lists"

    @property
    def stamp_file(self) -> Path:
        return self.root / "updated"

    def sources_text(self) -> str:
        keyring = self.settings.keyring
        head = f"# Written by vigil{f' for channel {self.channel}' if self.channel else ''}; do not edit.\n"
        return head + "".join(f"{s.line(keyring)}\n" for s in self.settings.sources)

    def config_text(self) -> str:
        """The APT_CONFIG file: every directory apt uses is under :attr:`root` (or /dev/null)."""
        obj = str(self.config_file)
        r, etc = self.root, self.root / "etc"

        def q(p: Path | str) -> str:
            return _quoted(str(p), obj=obj)

        lines = [
            f"// Written by vigil{f' for channel {self.channel}' if self.channel else ''}; do not edit.",
            "// apt reads nothing of the host's /etc/apt with this file and writes only below this folder.",
            f"Dir::Etc {q(etc)};",
            f"Dir::Etc::main {q(etc / 'apt.conf')};",
            f"Dir::Etc::parts {q(etc / 'apt.conf.d')};",
            f"Dir::Etc::sourcelist {q(etc / 'sources.list')};",
            'Dir::Etc::sourceparts "-";',
            f"Dir::Etc::preferences {q(etc / 'preferences')};",
            f"Dir::Etc::preferencesparts {q(etc / 'preferences.d')};",
            f"Dir::Etc::trusted {q(etc / 'trusted.gpg')};",
            f"Dir::Etc::trustedparts {q(etc / 'trusted.gpg.d')};",
            f"Dir::Etc::netrc {q(etc / 'auth.conf')};",
            f"Dir::Etc::netrcparts {q(etc / 'auth.conf.d')};",
            f"Dir::State {q(r / 'state')};",
            f"Dir::State::lists {q(r / 'lists')};",
            'Dir::State::status "/dev/null";',
            f"Dir::Cache {q(r / 'cache')};",
            f"Dir::Cache::archives {q(r / 'cache' / 'archives')};",
            f"APT::Architecture {q(self.arch)};",
            f"APT::Architectures {{ {q(self.arch)}; }};",
            'Acquire::Languages "none";',
            'APT::Update::Error-Mode "any";',
        ]
        return "\n".join(lines) + "\n"

    def _digest(self, conf: str, sources: str) -> str:
        return hashlib.sha256(f"{conf}\0{sources}".encode()).hexdigest()

    def _has_lists(self) -> bool:
        return self.lists_dir.is_dir() and any("_Packages" in p.name for p in self.lists_dir.iterdir())

    def write(self) -> str:
        """Write the configuration files (staged, then renamed); returns their digest."""
        conf, sources = self.config_text(), self.sources_text()
        etc = self.root / "etc"
        try:
            for d in (
                etc / "apt.conf.d",
                etc / "preferences.d",
                etc / "trusted.gpg.d",
                etc / "auth.conf.d",
                self.root / "state",
                self.lists_dir / "partial",
                self.root / "cache" / "archives" / "partial",
            ):
                d.mkdir(parents=True, exist_ok=True)
            for empty in (etc / "apt.conf", etc / "preferences"):
                if not empty.is_file() or empty.stat().st_size:
                    write_file_atomic(empty, b"", mode=0o644, fsync=False)
            write_file_atomic(self.config_file, conf.encode(), mode=0o644, fsync=False)
            write_file_atomic(self.sources_file, sources.encode(), mode=0o644, fsync=False)
        except OSError as e:
            raise CatalogError(
                str(self.root), f"cannot write the apt configuration: {e.strerror or e}"
            ) from None
        return self._digest(conf, sources)

    def prepare(self, *, update: bool, obj: str) -> None:
        """Write the configuration and, if needed (or ``update``), run ``apt-get update`` with it.

        Done once per object: a second call does nothing unless ``update`` asks again.
        """
        if self._ready and not update:
            return
        keyring = self.settings.keyring
        if not Path(keyring).is_file():
            raise CatalogError(obj, f"apt keyring {keyring} does not exist (from apt.keyring)")
        digest = self.write()
        try:
            current = self.stamp_file.read_text().strip() == digest
        except OSError:
            current = False
        if update or not current or not self._has_lists():
            try:
                self.stamp_file.unlink(missing_ok=True)
            except OSError as e:
                raise CatalogError(str(self.stamp_file), f"cannot remove: {e.strerror or e}") from None
            try:
                res = _run(["apt-get", "update", "-q"], apt=self)
            except FileNotFoundError:
                raise CatalogError(
                    obj, "apt-get is not installed; deb sources need a Debian build host"
                ) from None
            if res.returncode != 0:
                errors = [ln for ln in (res.stderr or res.stdout).splitlines() if ln.startswith("E:")]
                why = errors[0][2:].strip() if errors else _last_line(res.stderr or res.stdout)
                raise CatalogError(obj, f"apt-get update with {self.sources_file}: {why}")
            try:
                write_file_atomic(self.stamp_file, f"{digest}\n".encode(), mode=0o644, fsync=False)
            except OSError as e:
                raise CatalogError(str(self.stamp_file), f"cannot write: {e.strerror or e}") from None
        self._ready = True


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("W:")]
    return lines[-1] if lines else "no output"


def resolve(package: str, version: str, arch: str, *, obj: str, apt: AptEnv | None = None) -> AptPackage:
    """Look ``package`` at exactly ``version`` up in apt's indexes (``apt``'s own, when given)."""
    spec = _spec(package, version, arch)
    if apt is None:
        hint = (
            f"apt has no {spec} (run `apt-get update` first, and check the version with "
            f"`apt-cache policy {package}`)"
        )
    else:
        hint = (
            f"apt has no {spec} in the catalog's apt sources (check the version with "
            f"`APT_CONFIG={apt.config_file} apt-cache policy {package}`)"
        )
    try:
        if apt is not None:
            apt.prepare(update=False, obj=obj)
        show = _run(["apt-cache", "show", "--no-all-versions", spec], apt=apt)
    except FileNotFoundError:
        raise CatalogError(obj, "apt-cache is not installed; deb sources need a Debian build host") from None
    stanza = _first_stanza(show.stdout, package, version)
    if show.returncode != 0 or stanza is None:
        raise CatalogError(obj, hint)
    try:
        size = int(stanza["Size"])
        sha256 = stanza["SHA256"].lower()
        filename = stanza["Filename"]
    except (KeyError, ValueError):
        raise CatalogError(obj, f"apt's entry for {spec} lacks Filename, Size or SHA256") from None
    uris = _run(["apt-get", "download", "--print-uris", spec], apt=apt)
    rows = [shlex.split(line) for line in uris.stdout.splitlines() if line.startswith("'")]
    url = None
    for row in rows:
        if len(row) >= 4 and row[3].lower() == f"sha256:{sha256}":
            url = row[0]
    if url is None and len(rows) == 1:
        url = rows[0][0]
    if url is None:
        raise CatalogError(
            obj, f"apt-get download --print-uris {spec}: {_last_line(uris.stderr or uris.stdout)}"
        )
    return AptPackage(
        package=package,
        version=version,
        arch=stanza.get("Architecture", arch),
        filename=filename.rsplit("/", 1)[-1],
        url=url,
        size=size,
        sha256=sha256,
    )


def _first_stanza(text: str, package: str, version: str) -> dict[str, str] | None:
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        if fields.get("Package") == package and fields.get("Version") == version:
            return fields
    return None


def download(
    package: str, version: str, arch: str, workdir: Path, *, obj: str, apt: AptEnv | None = None
) -> Path:
    """``apt-get download`` the exact package into ``workdir``; returns the .deb's path.

    With ``apt``, its configuration is written first and its lists fetched if they are missing.
    As root, apt warns that it downloads unsandboxed because ``_apt`` cannot write ``workdir``;
    that warning is harmless here, the bytes are checked against the lock afterwards.
    """
    spec = _spec(package, version, arch)
    try:
        if apt is not None:
            apt.prepare(update=False, obj=obj)
        res = _run(["apt-get", "download", "-q", spec], cwd=workdir, apt=apt)
    except FileNotFoundError:
        raise FetchError(obj, "apt-get is not installed") from None
    except CatalogError as e:
        raise FetchError(obj, e.reason) from None
    debs = sorted(workdir.glob("*.deb"))
    if res.returncode != 0 or len(debs) != 1:
        raise FetchError(obj, f"apt-get download {spec}: {_last_line(res.stderr or res.stdout)}")
    return debs[0]
