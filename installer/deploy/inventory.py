"""Check an inventory before anything is changed: groups vigil knows, every host placed, required vars.

Parsed with Ansible's own inventory manager, so YAML, INI, directories and group_vars are read
exactly as the playbook run will read them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

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


def check_yaml_syntax(source: Path) -> None:
    """One line naming the file, the line and the YAML error, before Ansible reads the inventory
    (Ansible would try every inventory plugin in turn and print a warning for each)."""
    if source.is_dir():
        files = [source / n for n in ("hosts.yml", "hosts.yaml")]
        for sub in ("group_vars", "host_vars"):
            files += sorted((source / sub).glob("**/*.y*ml"))
    else:
        files = [source]
    for f in files:
        if f.suffix not in (".yml", ".yaml") or not f.is_file():
            continue
        try:
            yaml.load(f.read_bytes(), Loader=_AnyTagLoader)  # noqa: S506 - a safe loader that drops tags
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise DeployError(str(f), f"not valid YAML: {problem}{where}") from None


def load_inventory(path: Path, *, limit: str | None = None) -> Inventory:
    """Parse and check; raises DeployError naming the inventory and what to fix.

    With ``limit`` (an Ansible host pattern), the hosts it selects are in ``Inventory.selected``; a
    pattern that selects none is refused here, before anything runs.
    """
    source = inventory_source(path)
    check_yaml_syntax(source)
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
    data = path.read_bytes() if path.exists() else b""
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
        doc = yaml.load(text, Loader=_AnyTagLoader)  # noqa: S506 - a safe loader that drops tags
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DeployError(where, f"not valid YAML: {problem}{at}; nothing was written") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise DeployError(
            where, f"must be a mapping of variable names, not a {type(doc).__name__}; nothing was written"
        )
    bad = [k for k in doc if not isinstance(k, str) or not k.isidentifier()]
    if bad:
        raise DeployError(where, f"{bad[0]!r} is not a variable name; nothing was written")
    return doc
