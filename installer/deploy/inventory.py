"""Check an inventory before anything is changed: groups vigil knows, every host placed, required vars.

Parsed with Ansible's own inventory manager, so YAML, INI, directories and group_vars are read
exactly as the playbook run will read them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vigil.basics.bounded import load_json, load_yaml, read_bounded, shown
from vigil.installer.deploy.artifacts import DeployError

KNOWN_GROUPS = ("monitoring", "slurm_controller", "gpu_nodes")
REQUIRED_HOST_VARS = ("ansible_host",)


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: list[str]
    groups: dict[str, list[str]] = field(default_factory=dict)
    #: the hosts the deploy's limit selects (all of them without a limit)
    selected: list[str] = field(default_factory=list)
    #: each host's `ansible_host` (an address or a DNS name), as the play resolves it
    addresses: dict[str, str] = field(default_factory=dict)


def inventory_source(path: Path) -> Path:
    """A directory holding ``hosts.yml`` is the usual form; a file is taken as it is."""
    if path.is_dir() and not any(
        (path / n).exists() for n in ("hosts.yml", "hosts.yaml", "hosts", "hosts.ini")
    ):
        raise DeployError(str(path), "inventory directory has no hosts.yml (for the lab: run `vigil lab up`)")
    if not path.exists():
        raise DeployError(str(path), "inventory not found")
    return path


class _AnyTagLoader(yaml.SafeLoader):
    """YAML as Ansible reads it, for a syntax check only: its tags (``!vault``, ``!unsafe``) are accepted."""


_AnyTagLoader.add_multi_constructor("!", lambda loader, suffix, node: None)

#: where Ansible reads variables from, in an inventory's directory
VARS_DIRS = ("group_vars", "host_vars")
#: the most files of an inventory tree read before Ansible is let at it
MAX_INVENTORY_FILES = 10_000
#: names Ansible's inventory reader skips in a directory (its IGNORED_ALWAYS and the default
#: INVENTORY_IGNORE_EXTS)
_IGNORED = re.compile(
    r"^\.|^vars_plugins$|(\.pyc|\.pyo|\.swp|\.bak|~|\.rpm|\.md|\.txt|\.rst|\.orig|\.cfg|\.retry)$"
)
#: the suffixes of the files Ansible reads in group_vars/ and host_vars/ ("": YAML too)
_VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"not valid YAML: {problem}{where}"


def inventory_files(source: Path) -> list[tuple[Path, bool]]:
    """The files Ansible reads of the inventory SOURCE, each with whether it is a file of variables:
    the file itself and the ``group_vars``/``host_vars`` beside it, or each file of the directory's
    tree that Ansible does not skip (links followed, as Ansible follows them)."""
    root = source if source.is_dir() else source.parent
    out: list[tuple[Path, bool]] = [] if source.is_dir() else [(source, False)]
    seen: set[tuple[int, int]] = set()
    for top in [source] if source.is_dir() else [root / d for d in VARS_DIRS]:
        for folder, dirs, files in os.walk(top, followlinks=True):
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:  # a link back up the tree: read once
                dirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            rel = Path(folder).relative_to(root).parts
            in_vars = bool(rel) and rel[0] in VARS_DIRS
            # under the top: group_vars/ and host_vars/ hold variables; deeper, Ansible skips them
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and (in_vars or not _IGNORED.search(d))
                and (in_vars or not rel or d not in VARS_DIRS)
            )
            for name in sorted(files):
                if name.startswith("."):
                    continue
                if in_vars and Path(name).suffix not in _VARS_SUFFIXES:
                    continue
                if not in_vars and _IGNORED.search(name):
                    continue
                out.append((Path(folder) / name, in_vars))
            if len(out) > MAX_INVENTORY_FILES:
                raise DeployError(str(source), f"holds more than {MAX_INVENTORY_FILES} files; refused")
    return out


def check_files(source: Path) -> None:
    """Every file Ansible will read of the inventory, read first within bounds; one line naming the
    file and the reason for the first that fails:

    - a regular file of at most 1 MiB (``vigil.basics.bounded.MAX_BYTES``);
    - YAML (``.yml``, ``.yaml``, and files without a suffix under group_vars/host_vars): valid, with
      Ansible's tags accepted, aliases adding at most 10,000 values, nesting at most 64 deep (a 1.4 KB
      alias bomb otherwise held the check for minutes and hundreds of MB); JSON: nesting bounded;
    - not executable, outside group_vars/host_vars: Ansible's script plugin runs an executable file
      of an inventory to get its hosts — on the admin host, in a check that runs nothing (vigil reads
      YAML and INI inventories).

    Then Ansible parses the inventory (it would try every inventory plugin in turn on a bad file and
    print a warning for each)."""
    for f, in_vars in inventory_files(source):
        where = str(f)
        if f.is_symlink() and not f.exists():
            continue  # a dangling link: nothing for Ansible to read
        if not in_vars and f.is_file() and os.access(f, os.X_OK):
            raise DeployError(
                where,
                "is executable: Ansible would run it as an inventory script; vigil reads YAML and INI "
                "inventories (chmod a-x it)",
            )
        data = read_bounded(f, error=DeployError)
        try:
            if f.suffix in (".yml", ".yaml") or (in_vars and not f.suffix):
                load_yaml(data, where, loader=_AnyTagLoader, error=DeployError)
            elif f.suffix == ".json":
                load_json(data, where, error=DeployError)
        except yaml.YAMLError as exc:
            raise DeployError(where, _yaml_error(exc)) from None
        except ValueError as exc:
            raise DeployError(where, f"not valid JSON: {str(exc).splitlines()[0]}") from None


def load_inventory(path: Path, *, limit: str | None = None) -> Inventory:
    """Parse and check; raises DeployError naming the inventory and what to fix.

    With ``limit`` (an Ansible host pattern), the hosts it selects are in ``Inventory.selected``; a
    pattern that selects none is refused here, before anything runs.
    """
    source = inventory_source(path)
    check_files(source)
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    # an inventory that no plugin can parse is an error here, not a warning; the setting is read
    # from the environment while parsing, and restored after (this process may run Ansible again)
    saved = os.environ.get("ANSIBLE_INVENTORY_UNPARSED_FAILED")
    os.environ["ANSIBLE_INVENTORY_UNPARSED_FAILED"] = "True"
    try:
        manager = InventoryManager(loader=DataLoader(), sources=[str(source)])
    except AnsibleError as exc:
        raise DeployError(str(path), f"cannot parse inventory: {str(exc).splitlines()[0]}") from None
    finally:
        if saved is None:
            os.environ.pop("ANSIBLE_INVENTORY_UNPARSED_FAILED", None)
        else:
            os.environ["ANSIBLE_INVENTORY_UNPARSED_FAILED"] = saved
    groups = {name: sorted(h.name for h in g.get_hosts()) for name, g in manager.groups.items()}
    hosts = sorted(h.name for h in manager.get_hosts())
    if not hosts:
        raise DeployError(str(path), "inventory has no hosts")
    all_vars = manager.groups["all"].get_vars()
    allowed = set(KNOWN_GROUPS) | {"all", "ungrouped"} | set(all_vars.get("vigil_site_groups", []) or [])
    for name in sorted(groups):
        if name not in allowed:
            raise DeployError(
                str(path),
                f"group '{name}' is not one vigil knows ({', '.join(KNOWN_GROUPS)}); "
                "list site-specific groups in vigil_site_groups",
            )
    placed = {h for name, members in groups.items() if name in KNOWN_GROUPS for h in members}
    for host in hosts:
        if host not in placed:
            raise DeployError(str(path), f"host '{host}' is in none of the groups {', '.join(KNOWN_GROUPS)}")
    if not groups.get("monitoring"):
        raise DeployError(
            str(path), "group 'monitoring' needs at least one host (VictoriaMetrics, vmalert, Alertmanager)"
        )
    from ansible.vars.manager import VariableManager

    # as the play resolves them: the host's own, its groups' (hosts.yml and group_vars/), host_vars/
    resolved = VariableManager(loader=manager._loader, inventory=manager)
    addresses = {}
    for host in hosts:
        hvars = resolved.get_vars(host=manager.get_host(host), include_hostvars=False)
        for var in REQUIRED_HOST_VARS:
            if not hvars.get(var):
                raise DeployError(str(path), f"host '{host}' lacks required variable {var}")
        addresses[host] = str(hvars["ansible_host"])
    selected = hosts
    if limit is not None:
        manager.subset(limit)
        selected = sorted(h.name for h in manager.get_hosts())
        if not selected:
            raise DeployError(f"--limit {limit}", f"matches no host of {path} (hosts: {', '.join(hosts)})")
    return Inventory(
        path=source,
        hosts=hosts,
        groups={k: v for k, v in groups.items() if k in KNOWN_GROUPS},
        selected=selected,
        addresses=addresses,
    )


#: the file of the variables every host shares, in an inventory directory (the first that exists)
SHARED_VARS = ("group_vars/all.yml", "group_vars/all.yaml")
#: the most an edited file of variables may hold
SHARED_VARS_MAX = 1 << 20


@dataclass(frozen=True)
class SharedVars:
    """``group_vars/all.yml`` of an inventory directory as read: its text and the digest a save checks."""

    path: Path
    text: str
    sha256: str


def shared_vars(inventory: Path) -> SharedVars:
    """Read the inventory's shared variables file (a missing one reads as empty, to be created).

    Only an inventory directory has one; the file must be a regular file of at most 1 MiB (a link
    is refused: the edit must land in the inventory, not wherever the link points)."""
    import hashlib

    if not inventory.is_dir():
        raise DeployError(
            str(inventory), "is a file; shared variables live in an inventory directory's group_vars/"
        )
    path = next(
        (inventory / n for n in SHARED_VARS if (inventory / n).exists() or (inventory / n).is_symlink()),
        inventory / SHARED_VARS[0],
    )
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise DeployError(str(path), "is not a regular file (a link or a directory); refusing to edit it")
    data = read_bounded(path, max_bytes=SHARED_VARS_MAX + 1, error=DeployError) if path.exists() else b""
    if len(data) > SHARED_VARS_MAX:
        raise DeployError(str(path), f"is larger than {SHARED_VARS_MAX} bytes; edit it with an editor")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise DeployError(str(path), "is not UTF-8 text") from None
    return SharedVars(path, text, hashlib.sha256(data).hexdigest())


def parse_shared_vars(text: str, where: str) -> dict[str, object]:
    """The new variables: YAML (Ansible's tags allowed) whose top level is a mapping of names."""
    if len(text.encode()) > SHARED_VARS_MAX:
        raise DeployError(where, f"is larger than {SHARED_VARS_MAX} bytes")
    try:
        doc = load_yaml(text, where, loader=_AnyTagLoader, error=DeployError)
    except yaml.YAMLError as exc:
        raise DeployError(where, f"{_yaml_error(exc)}; nothing was written") from None
    except DeployError as exc:
        raise DeployError(where, f"{exc.reason}; nothing was written") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise DeployError(
            where, f"must be a mapping of variable names, not a {type(doc).__name__}; nothing was written"
        )
    bad = [k for k in doc if not isinstance(k, str) or not k.isidentifier()]
    if bad:
        raise DeployError(where, f"{shown(bad[0])} is not a variable name; nothing was written")
    return doc
