"""Run one of vigil's playbooks on the controller against local "hosts", for the role tests.

Each inventory host is this machine (`ansible_connection: local`); what the playbooks read and write
on a host is pointed into the test's directory by variables (`common_facts_file`, …). A failed
task's result is read from the default callback's one-line JSON, so a test asserts on the message
the task gave.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.unit.roles.rendering import BIN, REPO, ansible_env

PLAYBOOKS = REPO / "playbooks"


def local_inventory(
    groups: dict[str, list[str]], host_vars: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    children = {
        group: {"hosts": {h: dict((host_vars or {}).get(h, {})) for h in hosts}}
        for group, hosts in groups.items()
    }
    # vigil's modules start with `#!/usr/bin/python3`: Ansible runs them with ansible_python3_interpreter
    # (else /usr/bin/python3), its own with ansible_python_interpreter. Both are this python, so that
    # a run under 3.9 runs the modules on 3.9 too (tests/integration/test_host_python39.py).
    python = {"ansible_python_interpreter": sys.executable, "ansible_python3_interpreter": sys.executable}
    return {"all": {"vars": {"ansible_connection": "local", **python}, "children": children}}


_TASK = re.compile(r"^TASK \[(?P<name>.*)\] \*+$")
_FATAL = re.compile(r"^fatal: \[(?P<host>[^\]]+?)(?: -> [^\]]+)?\]: FAILED! => (?P<json>\{.*\})$")
_RECAP = re.compile(r"^(?P<host>\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


class Run:
    """The outcome of one ansible-playbook run, read from the default callback's output (results as
    one-line JSON)."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.proc = proc
        self.rc = proc.returncode

    @property
    def output(self) -> str:
        return self.proc.stdout[-8000:] + self.proc.stderr[-3000:]

    def stats(self) -> dict[str, dict[str, int]]:
        out = {}
        for line in self.proc.stdout.splitlines():
            m = _RECAP.match(line.strip())
            if m:
                ok, changed, unreachable, failed = (int(m.group(i)) for i in range(2, 6))
                out[m.group("host")] = {
                    "ok": ok,
                    "changed": changed,
                    "unreachable": unreachable,
                    "failed": failed,
                }
        return out

    def failures(self) -> list[tuple[str, str, str]]:
        """(host, task name, message) of each failed task, in order."""
        out, task = [], ""
        for line in self.proc.stdout.splitlines():
            m = _TASK.match(line.strip())
            if m:
                task = m.group("name")
                continue
            m = _FATAL.match(line.strip())
            if m:
                try:
                    msg = str(json.loads(m.group("json")).get("msg", ""))
                except json.JSONDecodeError:
                    msg = m.group("json")
                out.append((m.group("host"), task, msg))
        return out


def run_playbook(
    tmp: Path,
    playbook: str | Path,
    inventory: dict[str, Any],
    extra_vars: dict[str, Any],
    *,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: int = 300,
) -> Run:
    tmp.mkdir(parents=True, exist_ok=True)
    inv = tmp / "inventory.yml"
    inv.write_text(yaml.safe_dump(inventory, sort_keys=False))
    extra = tmp / "extra.json"
    extra.write_text(json.dumps(extra_vars))
    path = Path(playbook) if Path(playbook).is_absolute() else PLAYBOOKS / playbook
    environ = {
        **ansible_env(tmp),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_CALLBACK_RESULT_INDENTATION": "0",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    }
    environ.update(env or {})
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inv), str(path), "-e", f"@{extra}", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=str(REPO),
        timeout=timeout,
        check=False,
    )
    return Run(proc)


def fake_systemctl(directory: Path, states: dict[str, str]) -> dict[str, str]:
    """A `systemctl` first on PATH that answers `is-active NAME` from ``states`` ("inactive" else);
    returns the environment to run with."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "systemctl"
    table = json.dumps(states)
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"states = json.loads({table!r})\n"
        "if sys.argv[1:2] != ['is-active']:\n"
        "    sys.exit(2)\n"
        "state = states.get(sys.argv[-1], 'inactive')\n"
        "print(state)\n"
        "sys.exit(0 if state == 'active' else 3)\n"
    )
    script.chmod(0o755)
    return {"PATH": f"{directory}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
