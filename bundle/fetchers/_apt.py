"""Debian packages through apt: exact versions, integrity from apt's signed indexes.

The lock asks ``apt-cache show PKG:ARCH=VERSION`` for ``Filename``, ``Size`` and ``SHA256`` (apt has
checked those indexes against the archive's signed ``InRelease``) and ``apt-get download
--print-uris`` for the mirror URL. The fetch runs ``apt-get download`` and checks size and sha256
against the lock, so a later mirror cannot substitute other bytes.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

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


def _run(argv: list[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise FileNotFoundError(argv[0])
    env = dict(os.environ, LC_ALL="C")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("W:")]
    return lines[-1] if lines else "no output"


def resolve(package: str, version: str, arch: str, *, obj: str) -> AptPackage:
    """Look ``package`` at exactly ``version`` up in apt's indexes."""
    spec = _spec(package, version, arch)
    hint = (
        f"apt has no {spec} (run `apt-get update` first, and check the version with "
        f"`apt-cache policy {package}`)"
    )
    try:
        show = _run(["apt-cache", "show", "--no-all-versions", spec])
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
    uris = _run(["apt-get", "download", "--print-uris", spec])
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


def download(package: str, version: str, arch: str, workdir: Path, *, obj: str) -> Path:
    """``apt-get download`` the exact package into ``workdir``; returns the .deb's path.

    As root, apt warns that it downloads unsandboxed because ``_apt`` cannot write ``workdir``;
    that warning is harmless here, the bytes are checked against the lock afterwards.
    """
    spec = _spec(package, version, arch)
    try:
        res = _run(["apt-get", "download", "-q", spec], cwd=workdir)
    except FileNotFoundError:
        raise FetchError(obj, "apt-get is not installed") from None
    debs = sorted(workdir.glob("*.deb"))
    if res.returncode != 0 or len(debs) != 1:
        raise FetchError(obj, f"apt-get download {spec}: {_last_line(res.stderr or res.stdout)}")
    return debs[0]
