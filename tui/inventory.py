"""What the Inventory screen shows of an inventory the deploy's own check has passed: each host's
address and the variables every host shares, as Ansible resolves them (hosts.yml, group_vars,
host_vars), read with Ansible's own inventory and variable managers. Nothing is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: shown in place of a value that is encrypted (Ansible Vault): the console has no vault secret
VAULTED = "(vault-encrypted)"


@dataclass(frozen=True)
class HostVars:
    #: host -> ansible_host (empty when the host has none)
    addresses: dict[str, str] = field(default_factory=dict)
    #: the variables every host has, with the same value on each (their common settings)
    common: dict[str, str] = field(default_factory=dict)


def show_value(value: Any) -> str:
    """A variable's value in one line; an encrypted one is not decrypted."""
    if "vault" in type(value).__name__.lower():
        return VAULTED
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except Exception:  # a value Ansible cannot render without a secret, or some other object
        return VAULTED if "vault" in repr(type(value)).lower() else f"({type(value).__name__})"


def read_host_vars(source: Path, hosts: list[str]) -> HostVars:
    """Each host's variables as the play will see them (without facts or Ansible's magic names)."""
    import ansible.constants as C  # noqa: N812 - Ansible's own name
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(source)])
    variables = VariableManager(loader=loader, inventory=manager)
    skip = set(C.INTERNAL_STATIC_VARS) | set(C.MAGIC_VARIABLE_MAPPING) | {"omit"}
    shown: dict[str, dict[str, str]] = {}
    addresses: dict[str, str] = {}
    for name in hosts:
        host = manager.get_host(name)
        if host is None:
            continue
        hvars = variables.get_vars(host=host, include_hostvars=False)
        shown[name] = {k: show_value(v) for k, v in hvars.items() if k not in skip}
        address = hvars.get("ansible_host")
        addresses[name] = str(address) if isinstance(address, str | int) else show_value(address)
        if address is None:
            addresses[name] = ""
    common: dict[str, str] = {}
    if shown:
        first, *rest = shown.values()
        common = {k: v for k, v in sorted(first.items()) if all(r.get(k) == v for r in rest)}
    return HostVars(addresses=addresses, common=common)
