"""A `deb` component with `ship: deb`: the .deb travels whole (for `dpkg -i` on hosts), checked like
any other.

Without `ship`, a deb component is unpacked and only its `files` members are staged; with
`ship: deb` the package file itself is staged under the `files` target, byte for byte, with the
lock's sha256 as its upstream hash. The catalog and the lock refuse any other `ship` value, and
`ship` on a component that is not a deb.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vigil.bundle.catalog import LockedArtifact, LockedComponent, load_catalog, load_lock
from vigil.bundle.errors import CatalogError
from vigil.bundle.fetchers import fetch_component

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")


def make_deb(tmp: Path, name: str = "vigil-demo", version: str = "1.0-1") -> Path:
    root = tmp / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
        "Maintainer: vigil <vigil@example.invalid>\n"
        "Description: test package\n"
    )
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "demo").write_text("#!/bin/sh\necho demo\n")
    (root / "usr" / "bin" / "demo").chmod(0o755)
    deb = tmp / f"{name}_{version}_amd64.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, capture_output=True
    )
    return deb


def locked(deb: Path, *, ship: str, files: dict[str, str]) -> LockedComponent:
    sha = hashlib.sha256(deb.read_bytes()).hexdigest()
    art = LockedArtifact(
        filename=deb.name,
        url=f"https://deb.example.invalid/pool/{deb.name}",
        sha256=sha,
        size=deb.stat().st_size,
        name="vigil-demo",
        version="1.0-1",
    )
    return LockedComponent(
        name="vigil-demo",
        version="1.0-1",
        license="MIT",
        kind="deb",
        artifacts=(art,),
        files=tuple(sorted(files.items())),
        ship=ship,
    )


def seed_cache(cache: Path, deb: Path) -> None:
    """Put the .deb where the fetcher's content-addressed cache looks, so no apt or network is used."""
    sha = hashlib.sha256(deb.read_bytes()).hexdigest()
    (cache / "sha256").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(deb, cache / "sha256" / sha)


def test_ship_deb_stages_the_package_file_whole(tmp_path: Path) -> None:
    deb = make_deb(tmp_path)
    seed_cache(tmp_path / "cache", deb)
    comp = locked(deb, ship="deb", files={"*.deb": "debs/"})
    (staged,) = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert staged.path == f"components/vigil-demo/debs/{deb.name}"
    assert staged.source.read_bytes() == deb.read_bytes()
    assert staged.sha256 == staged.upstream_sha256 == hashlib.sha256(deb.read_bytes()).hexdigest()
    assert staged.mode == 0o644
    assert staged.version == "1.0-1"


def test_without_ship_a_deb_is_unpacked(tmp_path: Path) -> None:
    deb = make_deb(tmp_path)
    seed_cache(tmp_path / "cache", deb)
    comp = locked(deb, ship="files", files={"usr/bin/demo": "bin/demo"})
    (staged,) = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert staged.path == "components/vigil-demo/bin/demo" and staged.mode == 0o755


def test_ship_deb_needs_a_files_entry_naming_the_package(tmp_path: Path) -> None:
    from vigil.bundle.errors import FetchError

    deb = make_deb(tmp_path)
    seed_cache(tmp_path / "cache", deb)
    comp = locked(deb, ship="deb", files={"usr/bin/demo": "bin/demo"})
    with pytest.raises(FetchError) as exc:
        fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert "no member 'usr/bin/demo' in the source" in str(exc.value)


def write_catalog(tmp_path: Path, source: dict[str, object]) -> Path:
    path = tmp_path / "test.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "channel": "test",
                "arch": "amd64",
                "components": [
                    {
                        "name": "auditd",
                        "version": "1:3.0.9-1",
                        "license": "GPL-2.0-or-later",
                        "source": source,
                        "files": {"*.deb": "debs/"},
                    }
                ],
            }
        )
    )
    return path


def test_catalog_reads_ship_deb_and_refuses_other_values(tmp_path: Path) -> None:
    ok = load_catalog(
        write_catalog(tmp_path, {"kind": "deb", "package": "auditd", "version": "1:3.0.9-1", "ship": "deb"})
    )
    assert ok.components[0].source.ship == "deb"  # type: ignore[union-attr]
    with pytest.raises(CatalogError) as exc:
        load_catalog(
            write_catalog(
                tmp_path, {"kind": "deb", "package": "auditd", "version": "1:3.0.9-1", "ship": "tarball"}
            )
        )
    assert "component 'auditd': source: ship 'tarball' is not one of files, deb" in str(exc.value)


def test_lock_keeps_ship_and_refuses_it_on_other_kinds(tmp_path: Path) -> None:
    art = {
        "filename": "auditd_3.0.9-1_amd64.deb",
        "url": "https://deb.example.invalid/a.deb",
        "sha256": "a" * 64,
        "size": 1,
        "name": "auditd",
        "version": "1:3.0.9-1",
    }
    comp = {
        "name": "auditd",
        "version": "1:3.0.9-1",
        "license": "GPL-2.0-or-later",
        "kind": "deb",
        "ship": "deb",
        "artifacts": [art],
        "files": {"*.deb": "debs/"},
    }
    doc = {
        "lock_format": 1,
        "channel": "test",
        "arch": "amd64",
        "catalog_sha256": "b" * 64,
        "components": [comp],
    }
    path = tmp_path / "test.lock.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_lock(path).component("auditd").ship == "deb"
    comp["kind"] = "url"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CatalogError) as exc:
        load_lock(path)
    assert "component 'auditd': ship 'deb' is only for deb components" in str(exc.value)
