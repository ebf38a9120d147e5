"""The inputs of a deploy run, as one digest: the key of every role's fingerprint on the hosts.

A role's fingerprint (roles/_common/library/vigil_fingerprint.py) lets the role end at once on a host
where nothing would change: the host is as the role's last whole run left it, **and** the run's inputs
are those of that run. This module computes the inputs' side, on the admin host, once per run:

- the Ansible content the run uses (every file of the roles and playbooks, path and bytes);
- the inventory (the file, or every file of its directory, with the ``group_vars`` and ``host_vars``
  beside a file);
- the extra vars (the bundle's, the certificates', the credentials' paths), all but the run's id;
- the bytes of every admin-host file they name: each extra var or inventory value that is the
  absolute path of a regular file (a Redfish target's CA file, a credential); the files of the
  directory ``vigil_pki_dir`` names and of the home's ``secrets/`` (issued certificates, the
  Grafana password the role reads by a path of its own making). The bundle's own files are covered by
  its manifest's sha256, in the extra vars, and are not read again.

Whatever changes among them changes the key, and every role on every host runs whole once. What the
roles read from elsewhere on the admin host is not in it: there are no such reads today, and a role
that adds one must name its path in a variable.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from vigil.installer.deploy.inventory import VARS_DIRS

#: what a run's key is computed for: a run of the whole site playbook, without --tags or --skip-tags
FINGERPRINTED_PLAYBOOK = "playbooks/site.yml"
#: extra vars that differ at every run without changing what the roles do
PER_RUN_VARS = ("vigil_run_id",)
#: the most files read for one key, and the largest one read whole (larger: its size and mtime)
MAX_FILES = 20_000
MAX_READ = 64 << 20
FORMAT = b"vigil-fingerprint-key 1\n"


class _AnyTag(yaml.SafeLoader):
    """YAML as Ansible reads it, for the values only: ``!vault`` and ``!unsafe`` values are kept as text."""


_AnyTag.add_multi_constructor("!", lambda loader, suffix, node: getattr(node, "value", None))


def _files(top: Path) -> Iterator[Path]:
    """Regular files under ``top`` (itself when it is one), sorted, links not followed."""
    try:
        st = top.lstat()
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        yield top
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    for here, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(names):
            path = Path(here) / name
            if path.is_file() and not path.is_symlink():
                yield path


def _file_line(path: Path) -> bytes:
    """``path``'s name and the sha256 of its bytes (of its size and mtime past MAX_READ)."""
    try:
        st = path.lstat()
        if st.st_size > MAX_READ:
            digest = f"size {st.st_size} mtime {st.st_mtime_ns}"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        digest = f"unreadable {exc.strerror or exc}"
    return f"{path}\0{digest}\n".encode()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _named_files(values: Any, skip_under: list[Path]) -> set[Path]:
    """Absolute paths among ``values``' strings that are regular files on this host, except under
    ``skip_under``."""
    out: set[Path] = set()
    for text in _strings(values):
        if not text.startswith("/") or "\n" in text or "\0" in text or len(text) > 4096:
            continue
        path = Path(text)
        if any(path.is_relative_to(d) for d in skip_under):
            continue
        try:
            if stat.S_ISREG(path.lstat().st_mode):
                out.add(path)
        except OSError:
            continue
    return out


def _inventory_files(inventory: Path) -> list[Path]:
    if inventory.is_dir():
        return list(_files(inventory))
    out = [inventory]
    for name in VARS_DIRS:
        out.extend(_files(inventory.parent / name))
    return out


def _inventory_values(files: list[Path]) -> list[Any]:
    values = []
    for path in files:
        if path.suffix not in ("", ".yml", ".yaml", ".json"):
            continue
        try:
            values.append(yaml.load(path.read_text(encoding="utf-8"), Loader=_AnyTag))  # noqa: S506
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # its bytes are in the key all the same
    return values


def run_key(*, ansible_dir: Path, inventory: Path, extravars: dict[str, Any]) -> str:
    """The sha256 (hex) of a run's inputs, as the module docstring lists them."""
    h = hashlib.sha256(FORMAT)
    count = 0

    def add(path: Path) -> None:
        nonlocal count
        count += 1
        if count <= MAX_FILES:
            h.update(_file_line(path))

    for path in _files(ansible_dir):
        h.update(str(path.relative_to(ansible_dir)).encode() + b"\0")
        h.update(_file_line(path).split(b"\0", 1)[1])
    inventory = inventory.resolve()
    inv_files = _inventory_files(inventory)
    for path in inv_files:
        add(path)
    kept = {k: v for k, v in extravars.items() if k not in PER_RUN_VARS}
    h.update(json.dumps(kept, sort_keys=True, default=str).encode() + b"\n")
    bundle_dir = extravars.get("vigil_bundle_dir")
    skip = [Path(bundle_dir)] if isinstance(bundle_dir, str) and bundle_dir.startswith("/") else []
    named = _named_files([kept, _inventory_values(inv_files)], skip)
    home = extravars.get("vigil_home")
    trees = [
        Path(p)
        for p in (extravars.get("vigil_pki_dir"), f"{home}/secrets" if isinstance(home, str) else None)
        if isinstance(p, str) and p.startswith("/")
    ]
    for tree in trees:
        named.update(_files(tree))
    for path in sorted(named):
        add(path)
    h.update(f"files {count}\n".encode())
    return h.hexdigest()
