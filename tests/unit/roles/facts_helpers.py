"""Shared by the facts-file tests: the module under test, and a host's files as the roles leave them."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.unit.roles.rendering import ROLES

MODULE = ROLES / "common" / "library" / "vigil_deployed.py"
RUN = {"bundle_version": 7, "bundle_channel": "debian", "manifest_sha256": "ab" * 32, "run_id": "r1"}


def load_module(path: Path = MODULE) -> ModuleType:
    """One of the roles' Ansible modules, loaded from its file for its functions to be tested."""
    spec = importlib.util.spec_from_file_location(f"{path.stem}_under_test", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


vd = load_module()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install(root: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """Make /opt/vigil/<name>/<version>/… and its current link under ``root``; returns the home."""
    home = root / "opt" / name
    for rel, text in files.items():
        p = home / version / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    link = home / "current"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(version)
    return home


def entry(
    root: Path, role: str, component: str, version: str, *, service: str = "", **extra: Any
) -> dict[str, Any]:
    """What the `_common` entry points record for a role (install + unit)."""
    name = extra.pop("install_name", "") or component
    home = install(root, name, version, {"bin/" + role: f"{role} {version}\n"})
    conf = root / "etc" / role
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "config.yml").write_text(f"{role}: {version}\n")
    rec: dict[str, Any] = {
        "role": role,
        "record_as": "",
        "install_name": name if name != component else "",
        "component": component,
        "version": version,
        "bundle_version": extra.pop("bundle_version", RUN["bundle_version"]),
        "home": str(home),
        "current": version,
        "paths": [str(home / version / "bin" / role)],
        "config_dirs": [str(conf)],
        "trees": [],
    }
    if service:
        unit = root / "units" / f"{service}.service"
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text(f"[Service]\nExecStart={home}/current/bin/{role}\n")
        rec.update(service=service, unit=str(unit))
    rec.update(extra)
    return rec
