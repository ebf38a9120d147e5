"""The real thing: the `debian` channel built from Debian's packages and PyPI's wheels, end to end.

Built twice with the same SOURCE_DATE_EPOCH (byte-identical: the session's shared build, and once
more here), checked by the stock minisign,
verified, inspected, imported, and then used the way an air-gapped admin host uses it:
a fresh virtual environment installs vigil from the bundle's wheels with `pip --no-index`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import Vigil, vigil_env
from tests.helpers.release import EPOCH, Release

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, release: Release, vigil_cache: Path) -> dict[str, object]:
    """The session's release (built with SOURCE_DATE_EPOCH) as "a", and the same release built again
    here, into a directory of its own, as "b"."""
    tmp = tmp_path_factory.mktemp("debian")
    env = vigil_env(tmp / "home", VIGIL_CACHE=str(vigil_cache), SOURCE_DATE_EPOCH=EPOCH)
    b = release.build_again(tmp / "b")
    return {"tmp": tmp, "env": env, "a": release.bundle, "b": b, "release": release}


def test_build_names_the_bundle_and_is_byte_identical(built: dict[str, object]) -> None:
    a, b = built["a"], built["b"]
    assert isinstance(a, Path) and isinstance(b, Path)
    assert a.name == "vigil-1-amd64.bundle"
    assert a.read_bytes() == b.read_bytes()


def test_stock_minisign_verifies_real_manifest(built: dict[str, object]) -> None:
    tmp, a, release = built["tmp"], built["a"], built["release"]
    assert isinstance(tmp, Path) and isinstance(a, Path) and isinstance(release, Release)
    ex = tmp / "extract"
    ex.mkdir()
    subprocess.run(["tar", "-xf", str(a), "-C", str(ex), "manifest.json", "signatures"], check=True)
    (sig,) = list((ex / "signatures").iterdir())
    res = subprocess.run(
        ["minisign", "-V", "-m", str(ex / "manifest.json"), "-x", str(sig), "-p", str(release.pub)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert "Signature and comment signature verified" in res.stdout


def test_inspect_lists_the_debian_components(built: dict[str, object]) -> None:
    env, a = built["env"], built["a"]
    assert isinstance(env, dict) and isinstance(a, Path)
    info = Vigil(env).json("bundle", "inspect", str(a), "--json")
    comps = {c["name"]: c for c in info["components"]}
    assert comps["victoria-metrics"]["version"] == "1.79.5+ds1-2+b5"
    assert comps["prometheus-alertmanager"]["version"] == "0.25.0-1+b4"
    assert comps["prometheus-node-exporter"]["version"] == "1.5.0-1+b6"
    assert comps["victoria-metrics"]["files"] == 5
    assert all(len(c["upstream_sha256"]) == 64 for c in comps.values() if c["kind"] == "deb")
    assert info["sbom"]["format"] == "CycloneDX 1.6" and info["sbom"]["components"] >= 20
    # every wheel's licence comes from its own METADATA; vigil-deps shows the AND of them
    assert "unknown" not in info["sbom"]["licenses"], info["sbom"]["licenses"]
    deps = comps["vigil-deps"]["license"]
    assert "NOASSERTION" not in deps, deps
    assert {"MIT", "BSD-3-Clause", "GPL-3.0-or-later"} <= set(deps.split(" AND ")), deps
    assert info["created"] == "2025-11-29T00:00:00Z"


def test_verify_import_and_run_the_shipped_binaries(built: dict[str, object]) -> None:
    env, a, release = built["env"], built["a"], built["release"]
    assert isinstance(env, dict) and isinstance(a, Path) and isinstance(release, Release)
    vigil = Vigil(env)
    home = Path(env["VIGIL_HOME"])
    res = vigil("bundle", "verify", str(a), "--trust", str(release.trust))
    assert res.stdout.startswith("OK: vigil-1-amd64.bundle: version 1, ")
    vigil("bundle", "import", str(a), "--trust", str(release.trust))
    files = home / "bundles" / "1" / "files" / "components"
    out = subprocess.run(
        [str(files / "victoria-metrics" / "bin" / "vmalert"), "-help"], capture_output=True, text=True
    )
    assert (
        "vmalert processes alerts and recording rules" in out.stdout + out.stderr
    )  # Debian's -version is empty
    out = subprocess.run(
        [str(files / "prometheus-node-exporter" / "bin" / "node_exporter"), "--version"],
        capture_output=True,
        text=True,
    )
    assert "version 1.5.0" in out.stdout + out.stderr
    out = subprocess.run(
        [str(files / "prometheus-alertmanager" / "bin" / "amtool"), "--version"],
        capture_output=True,
        text=True,
    )
    assert "0.25.0" in out.stdout + out.stderr
    audit = vigil("audit", "verify")
    assert audit.stdout.startswith("OK: audit: ")


def test_admin_host_installs_vigil_from_the_bundle_offline(built: dict[str, object]) -> None:
    tmp, env, a, release = built["tmp"], built["env"], built["a"], built["release"]
    assert isinstance(tmp, Path) and isinstance(env, dict) and isinstance(a, Path)
    assert isinstance(release, Release)
    home = tmp / "offline-home"
    Vigil(env).with_env(VIGIL_HOME=str(home))("bundle", "import", str(a), "--trust", str(release.trust))
    wheels = home / "bundles" / "1" / "files" / "components"
    venv = tmp / "admin-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    clean.update(PIP_CONFIG_FILE="/dev/null", PIP_NO_INDEX="1")
    res = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--no-index",
            "--find-links",
            str(wheels / "vigil-deps" / "wheels"),
            "--find-links",
            str(wheels / "vigil" / "wheels"),
            "vigil",
        ],
        capture_output=True,
        text=True,
        env=clean,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run(
        [str(venv / "bin" / "vigil"), "bundle", "verify", str(a), "--trust", str(release.trust)],
        capture_output=True,
        text=True,
        env={**clean, "VIGIL_HOME": str(home)},
        cwd=str(tmp),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("OK: vigil-1-amd64.bundle")
    shutil.rmtree(venv)
