"""Each role's public variables: defaults/main.yml and meta/argument_specs.yml agree both ways.

Plus the house-style structure every role keeps: phases wired by tasks/main.yml with their tags,
prefixed names, "Restart <service>" handlers that reload systemd, templates that say they are managed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"
PUBLIC = [
    "common",
    "node_exporter",
    "victoriametrics",
    "vmagent",
    "vmalert",
    "alertmanager",
    "grafana",
    "dcgm_exporter",
    "slurm_exporter",
    "firewall",
]
SERVICES = [
    "node_exporter",
    "victoriametrics",
    "vmagent",
    "vmalert",
    "alertmanager",
    "grafana",
    "dcgm_exporter",
    "slurm_exporter",
    "firewall",
]
TYPES = {bool: "bool", int: "int", str: "str", list: "list", dict: "dict"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def spec_options(role: str, entry: str = "main") -> dict[str, dict[str, Any]]:
    return load(ROLES / role / "meta" / "argument_specs.yml")["argument_specs"][entry]["options"]


@pytest.mark.parametrize("role", PUBLIC)
def test_defaults_and_argument_specs_name_the_same_variables(role: str) -> None:
    defaults = load(ROLES / role / "defaults" / "main.yml")
    options = spec_options(role)
    assert sorted(set(defaults) - set(options)) == [], f"{role}: in defaults/main.yml, not in argument_specs"
    assert sorted(set(options) - set(defaults)) == [], f"{role}: in argument_specs, not in defaults/main.yml"


@pytest.mark.parametrize("role", PUBLIC)
def test_argument_specs_document_type_default_and_meaning(role: str) -> None:
    defaults = load(ROLES / role / "defaults" / "main.yml")
    for name, opt in spec_options(role).items():
        assert name.startswith(f"{role}_"), f"{role}: {name} lacks the role prefix"
        assert opt.get("description"), f"{role}: {name} has no description"
        assert "TODO" not in str(opt["description"])
        assert opt.get("type") == TYPES[type(defaults[name])], f"{role}: {name} type {opt.get('type')}"
        assert opt.get("default") == defaults[name], f"{role}: {name} default differs from defaults/main.yml"
        if opt["type"] == "list":
            assert opt.get("elements") in {"str", "dict", "int"}, f"{role}: {name} has no elements type"
        if "choices" in opt and opt["type"] == "list":
            assert set(defaults[name]) <= set(opt["choices"]), f"{role}: {name} default outside its choices"


def common_entry_points() -> dict[str, Any]:
    """_common's entry points and their options (meta/entry_points.yml, in argument spec form)."""
    return dict(load(ROLES / "_common" / "meta" / "entry_points.yml")["entry_points"])


def test_common_internal_role_documents_every_parameter_in_an_entry_point() -> None:
    defaults = load(ROLES / "_common" / "defaults" / "main.yml")
    specs = common_entry_points()
    assert not (ROLES / "_common" / "meta" / "argument_specs.yml").exists()  # see entry_points.yml
    entries = {"main", "preflight", "user", "install", "install_wheel", "unit", "health", "web", "files"}
    entries |= {"debs", "fingerprint", "fingerprint_done"}
    assert set(specs) == entries
    documented = {name for entry in specs.values() for name in entry.get("options", {})}
    assert sorted(set(defaults) - documented) == []
    assert sorted(documented - set(defaults)) == []
    for entry in specs:
        if entry != "main":
            assert (ROLES / "_common" / "tasks" / f"{entry}.yml").is_file(), entry


def _walk(tasks: Any) -> Any:
    for task in tasks or []:
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key))
        yield task


