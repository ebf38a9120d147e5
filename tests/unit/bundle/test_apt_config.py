"""A catalog's own apt sources (`apt:`): what the catalog accepts, the configuration vigil writes for
them, and that every apt call of a lock or a fetch runs with it — never with the host's apt.

No test here reaches a network: apt-get and apt-cache are stand-ins on PATH that record how they
were called (and with which APT_CONFIG) and answer like apt would.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vigil.bundle.catalog import load_lock, lock_channel
from vigil.bundle.catalog_model import DEFAULT_KEYRING, AptSettings, AptSource, parse_catalog
from vigil.bundle.errors import CatalogError
from vigil.bundle.fetchers import AptEnv, apt_env, fetch_component
from vigil.bundle.fetchers import _apt as apt_module

TRIXIE = "deb http://deb.debian.org/debian trixie main"
BOOKWORM = "deb http://deb.debian.org/debian bookworm main"


def url_component() -> dict[str, object]:
    return {
        "name": "vmalert",
        "version": "1.0.0",
        "license": "Apache-2.0",
        "source": {"kind": "url", "url": "https://example.invalid/vmalert.tar.gz", "sha256": "a" * 64},
        "files": {"vmalert-prod": "bin/vmalert"},
    }


def parse(apt: object, *, arch: str = "amd64") -> AptSettings | None:
    doc = {"channel": "test", "arch": arch, "components": [url_component()], "apt": apt}
    return parse_catalog(doc, path=Path("test.yaml"), sha256="0" * 64, display="test.yaml").apt


# --- the catalog's `apt:` -----------------------------------------------------------------------


def test_apt_sources_parse_with_the_default_keyring() -> None:
    apt = parse(
        {"sources": [TRIXIE, "deb https://deb.debian.org/debian-security bookworm-security main contrib"]}
    )
    assert apt == AptSettings(
        sources=(
            AptSource("http://deb.debian.org/debian", "trixie", ("main",)),
            AptSource("https://deb.debian.org/debian-security", "bookworm-security", ("main", "contrib")),
        ),
        keyring=DEFAULT_KEYRING,
    )
    assert DEFAULT_KEYRING == "/usr/share/keyrings/debian-archive-keyring.gpg"


def test_a_catalog_without_apt_uses_the_host_apt() -> None:
    doc = {"channel": "test", "arch": "amd64", "components": [url_component()]}
    assert parse_catalog(doc, path=Path("test.yaml"), sha256="0" * 64).apt is None


BAD_APT = [
    ("deb http://x trixie main", "apt: must be a mapping, not a string"),
    (None, "apt: must be a mapping, not null"),
    ({}, "apt: missing 'sources'"),
    ({"sources": [TRIXIE], "mirror": "x"}, "apt: unknown key 'mirror' (allowed: sources, keyring)"),
    ({"sources": []}, "apt: sources must be a non-empty list of 'deb URI SUITE COMPONENT...' lines"),
    ({"sources": TRIXIE}, "apt: sources must be a non-empty list of 'deb URI SUITE COMPONENT...' lines"),
    ({"sources": [42]}, "apt: sources[0]: must be a string 'deb URI SUITE COMPONENT...', not an integer"),
    (
        {"sources": ["deb ftp://deb.debian.org/debian trixie main"]},
        "apt: sources[0]: URI 'ftp://deb.debian.org/debian' must be an http or https URL "
        "(host, optional port and path)",
    ),
    (
        {"sources": ["deb file:///srv/mirror trixie main"]},
        "apt: sources[0]: URI 'file:///srv/mirror' must be an http or https URL "
        "(host, optional port and path)",
    ),
    (
        {"sources": ["deb http://user:secret@mirror.example/debian trixie main"]},
        "apt: sources[0]: URI 'http://user:secret@mirror.example/debian' must be an http or https URL "
        "(host, optional port and path)",
    ),
    (
        {"sources": ["deb"]},
        "apt: sources[0]: URI '' must be an http or https URL (host, optional port and path)",
    ),
    (
        {"sources": ["deb http://deb.debian.org/debian"]},
        "apt: sources[0]: 'deb http://deb.debian.org/debian' names no suite",
    ),
    (
        {"sources": ["deb http://deb.debian.org/debian trixie"]},
        "apt: sources[0]: 'deb http://deb.debian.org/debian trixie' names no component (such as 'main')",
    ),
    (
        {"sources": ["deb-src http://deb.debian.org/debian trixie main"]},
        "apt: sources[0]: 'deb-src http://deb.debian.org/debian trixie main' must start with 'deb' "
        "(binary packages only)",
    ),
    (
        {"sources": ["deb [trusted=yes] http://deb.debian.org/debian trixie main"]},
        "apt: sources[0]: 'deb [trusted=yes] http://deb.debian.org/debian trixie main': options in [...] "
        "are not allowed; vigil sets signed-by from apt.keyring",
    ),
    (
        {"sources": [TRIXIE + "\ndeb [trusted=yes] http://evil.example/debian trixie main"]},
        "apt: sources[0]: must be one line of printable ASCII",
    ),
    (
        {"sources": ["deb http://deb.debian.org/debian ../../etc main"]},
        "apt: sources[0]: suite '../../etc' must be a suite name such as 'bookworm' (no flat repositories)",
    ),
    (
        {"sources": ["deb http://deb.debian.org/debian ./ main"]},
        "apt: sources[0]: suite './' must be a suite name such as 'bookworm' (no flat repositories)",
    ),
    (
        {"sources": ["deb http://deb.debian.org/debian trixie main #comment"]},
        "apt: sources[0]: component '#comment' must be a component name such as 'main'",
    ),
    (
        {"sources": ["deb http://deb.debian.org/debian trixie main main"]},
        "apt: sources[0]: 'deb http://deb.debian.org/debian trixie main main' names a component twice",
    ),
    (
        {"sources": [TRIXIE, TRIXIE + " contrib"]},
        "apt: sources name http://deb.debian.org/debian trixie twice",
    ),
    (
        {"sources": [TRIXIE], "keyring": "keyrings/debian-archive-keyring.gpg"},
        "apt: keyring 'keyrings/debian-archive-keyring.gpg' must be an absolute path",
    ),
    ({"sources": [TRIXIE], "keyring": 5}, "apt: keyring must be an absolute path, not an integer"),
    (
        {"sources": [TRIXIE], "keyring": "/k.gpg] http://evil.example/debian trixie main [x=y"},
        "apt: keyring '/k.gpg] http://evil.example/debian trixie main [x=y' must be a plain path to a .gpg "
        "or .asc file (letters, digits, '.', '_', '+', '-', no '..')",
    ),
    (
        {"sources": [TRIXIE], "keyring": "/usr/share/keyrings/../../../root/k.gpg"},
        "apt: keyring '/usr/share/keyrings/../../../root/k.gpg' must be a plain path to a .gpg or .asc file "
        "(letters, digits, '.', '_', '+', '-', no '..')",
    ),
    (
        {"sources": [TRIXIE], "keyring": "/usr/share/keyrings/debian-archive-keyring"},
        "apt: keyring '/usr/share/keyrings/debian-archive-keyring' must be a plain path to a .gpg or .asc "
        "file (letters, digits, '.', '_', '+', '-', no '..')",
    ),
]


@pytest.mark.parametrize(("apt", "message"), BAD_APT)
def test_bad_apt_is_refused_in_one_line(apt: object, message: str) -> None:
    with pytest.raises(CatalogError) as exc:
        parse(apt)
    assert str(exc.value) == f"test.yaml: {message}"
    assert "\n" not in str(exc.value)


def test_apt_needs_an_architecture_apt_can_be_told() -> None:
    with pytest.raises(CatalogError) as exc:
        parse({"sources": [TRIXIE]}, arch='amd64"; Dir::Etc "/etc/apt')
    assert str(exc.value) == (
        "test.yaml: apt: arch 'amd64\"; Dir::Etc \"/etc/apt' must be a Debian architecture name "
        "such as 'amd64'"
    )


# --- the configuration vigil writes -------------------------------------------------------------


def settings(keyring: str = DEFAULT_KEYRING, *lines: str) -> AptSettings:
    sources = []
    for line in lines or (TRIXIE, BOOKWORM):
        _, uri, suite, *components = line.split()
        sources.append(AptSource(uri, suite, tuple(components)))
    return AptSettings(sources=tuple(sources), keyring=keyring)


def conf_values(text: str) -> dict[str, str]:
    """``Key "value";`` lines of an apt configuration file."""
    out = {}
    for line in text.splitlines():
        if line.startswith("//") or "{" in line:
            continue
        key, _, value = line.partition(" ")
        assert value.startswith('"') and value.endswith('";'), line
        out[key] = value[1:-2]
    return out


def test_the_configuration_keeps_apt_inside_the_work_dir(tmp_path: Path) -> None:
    root = tmp_path / "apt" / "next"
    env = AptEnv(settings(), "amd64", root, channel="next")
    env.write()
    text = (root / "apt.conf").read_text()
    values = conf_values(text)
    assert values["Dir::Etc::sourceparts"] == "-"
    assert values["Dir::State::status"] == "/dev/null"
    assert values["Acquire::Languages"] == "none"
    assert values["APT::Architecture"] == "amd64"
    assert 'APT::Architectures { "amd64"; };' in text.splitlines()
    dirs = {k: v for k, v in values.items() if k.startswith("Dir::")}
    assert set(dirs) >= {
        "Dir::Etc",
        "Dir::Etc::main",
        "Dir::Etc::parts",
        "Dir::Etc::sourcelist",
        "Dir::Etc::preferences",
        "Dir::Etc::preferencesparts",
        "Dir::Etc::trusted",
        "Dir::Etc::trustedparts",
        "Dir::State",
        "Dir::State::lists",
        "Dir::Cache",
        "Dir::Cache::archives",
    }
    outside = {k: v for k, v in dirs.items() if v not in ("-", "/dev/null") and not v.startswith(f"{root}/")}
    assert outside == {}
    assert not [v for v in values.values() if v.startswith(("/etc", "/var"))]
    assert values["Dir::Etc::sourcelist"] == f"{root}/etc/sources.list"
    assert values["Dir::State::lists"] == f"{root}/lists"
    assert values["Dir::Cache::archives"] == f"{root}/cache/archives"
    signed = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian"
    assert (root / "etc" / "sources.list").read_text().splitlines()[1:] == [
        f"{signed} trixie main",
        f"{signed} bookworm main",
    ]
    # apt's own preference and configuration files: present and empty, so the host's are not read
    assert (root / "etc" / "preferences").read_bytes() == b""
    assert (root / "etc" / "apt.conf").read_bytes() == b""
    assert list((root / "etc" / "apt.conf.d").iterdir()) == []
    assert list((root / "etc" / "preferences.d").iterdir()) == []
    assert (root / "lists" / "partial").is_dir() and (root / "cache" / "archives" / "partial").is_dir()


@pytest.mark.skipif(shutil.which("apt-config") is None, reason="needs apt-config")
def test_apt_itself_reads_the_configuration_as_meant(tmp_path: Path) -> None:
    """apt-config (local, no network) resolves every file and directory under the work dir."""
    root = tmp_path / "apt" / "next"
    AptEnv(settings(), "arm64", root).write()
    env = dict(os.environ, APT_CONFIG=str(root / "apt.conf"), LC_ALL="C")
    dump = subprocess.run(["apt-config", "dump"], env=env, capture_output=True, text=True, check=True).stdout
    values = {}
    for line in dump.splitlines():
        key, _, value = line.partition(" ")
        values[key] = value.strip('";')
    for key in (
        "Dir::Etc::sourcelist",
        "Dir::Etc::parts",
        "Dir::Etc::main",
        "Dir::State::lists",
        "Dir::Cache",
    ):
        assert values[key].startswith(str(root)), key
    assert values["Dir::Etc::sourceparts"] == "-"
    assert values["Dir::State::status"] == "/dev/null"
    assert values["APT::Architecture"] == "arm64"
    assert "APT::Architectures:: arm64" in {f"{k} {v}" for k, v in values.items()}


def test_the_configuration_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "apt" / "next"
    AptEnv(settings(), "amd64", root).write()
    before = {p: p.read_bytes() for p in (root / "apt.conf", root / "etc" / "sources.list")}

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    changed = AptEnv(settings(DEFAULT_KEYRING, TRIXIE), "arm64", root)
    with pytest.raises(CatalogError) as exc:
        changed.write()
    assert str(exc.value) == f"{root}: cannot write the apt configuration: No space left on device"
    # each file is as it was, and no staged copy is left beside it
    assert {p: p.read_bytes() for p in before} == before
    leftovers = [p.name for p in root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_path_that_would_break_the_quotes_is_refused(tmp_path: Path) -> None:
    root = tmp_path / 'odd"dir'
    with pytest.raises(CatalogError) as exc:
        AptEnv(settings(), "amd64", root).write()
    assert "cannot use" in str(exc.value) and "in an apt configuration" in str(exc.value)
    assert not (root / "apt.conf").exists()


# --- every apt call runs with it ----------------------------------------------------------------

FAKE_APT = r"""#!/bin/sh
# a stand-in for apt-get / apt-cache: log the call, answer like apt
tool=$(basename "$0")
echo "$tool APT_CONFIG=${APT_CONFIG:-<unset>} $*" >> "$FAKE_APT_LOG"
case "$tool $1" in
  "apt-get update")
    [ -n "$FAKE_UPDATE_FAILS" ] && { echo "E: $FAKE_UPDATE_FAILS" >&2; exit 100; }
    lists=$(sed -n 's/^Dir::State::lists "\(.*\)";$/\1/p' "$APT_CONFIG")
    : > "$lists/deb.example.invalid_debian_dists_trixie_main_binary-amd64_Packages"
    ;;
  "apt-cache show")
    printf 'Package: demo\nVersion: 1.0-1\nArchitecture: amd64\n'
    printf 'Filename: pool/main/d/demo/demo_1.0-1_amd64.deb\n'
    printf 'Size: %s\nSHA256: %s\n\n' "$FAKE_SIZE" "$FAKE_SHA"
    ;;
  "apt-get download")
    if [ "$2" = "--print-uris" ]; then
      url=http://deb.example.invalid/debian/pool/main/d/demo/demo_1.0-1_amd64.deb
      echo "'$url' demo_1.0-1_amd64.deb $FAKE_SIZE SHA256:$FAKE_SHA"
    else
      printf 'demo deb bytes' > demo_1.0-1_amd64.deb
    fi
    ;;
