"""The roles' argument specs against an inventory, offline: the repository's own roles and site
playbook, the documented example inventory, and copies of it with one mistake each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.cli import REPO
from vigil.installer.deploy import DeployError
from vigil.installer.deploy.argspec import check_argument_specs, refuse_bad_variables, site_roles

EXAMPLE = REPO / "inventories" / "example"
GPUS = [f"gpu{i:03d}" for i in range(1, 17)]


def site(tmp_path: Path, *, all_vars: str = "", gpu_vars: str = "", host_vars: str = "") -> Path:
    """The example inventory with extra lines in group_vars/all.yml, group_vars/gpu_nodes.yml and
    host_vars/gpu001.yml."""
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    base = (EXAMPLE / "group_vars" / "all.yml").read_text()
    if "node_exporter_port" in all_vars:  # one key, not a duplicate (Ansible warns, and takes the last)
        base = base.replace("node_exporter_port: 9100\n", "")
    (inv / "group_vars" / "all.yml").write_text(base + all_vars)
    if gpu_vars:
        (inv / "group_vars" / "gpu_nodes.yml").write_text(gpu_vars)
    if host_vars:
        (inv / "host_vars" / "gpu001.yml").write_text(host_vars)
    return inv


def test_the_example_inventory_passes_every_role_it_meets() -> None:
    check = check_argument_specs(REPO, EXAMPLE)
    assert check.findings == []
    # every host meets common, audit and node_exporter; the GPU nodes and the controller more
    assert check.checked >= 19 * 3 + 16 * 2
    plays = site_roles(REPO)
    assert ("all", "node_exporter") in plays and ("gpu_nodes", "dcgm_exporter") in plays


def test_a_wrong_type_is_refused_once_for_every_host_it_reaches(tmp_path: Path) -> None:
    check = check_argument_specs(REPO, site(tmp_path, all_vars="node_exporter_port: not-a-port\n"))
    assert {f.host for f in check.findings} == {"mon01", "mon02", "slurmctl01", *GPUS}
    assert {f.role for f in check.findings} == {"node_exporter"}
    assert "node_exporter_port" in check.findings[0].message
    (line,) = check.lines()  # 19 hosts, one line
    assert line.startswith("role node_exporter: argument 'node_exporter_port' is of type str")
    assert line.endswith("and 14 more)")


def test_a_value_outside_its_choices_on_one_host_names_that_host(tmp_path: Path) -> None:
    check = check_argument_specs(REPO, site(tmp_path, host_vars="dcgm_exporter_mode: emulated\n"))
    assert [(f.host, f.role) for f in check.findings] == [("gpu001", "dcgm_exporter")]
    assert "dcgm_exporter_mode" in check.findings[0].message and "emulated" in check.findings[0].message
    assert check.lines()[0].endswith("(host gpu001)")


def test_values_are_checked_as_the_play_sees_them_after_templating(tmp_path: Path) -> None:
    bad = site(tmp_path / "bad", all_vars="site_port: ninety\nnode_exporter_port: '{{ site_port }}'\n")
    assert {f.role for f in check_argument_specs(REPO, bad).findings} == {"node_exporter"}
    good = site(tmp_path / "good", all_vars="site_port: 9101\nnode_exporter_port: '{{ site_port }}'\n")
    assert check_argument_specs(REPO, good).findings == []


def test_a_value_that_reads_facts_is_left_to_the_play(tmp_path: Path) -> None:
    inv = site(tmp_path, gpu_vars="dcgm_exporter_mode: \"{{ ansible_facts['system_vendor'] }}\"\n")
    check = check_argument_specs(REPO, inv)
    assert check.findings == []
    (why,) = {d.reason for d in check.deferred if d.host == "gpu001" and d.variable == "dcgm_exporter_mode"}
    assert why.startswith("it needs values known only at deploy time: ") and "system_vendor" in why


def test_only_the_hosts_asked_for_are_checked(tmp_path: Path) -> None:
    inv = site(tmp_path, host_vars="dcgm_exporter_mode: emulated\n")
    assert check_argument_specs(REPO, inv, hosts=["gpu002", "mon01"]).findings == []
    assert len(check_argument_specs(REPO, inv, hosts=["gpu001"]).findings) == 1


def test_the_refusal_is_one_line_naming_the_first_problem_and_the_count(tmp_path: Path) -> None:
    inv = site(tmp_path, all_vars="node_exporter_port: nine\n", host_vars="dcgm_exporter_mode: emulated\n")
    check = check_argument_specs(REPO, inv)
    with pytest.raises(DeployError) as err:
        refuse_bad_variables(check, inv)
    text = str(err.value)
    assert text.startswith(f"{inv}: role ") and "; 1 more; nothing was changed" in text
    assert text.endswith(f"(`vigil inventory check -i {inv}` lists them all)")
    assert "\n" not in text
    refuse_bad_variables(check_argument_specs(REPO, EXAMPLE), EXAMPLE)  # nothing refused: no error


def test_broken_ansible_content_is_named(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "playbooks", tree / "playbooks")
    shutil.copytree(REPO / "roles", tree / "roles")
    spec = tree / "roles" / "node_exporter" / "meta" / "argument_specs.yml"
    spec.write_text("argument_specs: [not, a, mapping]\n")
    with pytest.raises(DeployError) as err:
        check_argument_specs(tree, EXAMPLE)
    assert str(err.value) == f"{spec}: has no argument_specs.main"
    spec.write_text("argument_specs: {main: {options: [x]}\n")
    with pytest.raises(DeployError) as err:
        check_argument_specs(tree, EXAMPLE)
    assert str(err.value).startswith(f"{spec}: unreadable: ")
    (tree / "playbooks" / "site.yml").write_text("hosts: all\n")
    with pytest.raises(DeployError) as err:
        check_argument_specs(tree, EXAMPLE)
    assert str(err.value) == f"{tree / 'playbooks' / 'site.yml'}: not a list of plays"


# --- templates are judged before they are rendered: nothing runs offline (docs/security.md) ---


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ lookup('pipe', 'id') }}", "it runs a lookup"),
        ("{{ lookup('ansible.builtin.pipe', 'id') }}", "it runs a lookup"),
        ("{{ query('pipe', 'id') | first }}", "it runs a lookup"),
        ("{{ q('pipe', 'id') | first }}", "it runs a lookup"),
        ("{% set x = lookup('pipe', 'id') %}{{ x }}", "it runs a lookup"),
        ("{{ (lookup)('pipe', 'id') }}", "it runs a lookup"),
        ("{{ '' | default(lookup('pipe', 'id'), true) }}", "it runs a lookup"),
        ("{{ \"{{ lookup('pipe', 'id') }}\" }}", "it runs a lookup"),
        ("{{ ['id'] | map('lookup') | first }}", "it uses the filter `map`"),
        ("#jinja2: variable_start_string: '[['\n[[ q('pipe', 'id') ]]", "it changes the template syntax"),
        ("{{ 'x' * 1000000000 }}", "it uses `*`, which the check does not evaluate"),
        ("{{ 10 ** 10 ** 10 }}", "it uses `**`, which the check does not evaluate"),
        ("{% for i in range(9) %}{{ i }}{% endfor %}", "it uses `{% for %}`"),
        ("{{ lipsum | length }}", "it uses `lipsum`, which the check does not evaluate"),
        ("{{ lipsum(9) }}", "it uses a call, which the check does not evaluate"),
        ("{{ 'id' | to_json }}", "it uses the filter `to_json`"),
        ("{{ ''.__class__ }}", "it reads the attribute `__class__`"),
        ("{{ unclosed", "not a template the check can read"),
    ],
)
def test_a_template_the_check_cannot_evaluate_safely_is_deferred_unrendered(
    tmp_path: Path, template: str, why: str
) -> None:
    import json

    check = check_argument_specs(
        REPO, site(tmp_path, host_vars=f"node_exporter_textfile_dir: {json.dumps(template)}\n")
    )
    assert check.findings == []
    (found,) = [d for d in check.deferred if d.host == "gpu001"]
    assert (found.role, found.variable) == ("node_exporter", "node_exporter_textfile_dir")
    assert found.reason.startswith(why), found.reason
    (line,) = check.deferred_lines()
    assert line.startswith(
        "role node_exporter: node_exporter_textfile_dir: deferred: evaluated at deploy time ("
    )


def test_a_value_is_deferred_through_the_variables_it_uses(tmp_path: Path) -> None:
    inv = site(
        tmp_path,
        all_vars="inner: \"{{ lookup('pipe', 'id') }}\"\nmiddle: '{{ inner }}'\n"
        "node_exporter_textfile_dir: '/srv/{{ middle }}'\nloop_a: '{{ loop_b }}'\nloop_b: '{{ loop_a }}'\n"
        "node_exporter_config_dir: '{{ loop_a }}'\n",
    )
    check = check_argument_specs(REPO, inv, hosts=["gpu001"])
    reasons = {d.variable: d.reason for d in check.deferred}
    assert reasons["node_exporter_textfile_dir"] == "via `inner`: it runs a lookup"
    assert reasons.get("node_exporter_config_dir", "").endswith("it refers to itself"), reasons


def test_references_that_would_expand_past_the_limit_are_deferred_quickly(tmp_path: Path) -> None:
    """Forty variables, each twice the one before: 2**40 copies if rendered."""
    import time

    chain = "v0: 'lol'\n" + "".join(f"v{i}: '{{{{ v{i - 1} }}}}{{{{ v{i - 1} }}}}'\n" for i in range(1, 41))
    inv = site(tmp_path, all_vars=chain + "node_exporter_textfile_dir: '{{ v40 }}'\n")
    start = time.monotonic()
    check = check_argument_specs(REPO, inv, hosts=["gpu001"])
    assert time.monotonic() - start < 10
    (found,) = [d for d in check.deferred if d.variable == "node_exporter_textfile_dir"]
    assert "expand past 1048576 characters" in found.reason


def test_a_deferred_list_is_still_checked_for_its_type(tmp_path: Path) -> None:
    inv = site(tmp_path, host_vars="node_exporter_port: [\"{{ lookup('pipe', 'id') }}\"]\n")
    check = check_argument_specs(REPO, inv)
    assert [(d.host, d.variable) for d in check.deferred] == [("gpu001", "node_exporter_port")]
    (line,) = check.lines()
    assert "node_exporter_port" in line and "list" in line and line.endswith("(host gpu001)")


def test_a_lookup_the_first_layer_let_through_is_refused_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Layer 2 alone: with the judging of templates switched off, Ansible's lookup loader refuses."""
    from vigil.installer.deploy import _offline

    marker = tmp_path / "ran"
    monkeypatch.setattr(_offline.HostValues, "reason", lambda self, name: None)
    inv = site(
        tmp_path, host_vars=f"node_exporter_textfile_dir: \"{{{{ lookup('pipe', 'touch {marker}') }}}}\"\n"
    )
    check = check_argument_specs(REPO, inv, hosts=["gpu001"])
    assert not marker.exists()
    assert [(d.variable, d.reason) for d in check.deferred] == [
        ("node_exporter_textfile_dir", "it runs a lookup")
    ]
    from ansible.plugins.loader import lookup_loader

    assert "get" not in vars(lookup_loader) and lookup_loader.get("pipe") is not None  # restored after


def test_two_monitoring_hosts_pass_as_the_pair(tmp_path: Path) -> None:
    """`vigil inventory check` reads an inventory as this does: a second monitoring host is the
    monitoring pair (docs/ha.md), its roles' specs (vmagent's among them) met."""
    from vigil.installer.deploy.inventory import load_inventory

    inv = site(tmp_path, all_vars="vmagent_enabled: auto\nvmagent_queue_hours: 48\n")
    loaded = load_inventory(inv)  # the example is the pair
    assert loaded.groups["monitoring"] == ["mon01", "mon02"]
    check = check_argument_specs(REPO, inv)
    assert check.findings == []
    assert ("monitoring", "vmagent") in site_roles(REPO)
    bad = site(tmp_path / "bad", all_vars="vmagent_queue_hours: a day\n")
    assert {f.role for f in check_argument_specs(REPO, bad).findings} == {"vmagent"}