def _common_calls() -> list[tuple[str, str, dict[str, Any]]]:
    """Every import_role/include_role of _common in the roles' tasks and handlers: (where, entry
    point, the vars it passes)."""
    calls = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")) + sorted(ROLES.glob("*/handlers/*.yml")):
        for task in _walk(load(path)):
            for module in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if module in task and task[module]["name"] == "_common":
                    where = f"{path.relative_to(ROLES)}: {task.get('name')}"
                    calls.append((where, task[module].get("tasks_from", "main"), task.get("vars") or {}))
    return calls


PY_TYPES = {"str": str, "int": int, "bool": bool, "list": list, "dict": dict, "path": str, "raw": object}


def _spec_refusals(value: Any, opt: dict[str, Any]) -> list[str]:
    """What Ansible's argument spec check would refuse in VALUE, where it is not a template."""
    if isinstance(value, str) and "{{" in value:
        return []  # known at run time only
    kind = PY_TYPES[opt.get("type", "str")]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return [f"{value!r} is not {opt.get('type', 'str')}"]
    if "choices" in opt and value not in opt["choices"]:
        return [f"{value!r} is not one of {opt['choices']}"]
    if kind is list and "elements" in opt:
        return [r for v in value for r in _spec_refusals(v, {"type": opt["elements"]})]
    return []


def _call_refusals(specs: dict[str, Any], where: str, entry: str, given: dict[str, Any]) -> list[str]:
    if entry not in specs or entry == "main":
        return [f"{where}: no entry point {entry!r}"]
    options = specs[entry]["options"]
    refused = [
        f"{where}: {entry} does not take {n}" for n in given if n not in options and not n.startswith("__")
    ]
    refused += [
        f"{where}: {entry} needs {n}" for n, o in options.items() if o.get("required") and n not in given
    ]
    for name, value in given.items():
        if name in options:
            refused += [f"{where}: {name}: {r}" for r in _spec_refusals(value, options[name])]
    return refused


def test_every_call_of_common_passes_what_its_entry_point_takes() -> None:
    """In place of Ansible's per-host check of _common's argument specs (see meta/entry_points.yml):
    each call names an entry point, passes each required value, no name the entry point does not
    take (a `__` name is the call's own helper), and values of the documented type."""
    specs = common_entry_points()
    calls = _common_calls()
    assert len(calls) >= 50
    assert [r for call in calls for r in _call_refusals(specs, *call)] == []


def test_the_call_check_refuses_a_wrong_name_a_missing_value_and_a_wrong_type() -> None:
    specs = common_entry_points()
    good = {"_common_role": "r", "_common_system_user": "u", "_common_system_group": "g"}
    assert _call_refusals(specs, "t", "user", good) == []
    assert _call_refusals(specs, "t", "users", good) == ["t: no entry point 'users'"]
    assert _call_refusals(specs, "t", "user", {**good, "_common_sytem_user": "u"}) == [
        "t: user does not take _common_sytem_user"
    ]
    assert _call_refusals(specs, "t", "user", {**good, "__t_helper": 1}) == []
    del good["_common_system_group"]
    assert _call_refusals(specs, "t", "user", good) == ["t: user needs _common_system_group"]
    assert _call_refusals(
        specs, "t", "user", {**good, "_common_system_group": "g", "_common_data_dirs": "x"}
    ) == ["t: _common_data_dirs: 'x' is not list"]
    assert _spec_refusals(True, {"type": "int"}) == ["True is not int"]
    assert _spec_refusals([1, "a"], {"type": "list", "elements": "int"}) == ["'a' is not int"]
    assert _spec_refusals("c", {"type": "str", "choices": ["a", "b"]}) == ["'c' is not one of ['a', 'b']"]
    assert _spec_refusals("{{ x }}", {"type": "int"}) == []
    assert _spec_refusals(9100, {"type": "int"}) == []


def test_common_internal_role_refuses_to_run_on_its_own() -> None:
    (task,) = load(ROLES / "_common" / "tasks" / "main.yml")
    assert task["ansible.builtin.fail"]["msg"].startswith("_common is an internal role")


@pytest.mark.parametrize("role", PUBLIC + ["_common"])
def test_internal_variables_carry_the_underscore_prefix(role: str) -> None:
    path = ROLES / role / "vars" / "main.yml"
    names = list(load(path) or {}) if path.is_file() else []
    bare = role.lstrip("_")
    assert all(n.startswith(f"_{bare}_") for n in names), names


FINGERPRINT_MATCH = "not (__common_fingerprint.match | default(false))"


def _step(task: dict[str, Any]) -> str:
    for key in ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks"):
        if key in task:
            value = task[key]
            return str(value["file"] if isinstance(value, dict) else value)
    return str(task.get("ansible.builtin.import_role", {}).get("tasks_from"))


def check_main_wiring(role: str, phases: list[str]) -> None:
    """The phases in order, each with its tags; the fingerprint compared before the first phase that
    changes anything (common's preflight gathers the facts the others read, so it runs first) and
    stored after the last. Each phase after the comparison is one include that is skipped when the
    host matched (its tasks are then never loaded) and hands its tags to what it includes; the
    fingerprint's two steps carry the role's tag alone, so that a run of one phase
    (`--tags <role>_<phase>`) stores no fingerprint."""
    tasks = load(ROLES / role / "tasks" / "main.yml")
    steps = [f"{p}.yml" for p in phases]
    at = 1 if role == "common" else 0
    assert [_step(t) for t in tasks] == [*steps[:at], "fingerprint", *steps[at:], "fingerprint_done"]
    for t in tasks:
        if "ansible.builtin.import_role" in t:
            assert t["tags"] == [role], t["name"]
            assert t["vars"]["_common_role"] == role
    body = [t for t in tasks if "ansible.builtin.import_role" not in t]
    for i, (t, phase) in enumerate(zip(body, phases, strict=True)):
        assert t["tags"] == [role, f"{role}_{phase}"]
        if i < at:
            assert "ansible.builtin.import_tasks" in t
            continue
        include = t["ansible.builtin.include_tasks"]
        assert include["apply"] == {"tags": t["tags"]}
        when = t["when"] if isinstance(t["when"], list) else [t["when"]]
        assert when[-1] == FINGERPRINT_MATCH, t["name"]


@pytest.mark.parametrize("role", PUBLIC)
def test_main_wires_the_phases_with_their_tags(role: str) -> None:
    check_main_wiring(
        role, ["preflight", "install", "configure", "run"] if role in SERVICES else ["preflight", "install"]
    )


def _includes(path: Path) -> list[tuple[str, Any]]:
    """Every include_tasks reached from PATH through static imports."""
    found = []
    for task in load(path) or []:
        if "ansible.builtin.import_tasks" in task:
            found += _includes(path.parent / task["ansible.builtin.import_tasks"])
        elif "ansible.builtin.include_tasks" in task:
            found.append((f"{path.name}: {task['name']}", task))
    return found


def test_every_include_hands_its_own_tags_to_the_tasks_it_includes() -> None:
    """The included tasks inherit the tags of the blocks and imports around the include, but not the
    include's own: without `apply`, `--tags <role>_<phase>` would select such an include and then
    none of what it includes."""
    seen = 0
    for main in sorted(ROLES.glob("*/tasks/main.yml")):
        for where, task in _includes(main):
            seen += 1
            own = task.get("tags", [])
            args = task["ansible.builtin.include_tasks"]
            applied = args.get("apply", {}).get("tags", []) if isinstance(args, dict) else []
            assert set(own) <= set(applied), f"{main.parent.parent.name}: {where}: apply.tags must hold {own}"
    assert seen >= 6  # redfish_exporter's five parts, dcgm_exporter's packages


