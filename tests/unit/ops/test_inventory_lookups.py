"""Lookups in an inventory, through the real CLI: `vigil inventory check` and `vigil inventory edit`
template variables offline, and must never run what a template would run. Each form below once ran
its command on the admin host (`pipe` is a shell); each must now be deferred — evaluated at deploy
time — and named, with its marker file never created. And an inventory script, which Ansible runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli import REPO, run_vigil, vigil_env

EXAMPLE = REPO / "inventories" / "example"
VAR = "node_exporter_textfile_dir"  # a str option of a role every host gets


def forms(marker: Path) -> dict[str, str]:
    """Each way a template may run `touch MARKER-<name>`, by name."""
    cmd = f"touch {marker}-{{name}}"
    return {
        name: template.replace("CMD", cmd.format(name=name))
        for name, template in {
            "lookup": "{{ lookup('pipe', 'CMD') }}",
            "fqcn": "{{ lookup('ansible.builtin.pipe', 'CMD') }}",
            "query": "{{ query('pipe', 'CMD') | first }}",
            "q": "{{ q('pipe', 'CMD') | first }}",
            "set": "{% set x = lookup('pipe', 'CMD') %}/srv/{{ x }}",
            "wrapped": "{{ (lookup)('pipe', 'CMD') }}",
            "filter-argument": "{{ '' | default(lookup('pipe', 'CMD'), true) }}",
            "filtered": "{{ lookup('pipe', 'CMD') | upper }}",
            "in-a-constant": "{{ \"{{ lookup('pipe', 'CMD') }}\" }}",
        }.items()
    }


def yaml_str(text: str) -> str:
    return json.dumps(text)  # JSON strings are YAML strings


def inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    return inv


def ran(marker: Path) -> list[str]:
    return sorted(p.name.removeprefix(marker.name + "-") for p in marker.parent.glob(marker.name + "-*"))


def test_check_defers_every_lookup_form_and_runs_none(tmp_path: Path) -> None:
    """One form per GPU node (host_vars), and one through a variable of group_vars it refers to."""
    marker = tmp_path / "ran"
    inv = inventory(tmp_path)
    made = forms(marker)
    hosts = {}
    for i, (name, template) in enumerate(made.items(), start=1):
        host = f"gpu{i:03d}"
        (inv / "host_vars" / f"{host}.yml").write_text(f"{VAR}: {yaml_str(template)}\n")
        hosts[host] = name
    with (inv / "group_vars" / "monitoring.yml").open("a") as f:
        f.write(f"site_dir: {yaml_str(made['lookup'].replace('-lookup', '-indirect'))}\n")
        f.write(f"{VAR}: '/srv/{{{{ site_dir }}}}'\n")
    hosts["mon01"] = "indirect"
    home = tmp_path / "home"
    res = run_vigil(
        "inventory", "check", "-i", str(inv), "--ansible-dir", str(REPO), "--json", env=vigil_env(home)
    )
    assert ran(marker) == [], f"commands ran: {ran(marker)}"
    out = json.loads(res.stdout)
    assert out["findings"] == []
    deferred = {d["host"]: d["reason"] for d in out["deferred"] if d["variable"] == VAR}
    lookup = ("it runs a lookup", "via `site_dir`: it runs a lookup")
    for host, name in hosts.items():
        assert deferred.get(host) in lookup, (name, deferred)
    # in words, as an operator reads it
    text = run_vigil("inventory", "check", "-i", str(inv), "--ansible-dir", str(REPO), env=vigil_env(home))
    assert f"  role node_exporter: {VAR}: deferred: evaluated at deploy time (it runs a lookup) (hosts " in (
        text.stdout
    )
    assert "values deferred: evaluated at deploy time (nothing was run)" in text.stdout
    assert ran(marker) == []


@pytest.mark.parametrize("refused", [True, False], ids=["refused-edit", "written-edit"])
def test_edit_runs_no_lookup_whether_it_is_refused_or_written(tmp_path: Path, refused: bool) -> None:
    marker = tmp_path / "ran"
    inv = inventory(tmp_path)
    all_yml = inv / "group_vars" / "all.yml"
    original = all_yml.read_bytes()
    made = forms(marker)
    text = original.decode()
    text += "".join(f"form_{i}: {yaml_str(t)}\n" for i, t in enumerate(made.values()))
    text += f"{VAR}: {yaml_str(''.join(f'{{{{ form_{i} }}}}' for i in range(len(made))))}\n"
    if refused:
        text = text.replace("node_exporter_port: 9100", "node_exporter_port: nine")
    new = tmp_path / "new.yml"
    new.write_text(text)
    res = run_vigil(
        "inventory",
        "edit",
        "-i",
        str(inv),
        "--vars",
        str(new),
        "--ansible-dir",
        str(REPO),
        env=vigil_env(tmp_path / "home"),
        check=False,
    )
    assert ran(marker) == [], f"commands ran: {ran(marker)}"
    if refused:
        assert res.returncode == 1
        (fail,) = [ln for ln in res.stderr.splitlines() if ln.startswith("FAIL: ")]
        assert "node_exporter_port" in fail and fail.endswith("nothing was written"), fail
        assert all_yml.read_bytes() == original
    else:
        assert res.returncode == 0, res.stderr
        assert all_yml.read_text() == text
        assert f"role node_exporter: {VAR}: deferred: evaluated at deploy time (via `form_" in res.stdout
        assert "values deferred: evaluated at deploy time (nothing was run)" in res.stdout


def test_an_executable_file_in_the_inventory_is_refused_not_run(tmp_path: Path) -> None:
    """Ansible's script plugin runs an executable file of an inventory directory to get its hosts."""
    marker = tmp_path / "ran"
    inv = inventory(tmp_path)
    script = inv / "more-hosts"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n")
    script.chmod(0o755)
    res = run_vigil("inventory", "check", "-i", str(inv), env=vigil_env(tmp_path / "home"), check=False)
    assert not marker.exists()
    assert res.returncode == 1
    (fail,) = [ln for ln in res.stderr.splitlines() if ln.startswith("FAIL: ")]
    assert fail == (
        f"FAIL: {script}: is executable: Ansible would run it as an inventory script; vigil reads YAML "
        "and INI inventories (chmod a-x it)"
    )