esac
"""
DEB_BYTES = b"demo deb bytes"


@pytest.fixture
def fake_apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """apt-get and apt-cache stand-ins first on PATH; returns the log of their calls."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for tool in ("apt-get", "apt-cache"):
        (bin_dir / tool).write_text(FAKE_APT)
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "apt.log"
    log.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_APT_LOG", str(log))
    monkeypatch.setenv("FAKE_SHA", hashlib.sha256(DEB_BYTES).hexdigest())
    monkeypatch.setenv("FAKE_SIZE", str(len(DEB_BYTES)))
    monkeypatch.delenv("APT_CONFIG", raising=False)
    monkeypatch.delenv("FAKE_UPDATE_FAILS", raising=False)
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


def keyring(tmp_path: Path) -> str:
    path = tmp_path / "archive-keyring.gpg"
    path.write_bytes(b"not really a keyring")
    return str(path)


def test_prepare_updates_once_then_only_when_asked_or_changed(tmp_path: Path, fake_apt: Path) -> None:
    root = tmp_path / "cache" / "apt" / "next"
    conf = f"APT_CONFIG={root}/apt.conf"
    AptEnv(settings(keyring(tmp_path)), "amd64", root).prepare(update=False, obj="o")
    assert calls(fake_apt) == [f"apt-get {conf} update -q"]
    # lists present and made for this configuration: nothing to do
    env = AptEnv(settings(keyring(tmp_path)), "amd64", root)
    env.prepare(update=False, obj="o")
    env.prepare(update=True, obj="o")  # a lock always updates
    assert calls(fake_apt) == [f"apt-get {conf} update -q"] * 2
    # other sources: the lists are stale
    AptEnv(settings(keyring(tmp_path), TRIXIE), "amd64", root).prepare(update=False, obj="o")
    assert len(calls(fake_apt)) == 3
    # lists gone: fetched again
    for p in (root / "lists").glob("*_Packages"):
        p.unlink()
    AptEnv(settings(keyring(tmp_path), TRIXIE), "amd64", root).prepare(update=False, obj="o")
    assert len(calls(fake_apt)) == 4


