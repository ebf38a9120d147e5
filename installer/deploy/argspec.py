"""The roles' argument specs, checked against an inventory before any host is contacted.

Every role validates its variables when its play starts (``meta/argument_specs.yml``, entry point
``main``); a wrong type or value then stops a deploy minutes in, on the first host that reaches
that role. This is the same check, made up front and offline, for every host and every role the
site playbook gives it: the same validator (Ansible's ``ArgumentSpecValidator``), the values as the
play would see them (the role's defaults under the inventory's variables, templated with Ansible's
templar). Nothing is run to get them: a value whose template would run something (a lookup) or that
the check cannot evaluate safely, and a value that can only be worked out on the host (one that
reads facts), is deferred — evaluated at deploy time by the play — and listed with the reason
(``_offline.py``); a list or mapping among them is still checked for its type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from vigil.basics.bounded import load_yaml_file
from vigil.basics.errors import one_line
from vigil.installer.deploy._offline import DEFERRED, LOOKUP, HostValues, no_lookups
from vigil.installer.deploy.artifacts import DeployError

PLAYBOOK = "playbooks/site.yml"
#: the reason of a value whose template failed offline: it reads facts, or another host's variables
NEEDS_HOST = "it needs values known only at deploy time"


@dataclass(frozen=True)
class Finding:
    """A variable of HOST that ROLE's argument spec refuses."""

    host: str
    role: str
    message: str

    def line(self) -> str:
        return f"host {self.host}: role {self.role}: {self.message}"


#: how many hosts a grouped line names before it counts the rest
HOSTS_SHOWN = 5


class Deferral(NamedTuple):
    """A variable of HOST for ROLE that the check leaves to the play, and why."""

    host: str
    role: str
    variable: str
    reason: str


def _grouped(items: Iterable[tuple[str, str, str]]) -> list[str]:
    """(role, message, host) as one line per role and message, naming the hosts it holds for."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for role, message, host in items:
        grouped.setdefault((role, message), []).append(host)
    out = []
    for (role, message), hosts in grouped.items():
        named = ", ".join(hosts[:HOSTS_SHOWN])
        more = f" and {len(hosts) - HOSTS_SHOWN} more" if len(hosts) > HOSTS_SHOWN else ""
        out.append(f"role {role}: {message} (host{'s' if len(hosts) > 1 else ''} {named}{more})")
    return out


@dataclass
class SpecCheck:
    findings: list[Finding] = field(default_factory=list)
    #: (host, role) pairs checked
    checked: int = 0
    #: values not evaluated here: the play evaluates and checks them
    deferred: list[Deferral] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per role and message, naming the hosts it holds for (the same group_vars
        mistake on 500 nodes is one line)."""
        return _grouped((f.role, f.message, f.host) for f in self.findings)

    def deferred_lines(self) -> list[str]:
        """One line per role, variable and reason: ``role R: V: deferred: evaluated at deploy time
        (WHY) (hosts …)``."""
        return _grouped((d.role, f"{d.variable}: {DEFERRED} ({d.reason})", d.host) for d in self.deferred)


def _yaml(path: Path) -> Any:
    """A file of the Ansible content (the bundle's, or ``--ansible-dir``), read within the bounds of
    :mod:`vigil.basics.bounded`."""
    try:
        return load_yaml_file(path, error=DeployError)
    except yaml.YAMLError as exc:
        raise DeployError(str(path), f"unreadable: {str(exc).splitlines()[0]}") from None


def site_roles(ansible_dir: Path) -> list[tuple[str, str]]:
    """(host pattern, role) of each play of the site playbook, in order."""
    plays = _yaml(ansible_dir / PLAYBOOK)
    if not isinstance(plays, list):
        raise DeployError(str(ansible_dir / PLAYBOOK), "not a list of plays")
    out: list[tuple[str, str]] = []
    for play in plays:
        if not isinstance(play, dict):
            continue
        hosts = play.get("hosts", "")
        for role in play.get("roles") or []:
            name = role.get("role") if isinstance(role, dict) else role
            if isinstance(name, str) and isinstance(hosts, str):
                out.append((hosts, name))
    return out


