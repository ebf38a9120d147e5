"""A release as the project makes one: keys → trust root → `bundle build` → `bundle import`.

Building the debian channel takes minutes, so the test session builds it once (the ``release``
fixture in tests/conftest.py) and every test that needs a real bundle shares that file; a test
that changes a store imports the bundle into a home of its own.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.cli import REPO, Vigil, vigil_env

#: the SOURCE_DATE_EPOCH of the shared build (2025-11-29T00:00:00Z): a fixed one makes the build
#: reproducible, which tests/integration/test_debian_bundle.py checks byte for byte
EPOCH = "1764374400"
#: long enough that a bundle dated EPOCH is valid whenever the suite runs
VALID_DAYS = 3650


@dataclass(frozen=True)
class Release:
    """A signed bundle and what it was made with (all under ``tmp``)."""

    tmp: Path
    #: the release signing key and its public half
    key: Path
    pub: Path
    #: a trust root naming ``pub`` with threshold 1
    trust: Path
    #: the bundle file
    bundle: Path
    channel: str
    version: int
    #: the environment the bundle was built in (download cache, SOURCE_DATE_EPOCH)
    build_env: dict[str, str]

    def build_again(self, out: Path) -> Path:
        """Build the same release again into OUT, with the same key and inputs; the new file."""
        return _build(Vigil(self.build_env), self.channel, self.version, self.key, out)


@dataclass(frozen=True)
class Imported:
    """A release imported into a VIGIL_HOME whose trust root is installed."""

    release: Release
    home: Path
    #: environment for `vigil` runs against this home (VIGIL_HOME, VIGIL_CACHE, PYTHONPATH)
    env: dict[str, str]

    @property
    def vigil(self) -> Vigil:
        return Vigil(self.env)

    @property
    def files(self) -> Path:
        """`<home>/bundles/<version>/files`: what the bundle unpacked to."""
        return self.home / "bundles" / str(self.release.version) / "files"

    @property
    def components(self) -> Path:
        return self.files / "components"


def _build(vigil: Vigil, channel: str, version: int, key: Path, out: Path) -> Path:
    res = vigil(
        "bundle",
        "build",
        "--channel",
        channel,
        "--version",
        str(version),
        "--key",
        str(key),
        "--valid-days",
        str(VALID_DAYS),
        "--out",
        str(out),
    )
    return Path(res.stdout.strip().splitlines()[-1])


def build_release(tmp: Path, cache: Path, *, channel: str = "debian", version: int = 1) -> Release:
    """Generate a key and a trust root under TMP and build a bundle of CHANNEL with them."""
    env = vigil_env(tmp / "build-home", VIGIL_CACHE=str(cache), SOURCE_DATE_EPOCH=EPOCH)
    vigil = Vigil(env)
    vigil("keys", "generate", "--out", str(tmp / "release"))
    vigil(
        "trust",
        "init",
        "--key",
        str(tmp / "release.pub"),
        "--threshold",
        "1",
        "--out",
        str(tmp / "trust.json"),
    )
    bundle = _build(vigil, channel, version, tmp / "release.key", tmp / "out")
    return Release(
        tmp=tmp,
        key=tmp / "release.key",
        pub=tmp / "release.pub",
        trust=tmp / "trust.json",
        bundle=bundle,
        channel=channel,
        version=version,
        build_env=env,
    )


def import_release(release: Release, home: Path, cache: Path) -> Imported:
    """Install the release's trust root in HOME and import its bundle there, as an admin host does."""
    env = vigil_env(home, VIGIL_CACHE=str(cache))
    vigil = Vigil(env)
    vigil("trust", "install", str(release.trust))
    vigil("bundle", "import", str(release.bundle))
    return Imported(release=release, home=home, env=env)


#: the upgrade's target: the debian-next bundle (tests/lab/test_upgrade.py), and a bad one after it
NEXT = 2
BAD = 3


def build_next(release: Release, out: Path) -> Path:
    """The debian-next bundle, version NEXT, built with RELEASE's key and download cache into OUT."""
    return _build(Vigil(release.build_env), "debian-next", NEXT, release.key, out)


def build_bad(release: Release, out: Path) -> Path:
    """debian-next again (version BAD), with Ansible content that starts node_exporter with a
    collector it does not know: the binary exits at start on the first host an upgrade reaches."""
    # imported here: the bundle builder is the admin side's, which the fast tests need not load
    from vigil.bundle.channel import build_channel
    from vigil.installer import __version__
    from vigil.installer.ops import load_keys

    tree = out / "tree"
    for sub in ("roles", "playbooks", "inventories/example"):
        shutil.copytree(REPO / sub, tree / sub, ignore=shutil.ignore_patterns("__pycache__"))
    defaults = tree / "roles/node_exporter/defaults/main.yml"
    text = defaults.read_text()
    wrong = text.replace(
        "node_exporter_collectors_enabled: []", "node_exporter_collectors_enabled: [no-such-collector]"
    )
    assert wrong != text, f"{defaults}: no `node_exporter_collectors_enabled: []` to change"
    defaults.write_text(wrong)
    (out / "out").mkdir()
    return build_channel(
        "debian-next",
        version=BAD,
        keys=load_keys([release.key], None),
        out_dir=out / "out",
        builder_version=__version__,
        project_dir=tree,
        cache_dir=Path(release.build_env["VIGIL_CACHE"]),
        valid_days=VALID_DAYS,
    )