def test_a_failed_update_is_named_and_not_taken_as_done(
    tmp_path: Path, fake_apt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "apt" / "next"
    monkeypatch.setenv("FAKE_UPDATE_FAILS", "The repository 'http://x trixie InRelease' is not signed.")
    with pytest.raises(CatalogError) as exc:
        AptEnv(settings(keyring(tmp_path)), "amd64", root).prepare(update=False, obj="cat.yaml: apt")
    assert str(exc.value) == (
        f"cat.yaml: apt: apt-get update with {root}/etc/sources.list: "
        "The repository 'http://x trixie InRelease' is not signed."
    )
    assert not (root / "updated").exists()
    monkeypatch.delenv("FAKE_UPDATE_FAILS")
    AptEnv(settings(keyring(tmp_path)), "amd64", root).prepare(update=False, obj="o")
    assert len(calls(fake_apt)) == 2


def test_a_missing_keyring_is_named_before_apt_runs(tmp_path: Path, fake_apt: Path) -> None:
    with pytest.raises(CatalogError) as exc:
        AptEnv(settings(f"{tmp_path}/nosuch.gpg"), "amd64", tmp_path / "apt").prepare(
            update=True, obj="c: apt"
        )
    assert str(exc.value) == f"c: apt: apt keyring {tmp_path}/nosuch.gpg does not exist (from apt.keyring)"
    assert calls(fake_apt) == []


def write_catalog(tmp_path: Path, *, apt: dict[str, object] | None) -> Path:
    doc: dict[str, object] = {
        "channel": "next",
        "arch": "amd64",
        "components": [
            {
                "name": "demo",
                "version": "1.0-1",
                "license": "MIT",
                "source": {"kind": "deb", "package": "demo", "version": "1.0-1", "ship": "deb"},
                "files": {"*.deb": "debs/"},
            }
        ],
    }
    if apt is not None:
        doc["apt"] = apt
    path = tmp_path / "catalog" / "next.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_lock_and_fetch_run_every_apt_call_with_the_channel_config(tmp_path: Path, fake_apt: Path) -> None:
    cache = tmp_path / "cache"
    path = write_catalog(tmp_path, apt={"sources": [TRIXIE], "keyring": keyring(tmp_path)})
    lock = load_lock(lock_channel(path, cache_dir=cache))
    conf = f"APT_CONFIG={cache}/apt/next/apt.conf"
    assert calls(fake_apt) == [
        f"apt-get {conf} update -q",
        f"apt-cache {conf} show --no-all-versions demo:amd64=1.0-1",
        f"apt-get {conf} download --print-uris demo:amd64=1.0-1",
    ]
    (art,) = lock.component("demo").artifacts
    assert art.sha256 == hashlib.sha256(DEB_BYTES).hexdigest() and art.filename == "demo_1.0-1_amd64.deb"

    # a build on another day: lists present, so the fetch only downloads, through the same config
    fake_apt.write_text("")
    from vigil.bundle.catalog import load_catalog

    env = apt_env(load_catalog(path), cache)
    (staged,) = fetch_component(lock.component("demo"), cache, tmp_path / "stage", apt=env)
    assert staged.source.read_bytes() == DEB_BYTES
    assert calls(fake_apt) == [f"apt-get {conf} download -q demo:amd64=1.0-1"]


def test_without_apt_the_host_apt_is_used_as_before(tmp_path: Path, fake_apt: Path) -> None:
    cache = tmp_path / "cache"
    lock = load_lock(lock_channel(write_catalog(tmp_path, apt=None), cache_dir=cache))
    assert calls(fake_apt) == [
        "apt-cache APT_CONFIG=<unset> show --no-all-versions demo:amd64=1.0-1",
        "apt-get APT_CONFIG=<unset> download --print-uris demo:amd64=1.0-1",
    ]
    assert not (cache / "apt").exists()
    fake_apt.write_text("")
    fetch_component(lock.component("demo"), cache, tmp_path / "stage")
    assert calls(fake_apt) == ["apt-get APT_CONFIG=<unset> download -q demo:amd64=1.0-1"]


def test_apt_env_is_none_without_apt_and_under_the_cache_with_it(tmp_path: Path) -> None:
    from vigil.bundle.catalog import load_catalog

    assert apt_env(load_catalog(write_catalog(tmp_path / "a", apt=None)), tmp_path) is None
    env = apt_env(load_catalog(write_catalog(tmp_path / "b", apt={"sources": [TRIXIE]})), tmp_path / "c")
    assert env is not None and env.root == tmp_path / "c" / "apt" / "next"
    assert env.config_file == tmp_path / "c" / "apt" / "next" / "apt.conf"
    assert not env.root.exists()  # nothing written until apt is needed
    assert apt_module.AptEnv is AptEnv


# --- the shipped debian-next channel ------------------------------------------------------------

STACK = {
    "victoria-metrics": "1.112.0+ds1-2",
    "prometheus-alertmanager": "0.28.1+ds-1",
    "prometheus-node-exporter": "1.9.0-1+b4",
}


def test_debian_next_is_debian_with_the_trixie_stack() -> None:
    """Same components and files as `debian`; only the stack's versions differ, from trixie; the
    audit .debs stay at bookworm's (the hosts are Debian 12)."""
    from vigil.bundle.catalog import CATALOG_DIR, load_catalog

    debian = load_catalog(CATALOG_DIR / "debian.yaml")
    nxt = load_catalog(CATALOG_DIR / "debian-next.yaml")
    assert nxt.channel == "debian-next" and nxt.arch == debian.arch and debian.apt is None
    assert [c.name for c in nxt.components] == [c.name for c in debian.components]
    for old, new in zip(debian.components, nxt.components, strict=True):
        assert new.files == old.files and new.license == old.license, new.name
        if new.name in STACK:
            assert new.version == STACK[new.name] and new.source.version == STACK[new.name]  # type: ignore[union-attr]
        else:
            assert new.version == old.version and new.source == old.source, new.name
    assert nxt.apt is not None and nxt.apt.keyring == DEFAULT_KEYRING
    assert {(s.uri, s.suite) for s in nxt.apt.sources} == {
        ("http://deb.debian.org/debian", "trixie"),
        ("http://deb.debian.org/debian", "bookworm"),
        # rsyslog 8.2302.0-1+deb12u2 is a security update, only in bookworm-security
        ("http://deb.debian.org/debian-security", "bookworm-security"),
    }


def test_committed_debian_next_lock_is_current() -> None:
    from vigil.bundle.catalog import CATALOG_DIR, check_lock_current, load_catalog

    lock = load_lock(CATALOG_DIR / "debian-next.lock.yaml")
    check_lock_current(load_catalog(CATALOG_DIR / "debian-next.yaml"), lock)
    debian = load_lock(CATALOG_DIR / "debian.lock.yaml")
    for comp in lock.components:
        if comp.kind != "deb":
            continue
        (art,) = comp.artifacts
        assert art.size and art.sha256 and art.url and art.url.endswith("_amd64.deb"), comp.name
        if comp.name in STACK:
            assert comp.version == STACK[comp.name]
            assert art.url.startswith("http://deb.debian.org/debian/pool/main/"), art.url
        else:  # the very same .deb as channel debian's
            assert comp.artifacts == debian.component(comp.name).artifacts, comp.name
