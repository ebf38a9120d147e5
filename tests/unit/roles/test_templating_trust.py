"""What ansible-core renders as a template on the controller, and what it keeps as data: the ground
under the rule of docs/security.md that nothing read from a host, a service or a bundle reaches
Ansible's templating.

Each way a value can come into a play carries a `pipe` lookup that would create a marker file named
after the way; a test names the ways whose marker appears. ansible-core 2.19 (data tagging) renders
extra vars (however they are handed over, ansible-runner's included) and files loaded with
`include_vars`, and keeps as data what a lookup, a module or a file read with `slurp` returns. If an
ansible-core upgrade changes an answer here, the defences that rest on it must be looked at again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.unit.roles.playbook_runs import local_inventory, run_playbook

#: every way a value comes into the play below, as a task that uses it
PLAYBOOK = """
- name: Each way in, used in a template
  hosts: all
  gather_facts: false
  tasks:
    - name: An extra var (a JSON file, as ansible-runner hands them over)
      ansible.builtin.debug: {msg: "{{ trust_extra_var }}"}
    - name: An extra var marked !unsafe (a YAML file)
      ansible.builtin.debug: {msg: "{{ trust_extra_var_unsafe }}"}
    - name: JSON parsed from an extra var
      ansible.builtin.debug: {msg: "{{ (trust_extra_var_json | from_json).value }}"}
    - name: A file loaded with include_vars
      ansible.builtin.include_vars: {file: "{{ trust_dir }}/include_vars.json", name: trust_included}
    - name: Use it
      ansible.builtin.debug: {msg: "{{ trust_included.value }}"}
    - name: A file read with the file lookup, parsed with from_json
      ansible.builtin.debug:
        msg: "{{ (lookup('ansible.builtin.file', trust_dir ~ '/file_lookup.json') | from_json).value }}"
    - name: A file read with the file lookup, kept with set_fact
      ansible.builtin.set_fact:
        trust_kept: "{{ (lookup('ansible.builtin.file', trust_dir ~ '/set_fact.json') | from_json).value }}"
    - name: Use it
      ansible.builtin.debug: {msg: "{{ trust_kept }} {{ [trust_kept] | join(',') }}"}
    - name: A file read with slurp
      ansible.builtin.slurp: {src: "{{ trust_dir }}/slurp.json"}
      register: trust_slurped
    - name: Use it
      ansible.builtin.debug: {msg: "{{ (trust_slurped.content | b64decode | from_json).value }}"}
    - name: What a module printed
      ansible.builtin.command: {argv: [cat, "{{ trust_dir }}/module_result.json"]}
      register: trust_printed
      changed_when: false
    - name: Use it
      ansible.builtin.debug: {msg: "{{ (trust_printed.stdout | from_json).value }}"}
"""


def hostile(marker_dir: Path, way: str) -> str:
    return f"{{{{ lookup('ansible.builtin.pipe', 'touch {marker_dir / way}') }}}}"


def ran(marker_dir: Path) -> set[str]:
    return {p.name for p in marker_dir.iterdir()}


def test_extra_vars_and_included_vars_are_templates_what_a_lookup_or_module_reads_is_data(
    tmp_path: Path,
) -> None:
    markers = tmp_path / "ran"
    markers.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    for way in ("include_vars", "file_lookup", "set_fact", "slurp", "module_result"):
        (data / f"{way}.json").write_text(json.dumps({"value": hostile(markers, way)}))
    unsafe = tmp_path / "unsafe.yml"
    unsafe.write_text(f"trust_extra_var_unsafe: !unsafe {json.dumps(hostile(markers, 'extra_var_unsafe'))}\n")
    playbook = tmp_path / "trust.yml"
    playbook.write_text(PLAYBOOK)
    run = run_playbook(
        tmp_path / "run",
        playbook,
        local_inventory({"monitoring": ["mon01"]}),
        {
            "trust_dir": str(data),
            "trust_extra_var": hostile(markers, "extra_var"),
            "trust_extra_var_json": json.dumps({"value": hostile(markers, "extra_var_json")}),
        },
        args=("-e", f"@{unsafe}"),
    )
    assert run.rc == 0, run.output
    assert ran(markers) == {"extra_var", "extra_var_json", "include_vars"}


def test_ansible_runner_hands_extra_vars_over_as_templates_even_marked_unsafe(tmp_path: Path) -> None:
    """vigil's own way to start a run (deploy/runner.py): ansible-runner writes the extra vars into a
    JSON file, where Ansible's unsafe marking (`wrap_var`, which 2.19 makes a plain string) is lost."""
    from ansible.utils.unsafe_proxy import wrap_var

    from vigil.installer.deploy.runner import start_playbook

    markers = tmp_path / "ran"
    markers.mkdir()
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "roles").mkdir()
    (project / "playbooks" / "trust.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        '    - ansible.builtin.debug: {msg: "{{ trust_plain }} {{ trust_wrapped }}"}\n'
    )
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "hosts": {"mon01": {}},
                    "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                }
            }
        )
    )
    result = start_playbook(
        runs_dir=tmp_path / "runs",
        ansible_dir=project,
        inventory=inventory,
        extravars={
            "trust_plain": hostile(markers, "runner_plain"),
            "trust_wrapped": wrap_var(hostile(markers, "runner_wrapped")),
        },
        playbook="playbooks/trust.yml",
    ).wait(timeout=300)
    assert result.ok, (result.status, result.rc, [f.message for f in result.progress.failures])
    assert ran(markers) == {"runner_plain", "runner_wrapped"}
