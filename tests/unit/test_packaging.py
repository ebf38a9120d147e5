"""The wheel ships every package of the tree, under the one vigil.* namespace."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_package_list_is_the_tree() -> None:
    """Each folder with an __init__.py under a mapped folder is listed in pyproject (setuptools cannot
    discover packages through a package-dir mapping), and nothing else is."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = setup["package-dir"]
    on_disk = set()
    for name, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            on_disk.add(".".join([name, *rel.parts]))
    assert set(setup["packages"]) == on_disk
    assert all(name.startswith("vigil.") for name in setup["packages"])
    assert not (REPO / "vigil" / "__init__.py").exists()  # a namespace package, shared with vigil.exporters