def role_spec(ansible_dir: Path, role: str) -> dict[str, Any] | None:
    """The options of ROLE's ``main`` entry point, or None when it has no argument spec."""
    path = ansible_dir / "roles" / role / "meta" / "argument_specs.yml"
    if not path.is_file():
        return None
    doc = _yaml(path)
    try:
        options = doc["argument_specs"]["main"].get("options") or {}
    except (TypeError, KeyError, AttributeError):
        raise DeployError(str(path), "has no argument_specs.main") from None
    if not isinstance(options, dict):
        raise DeployError(str(path), "argument_specs.main.options is not a mapping")
    return options


def role_defaults(ansible_dir: Path, role: str) -> dict[str, Any]:
    path = ansible_dir / "roles" / role / "defaults" / "main.yml"
    doc = _yaml(path) if path.is_file() else {}
    return doc if isinstance(doc, dict) else {}


def check_argument_specs(ansible_dir: Path, source: Path, hosts: Iterable[str] | None = None) -> SpecCheck:
    """Each host's variables (of HOSTS, or every host) against the argument spec of each role the
    site playbook gives it."""
    from ansible.inventory.manager import InventoryManager
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(source)])
    variables = VariableManager(loader=loader, inventory=manager)
    out = SpecCheck()
    only = set(hosts) if hosts is not None else None
    specs: dict[str, dict[str, Any] | None] = {}
    plays = site_roles(ansible_dir)
    with no_lookups() as refused:
        for pattern, role in plays:
            if role not in specs:
                specs[role] = role_spec(ansible_dir, role)
            spec = specs[role]
            if spec is None:
                continue
            defaults = role_defaults(ansible_dir, role)
            for host in sorted(h.name for h in manager.get_hosts(pattern)):
                if only is not None and host not in only:
                    continue
                hvars = variables.get_vars(host=manager.get_host(host), include_hostvars=False)
                merged = {**defaults, **hvars}
                provided, deferred = _offline_values(spec, merged, loader, refused)
                out.deferred += [Deferral(host, role, name, why) for name, why in deferred]
                # a deferred list or mapping written in YAML: its type is known without rendering it
                typed = {
                    name: {"type": spec[name].get("type", "str")}
                    for name, _ in deferred
                    if isinstance(merged[name], Mapping | list)
                }
                if typed:
                    result = ArgumentSpecValidator(typed).validate(
                        {name: merged[name] for name in typed}, validate_role_argument_spec=True
                    )
                    out.findings += [Finding(host, role, str(m)) for m in result.error_messages]
                result = ArgumentSpecValidator(spec).validate(provided, validate_role_argument_spec=True)
                out.checked += 1
                for message in result.error_messages:
                    out.findings.append(Finding(host, role, str(message)))
    return out


def _offline_values(
    spec: Mapping[str, Any], merged: Mapping[str, Any], loader: Any, refused: list[str]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The values of SPEC's options in MERGED as the play would see them, rendered only where
    nothing runs (``_offline.py``); and (option, why) for each one left to the play."""
    from ansible.errors import AnsibleError
    from ansible.template import Templar

    offline = HostValues(merged)
    templar = Templar(loader=loader, variables=merged)
    provided: dict[str, Any] = {}
    deferred: list[tuple[str, str]] = []
    for name in spec:
        if name not in merged:
            continue
        why = offline.reason(name)
        if why is None:
            before = len(refused)
            try:
                provided[name] = templar.template(merged[name])
            except AnsibleError as exc:  # reads facts or host-side values: the play checks it
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                why = f"{NEEDS_HOST}: {one_line(first)[:160]}"
            if len(refused) > before:  # layer 2 stopped a lookup that layer 1 let through
                provided.pop(name, None)
                why = LOOKUP
        if why is not None:
            deferred.append((name, why))
    return provided, deferred


def refuse_bad_variables(check: SpecCheck, inventory: Path, *, listed: bool = False) -> None:
    """Raise naming the first finding and how many more there are; nothing has been changed yet.
    ``listed``: the front end has shown them all (else the message names the command that does)."""
    lines = check.lines()
    if not lines:
        return
    more = f"; {len(lines) - 1} more" if len(lines) > 1 else ""
    where = "" if listed else f" (`vigil inventory check -i {inventory}` lists them all)"
    raise DeployError(str(inventory), f"{lines[0]}{more}; nothing was changed{where}")