@pytest.mark.parametrize("role", SERVICES)
def test_restart_handler_reloads_systemd_and_skips_check_mode(role: str) -> None:
    handlers = {h["name"]: h for h in load(ROLES / role / "handlers" / "main.yml")}
    restart = handlers[f"Restart {role}"]
    mod = restart["ansible.builtin.systemd_service"]
    assert mod["state"] == "restarted" and mod["daemon_reload"] is True
    when = restart["when"] if isinstance(restart["when"], list) else [restart["when"]]
    assert "not ansible_check_mode" in when


def test_every_template_says_it_is_managed() -> None:
    templates = sorted(t for role in PUBLIC + ["_common"] for t in (ROLES / role).glob("templates/*.j2"))
    assert len(templates) >= 6
    for t in templates:
        assert t.read_text().startswith("{{ ansible_managed | comment"), t


def test_every_config_template_task_is_validated_by_a_checker() -> None:
    """Each template, rule file and dashboard a component reads is checked (`validate`) before it lands,
    whether by its own task or as an entry handed to the `_common` entry point `files`."""
    found = 0
    for role in SERVICES:
        path = ROLES / role / "tasks" / "configure.yml"
        variables = load(path.parents[1] / "vars" / "main.yml")
        checks: list[tuple[str, str]] = []
        for task in load(path):
            args = task.get("ansible.builtin.template") or task.get("ansible.builtin.copy")
            imported = task.get("ansible.builtin.import_role") or {}
            if isinstance(args, dict) and "content" not in args:
                checks.append((task["name"], str(args.get("validate", ""))))
            elif imported.get("tasks_from") == "files":
                files = task["vars"]["_common_files"]
                if isinstance(files, str):  # built in Jinja: each entry read from the file or a template
                    entries = re.findall(r"\{\s*'path'.*?\}\]", files, flags=re.S)
                    for entry in [e for e in entries if "'src'" in e or "'template'" in e or "lookup(" in e]:
                        ref = re.search(r"'validate': (_\w+)", entry)
                        checks.append((task["name"], "{{ " + ref.group(1) + " }}" if ref else ""))
                else:
                    for f in files:
                        if "src" in f or "template" in f:
                            checks.append((f"{task['name']}: {f['path']}", str(f.get("validate", ""))))
        for name, check in checks:
            assert check, f"{path}: {name}: no checker"
            ref = re.fullmatch(r"\{\{ (_\w+) \}\}", check)
            if ref:  # a checker kept in the role's vars
                check = str(variables[ref.group(1)])
            assert "%s" in check, f"{path}: {name}: {check}"
            found += 1
    # ten, the dcgm_exporter collectors CSV, the certificate scan's script and units, the firewall's
    # ruleset and unit, with vmalert's three kinds of rule file and Grafana's three configuration
    # files and two kinds of dashboard each counted once; VictoriaMetrics' backup script and units
    assert found == 20


def test_no_task_runs_a_command_without_saying_whether_it_changed_anything() -> None:
    for path in [p for role in PUBLIC + ["_common"] for p in (ROLES / role / "tasks").glob("*.yml")]:
        for task in load(path) or []:
            for sub in [task, *task.get("block", []), *task.get("rescue", [])]:
                if any(
                    k in sub
                    for k in ("ansible.builtin.command", "ansible.builtin.shell", "ansible.builtin.raw")
                ):
                    assert "changed_when" in sub or "creates" in str(sub), f"{path}: {sub['name']}"
