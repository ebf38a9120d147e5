"""The wheels ship every package of the tree, under the one vigil.* namespace, with every data file,
and setuptools builds them without a warning about the configuration."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from vigil.bundle.fetchers._pip import clean_pip_env

REPO = Path(__file__).resolve().parents[2]
#: the two projects: the admin side (the root) and the node-side exporters
PROJECTS = {"vigil": REPO, "vigil-exporters": REPO / "exporters"}
#: tracked files under a package folder that are the project's own build files, not package data
BUILD_FILES = {"exporters/pyproject.toml", "exporters/LICENSE"}


def _setup(project: Path) -> dict[str, Any]:
    setup: dict[str, Any] = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setup


def _tracked(folder: Path) -> list[Path]:
    """The files under ``folder`` that git tracks or would (not ignored), relative to it: what the
    bundle's wheel build copies (vigil.bundle.fetchers._project)."""
    res = subprocess.run(
        ["git", "-C", str(folder), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, f"git ls-files in {folder}: {res.stderr}"
    return [Path(n) for n in res.stdout.split("\0") if n]


def _packages_on_disk(project: Path) -> dict[str, Path]:
    """Every folder Python can import under a mapped folder, by dotted name: the folders with an
    __init__.py and the data folders (tracked files, no __init__.py) whose path is all identifiers."""
    found: dict[str, Path] = {}
    for name, folder in _setup(project)["package-dir"].items():
        root = (project / folder).resolve()
        for rel in _tracked(root):
            parts = rel.parent.parts
            for depth in range(len(parts) + 1):
                if not all(p.isidentifier() and p != "__pycache__" for p in parts[:depth]):
                    break
                found[".".join([name, *parts[:depth]])] = root.joinpath(*parts[:depth])
    return found


@pytest.mark.parametrize("dist", PROJECTS)
def test_the_package_list_is_the_tree(dist: str) -> None:
    """Each folder under a mapped folder that Python can import, code or data, is listed in pyproject
    (setuptools cannot discover packages through a package-dir mapping, and warns that it will leave
    an unlisted data folder out of the wheel), and nothing else is."""
    project = PROJECTS[dist]
    packages = _setup(project)["packages"]
    assert set(packages) == set(_packages_on_disk(project))
    assert all(name.startswith("vigil.") for name in packages)
    assert not (REPO / "vigil" / "__init__.py").exists()  # a namespace package, shared with vigil.exporters


@pytest.mark.parametrize("dist", PROJECTS)
def test_package_data_holds_every_data_file(dist: str) -> None:
    """Each tracked file that is not Python is matched by its own package's package-data patterns
    (the folder it is in, a data folder being a package of its own)."""
    project = PROJECTS[dist]
    package_data: dict[str, list[str]] = _setup(project).get("package-data", {})
    on_disk = _packages_on_disk(project)
    shipped: set[Path] = set()
    for name, patterns in package_data.items():
        assert name in on_disk, f"package-data for {name}, which is not a package of the tree"
        for pattern in patterns:
            matched = {p for p in on_disk[name].glob(pattern) if p.is_file()}
            assert matched, f"{name}: {pattern!r} matches no file"
            shipped |= matched
    missing = []
    for name, folder in _setup(project)["package-dir"].items():
        root = (project / folder).resolve()
        for rel in _tracked(root):
            path = root / rel
            build_file = str(path.relative_to(REPO)) in BUILD_FILES
            if path.suffix != ".py" and not build_file and path not in shipped:
                missing.append(f"{name}: {rel}")
    assert not missing, f"not in package-data: {missing}"


@pytest.mark.parametrize("dist", PROJECTS)
def test_the_licence_is_an_spdx_expression_with_its_file(dist: str) -> None:
    project = PROJECTS[dist]
    doc = tomllib.loads((project / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "Apache-2.0"  # setuptools >= 77 deprecates the {text = ...} table
    assert doc["project"]["license-files"] == ["LICENSE"]
    assert "setuptools>=77" in doc["build-system"]["requires"]
    assert (project / "LICENSE").read_text().split()[:3] == ["Apache", "License", "Version"]
    assert (project / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()


@pytest.mark.parametrize("dist", PROJECTS)
def test_the_wheel_builds_without_warnings(dist: str, tmp_path: Path) -> None:
    """The bundle's way (pip wheel --no-build-isolation on a copy of the tracked files): setuptools says
    nothing about the configuration, and the wheel holds each tracked file of the packages."""
    project = PROJECTS[dist]
    src = tmp_path / "src"
    for rel in _tracked(project):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(project / rel, src / rel)
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["-w", str(tmp_path / "out"), str(src)],
        capture_output=True,
        text=True,
        check=False,
        env=clean_pip_env(),
        timeout=300,
    )
    output = res.stdout + res.stderr
    assert res.returncode == 0, output
    assert "Warning" not in output and "!!" not in output, output
    (wheel,) = (tmp_path / "out").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    expected = set()
    for name, folder in _setup(project)["package-dir"].items():
        root = (project / folder).resolve()
        base = name.replace(".", "/")
        for rel in _tracked(root):
            if str((root / rel).relative_to(REPO)) not in BUILD_FILES:
                expected.add(f"{base}/{rel.as_posix()}")
    info = wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"
    assert {n for n in names if not n.startswith(info)} == expected
    assert f"{info}/licenses/LICENSE" in names
