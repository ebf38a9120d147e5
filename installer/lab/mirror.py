"""Find the Debian mirror and archive keyring this machine's apt already uses."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from vigil.installer.lab.errors import LabError

DEFAULT_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


@dataclass(frozen=True)
class Mirror:
    uri: str
    keyring: Path | None
    #: the file the entry came from, for messages
    source: str


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, ""
            continue
        if line[0] in " \t" and key:
            current[key] += "\n" + line.strip()
            continue
        if ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def _entries(directory: Path) -> list[tuple[str, str, list[str], list[str], str | None]]:
    """(file, uri, suites, components, signed-by) for every `deb` entry apt knows."""
    found: list[tuple[str, str, list[str], list[str], str | None]] = []
    files: list[Path] = []
    main_list = directory / "sources.list"
    if main_list.is_file():
        files.append(main_list)
    parts = directory / "sources.list.d"
    if parts.is_dir():
        files += sorted(parts.glob("*.list")) + sorted(parts.glob("*.sources"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            for st in _deb822_stanzas(text):
                if "deb" not in st.get("types", "").split() or st.get("enabled", "yes") == "no":
                    continue
                signed = st.get("signed-by")
                signed = signed if signed and signed.startswith("/") else None
                for uri in st.get("uris", "").split():
                    found.append(
                        (str(f), uri, st.get("suites", "").split(), st.get("components", "").split(), signed)
                    )
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line.startswith("deb "):
                continue
            m = re.match(
                r"deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)\s*(?P<comps>.*)", line
            )
            if not m:
                continue
            signed = None
            for opt in (m.group("opts") or "").split():
                if opt.startswith("signed-by="):
                    signed = opt.split("=", 1)[1]
            found.append((str(f), m.group("uri"), [m.group("suite")], m.group("comps").split(), signed))
    return found


def find_mirror(
    suite: str = "bookworm", *, apt_dir: Path = Path("/etc/apt"), override: str | None = None
) -> Mirror:
    """The first apt entry serving SUITE's `main` component, with its keyring.

    OVERRIDE (a URI, from `--mirror` or `$VIGIL_LAB_MIRROR`) wins; its keyring is Debian's.
    """
    keyring = DEFAULT_KEYRING if DEFAULT_KEYRING.is_file() else None
    if override:
        return Mirror(uri=override, keyring=keyring, source="--mirror")
    for source, uri, suites, comps, signed in _entries(apt_dir):
        if suite in suites and "main" in comps and uri.startswith(("http://", "https://", "file:/")):
            ring = Path(signed) if signed and Path(signed).is_file() else keyring
            return Mirror(uri=uri, keyring=ring, source=source)
    raise LabError(
        str(apt_dir / "sources.list.d"),
        f"no apt entry serves Debian {suite} main; add one or pass --mirror URI",
    )
