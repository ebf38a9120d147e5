"""The host's facts file /var/lib/vigil/deployed.json: what the roles record, how a run merges it.

The module (roles/common/library/vigil_deployed.py) is tested directly on files in a temporary
directory, and through the playbooks: the site playbook's last play (tagged `always`) and the
`_common` entry point install_wheel feeding it.
"""

from __future__ import annotations

import datetime
import json
import stat
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.facts_helpers import MODULE, RUN, entry, sha, vd
from tests.unit.roles.playbook_runs import local_inventory, run_playbook
from tests.unit.roles.rendering import contract_vars


def record(path: Path, ran: dict[str, Any], run: dict[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
    changed, doc, _warning = vd.record(str(path), ran, dict(run or RUN), "mon01")
    return changed, doc


def test_a_deploy_records_each_component_with_the_hash_of_every_file(tmp_path: Path) -> None:
    facts = tmp_path / "deployed.json"
    vm = entry(tmp_path, "victoriametrics", "victoria-metrics", "1.79.5", service="vigil-victoriametrics")
    changed, _ = record(facts, {"victoriametrics": vm})
    assert changed
    doc = json.loads(facts.read_text())
    assert {
        k: doc[k] for k in ("format", "host", "bundle_version", "bundle_channel", "manifest_sha256", "run_id")
    } == {
        "format": 1,
        "host": "mon01",
        "bundle_version": 7,
        "bundle_channel": "debian",
        "manifest_sha256": "ab" * 32,
        "run_id": "r1",
    }
    assert datetime.datetime.strptime(doc["written_at"], "%Y-%m-%dT%H:%M:%SZ")
    (name,) = doc["components"]
    assert name == "victoria-metrics"
    comp = doc["components"][name]
    assert (comp["version"], comp["role"], comp["service"], comp["bundle_version"]) == (
        "1.79.5",
        "victoriametrics",
        "vigil-victoriametrics",
        7,
    )
    binary = tmp_path / "opt/victoria-metrics/1.79.5/bin/victoriametrics"
    unit = tmp_path / "units/vigil-victoriametrics.service"
    conf = tmp_path / "etc/victoriametrics/config.yml"
    assert comp["files"] == {str(p): sha(p) for p in (binary, unit, conf)}
    # root only: it holds the sha256 of credentials files
    assert stat.S_IMODE(facts.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".deployed.")] == []


def test_a_partial_run_replaces_only_the_components_it_ran(tmp_path: Path) -> None:
    facts = tmp_path / "deployed.json"
    node = entry(
        tmp_path, "node_exporter", "prometheus-node-exporter", "1.5.0", service="vigil-node-exporter"
    )
    vmalert = entry(
        tmp_path, "vmalert", "victoria-metrics", "1.79.5", service="vigil-vmalert", install_name="vmalert"
    )
    record(facts, {"node_exporter": node, "vmalert": vmalert})
    before = json.loads(facts.read_text())["components"]
    # a later `--tags vmalert` run with the next bundle: vmalert moves, node_exporter stays as it was
    vmalert2 = entry(
        tmp_path,
        "vmalert",
        "victoria-metrics",
        "1.112.0",
        service="vigil-vmalert",
        install_name="vmalert",
        bundle_version=8,
    )
    changed, doc = record(facts, {"vmalert": vmalert2}, dict(RUN, bundle_version=8, run_id="r2"))
    assert changed
    comps = json.loads(facts.read_text())["components"]
    assert sorted(comps) == ["prometheus-node-exporter", "vmalert"]
    assert comps["prometheus-node-exporter"] == before["prometheus-node-exporter"]
    assert (comps["vmalert"]["version"], comps["vmalert"]["bundle_version"]) == ("1.112.0", 8)
    assert doc["bundle_version"] == 8 and doc["run_id"] == "r2"


def test_a_rerun_that_changes_nothing_writes_nothing(tmp_path: Path) -> None:
    facts = tmp_path / "deployed.json"
    ran = {
        "alertmanager": entry(
            tmp_path, "alertmanager", "prometheus-alertmanager", "0.25.0", service="vigil-alertmanager"
        )
    }
    assert record(facts, ran)[0]
    first = facts.read_bytes()
    changed, _ = record(facts, ran, dict(RUN, run_id="another-run"))
    assert not changed
    assert facts.read_bytes() == first  # run_id and written_at are those of the run that changed it
    # a changed configuration file is a change
    (tmp_path / "etc/alertmanager/config.yml").write_text("changed\n")
    assert record(facts, ran, dict(RUN, run_id="third"))[0]
    assert json.loads(facts.read_text())["run_id"] == "third"


def test_entries_are_named_by_component_and_a_shared_component_keeps_them_apart(tmp_path: Path) -> None:
    facts = tmp_path / "deployed.json"
    wheel = {
        "component": "vigil-exporters",
        "version": "0.1.0",
        "home": str(tmp_path / "opt/exporters"),
        "current": "0.1.0",
    }
    ran = {
        "victoriametrics": entry(
            tmp_path, "victoriametrics", "victoria-metrics", "1.79.5", service="vigil-victoriametrics"
        ),
        "vmalert": entry(
            tmp_path, "vmalert", "victoria-metrics", "1.79.5", service="vigil-vmalert", install_name="vmalert"
        ),
        "dcgm_exporter": dict(entry(tmp_path, "dcgm_exporter", "x", "1"), **wheel, service="vigil-gpusim"),
        "slurm_exporter": dict(
            entry(tmp_path, "slurm_exporter", "x", "1"), **wheel, service="vigil-slurm-exporter"
        ),
        "redfish_bmcsim": dict(
            entry(tmp_path, "redfish_exporter", "x", "1"),
            **wheel,
            service="vigil-bmcsim",
            record_as="redfish_bmcsim",
        ),
    }
    record(facts, ran)
    comps = json.loads(facts.read_text())["components"]
    named = {name: (c["role"], c["component"], c["id"]) for name, c in comps.items()}
    assert named == {
        "victoria-metrics": ("victoriametrics", "victoria-metrics", "victoriametrics"),
        "vmalert": ("vmalert", "victoria-metrics", "vmalert"),
        # two roles run the exporters wheel here: the first (by role) keeps the component's name
        "vigil-exporters": ("dcgm_exporter", "vigil-exporters", "dcgm_exporter"),
        "slurm_exporter": ("slurm_exporter", "vigil-exporters", "slurm_exporter"),
        "redfish_bmcsim": ("redfish_exporter", "vigil-exporters", "redfish_bmcsim"),
    }
    assert vd.labels(json.loads(facts.read_text())) == {
        "victoriametrics": "victoria-metrics",
        "vmalert": "vmalert",
        "dcgm_exporter": "vigil-exporters",
        "slurm_exporter": "slurm_exporter",
        "redfish_bmcsim": "redfish_bmcsim",
    }


def test_a_run_that_only_configured_a_role_keeps_its_version_and_bundle(tmp_path: Path) -> None:
    facts = tmp_path / "deployed.json"
    vm = entry(tmp_path, "victoriametrics", "victoria-metrics", "1.79.5", service="vigil-victoriametrics")
    record(facts, {"victoriametrics": vm})
    (tmp_path / "etc/victoriametrics/config.yml").write_text("reconfigured\n")
    # `--tags victoriametrics_configure` with bundle 8: the unit entry point ran, not install
    unit_only = {"role": "victoriametrics", "record_as": "", "service": vm["service"], "unit": vm["unit"]}
    record(facts, {"victoriametrics": unit_only}, dict(RUN, bundle_version=8))
    comp = json.loads(facts.read_text())["components"]["victoria-metrics"]
    assert (comp["version"], comp["bundle_version"]) == ("1.79.5", 7)
    conf = tmp_path / "etc/victoriametrics/config.yml"
    assert comp["files"][str(conf)] == sha(conf)


@pytest.mark.parametrize(
    "garbage",
    [b"not json", b"[1, 2]", b'{"format": 1, "components": {"x": {"files": "no"}}}', b"\xff\xfe"],
    ids=["text", "list", "bad-entry", "not-utf8"],
)
def test_an_unreadable_facts_file_is_replaced_by_this_runs_entries(tmp_path: Path, garbage: bytes) -> None:
    facts = tmp_path / "deployed.json"
    facts.write_bytes(garbage)
    ran = {"node_exporter": entry(tmp_path, "node_exporter", "prometheus-node-exporter", "1.5.0")}
    changed, doc, warning = vd.record(str(facts), ran, dict(RUN), "gpu01")
    assert changed and "unreadable" in warning
    assert list(json.loads(facts.read_text())["components"]) == ["prometheus-node-exporter"]


def test_a_link_at_the_facts_path_is_replaced_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    facts = tmp_path / "deployed.json"
    facts.symlink_to(victim)
    record(facts, {"node_exporter": entry(tmp_path, "node_exporter", "prometheus-node-exporter", "1.5.0")})
    assert victim.read_text() == "keep me\n"
    assert not facts.is_symlink() and json.loads(facts.read_text())["components"]


# --- through the playbooks ---------------------------------------------------------------------


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("vigil/exporters/demo.py", "VALUE = 1\n")
        zf.writestr("vigil_exporters-0.1.0.dist-info/METADATA", "Name: vigil-exporters\nVersion: 0.1.0\n")
    return path


def test_install_wheel_records_the_tree_and_the_site_plays_last_play_writes_it_under_any_tag(
    tmp_path: Path,
) -> None:
    """`_common` install_wheel remembers what it installed; site.yml's last play, tagged `always`,
    writes it even when the run's tags select nothing else (as `--tags <role>` runs do)."""
    wheel = _wheel(tmp_path / "vigil_exporters-0.1.0-py3-none-any.whl")
    home = tmp_path / "opt" / "exporters"
    conf = tmp_path / "etc" / "demo"
    conf.mkdir(parents=True)
    (conf / "targets.yml").write_text("targets: []\n")
    key = f"wheels/{wheel.name}"
    facts = tmp_path / "deployed.json"
    extra = {
        "vigil_bundle_version": 3,
        "vigil_bundle_channel": "debian",
        "vigil_bundle_manifest_sha256": "cd" * 32,
        "vigil_run_id": "run-3",
        "vigil_artifacts": {
            key: {
                "src": str(wheel),
                "component": "vigil-exporters",
                "version": "0.1.0",
                "sha256": sha(wheel),
                "mode": "0644",
            }
        },
        "common_facts_file": str(facts),
    }
    play = tmp_path / "install.yml"
    play.write_text(
        json.dumps(
            [
                {
                    "name": "Install the wheel as a role would",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Install the exporters wheel",
                            "ansible.builtin.import_role": {"name": "_common", "tasks_from": "install_wheel"},
                            "vars": {
                                "_common_role": "demo_exporter",
                                "_common_wheel": key,
                                "_common_wheel_home": str(home),
                                "_common_wheel_version": "0.1.0",
                                "_common_keep_versions": 2,
                                "_common_notify": [],
                                "_common_config_dirs": [{"path": str(conf)}],
                            },
                        },
                        {
                            "name": "Write the facts file",
                            "ansible.builtin.import_role": {"name": "common", "tasks_from": "facts"},
                        },
                    ],
                }
            ]
        )
    )
    inv = local_inventory({"nodes": ["node01"]})
    run = run_playbook(tmp_path / "a", play, inv, extra)
    assert run.rc == 0, run.output
    doc = json.loads(facts.read_text())
    comp = doc["components"]["vigil-exporters"]
    assert (comp["role"], comp["version"], comp["bundle_version"], comp["current"]) == (
        "demo_exporter",
        "0.1.0",
        3,
        "0.1.0",
    )
    files = comp["files"]
    assert files[str(home / "wheels" / wheel.name)] == sha(wheel)
    assert files[str(home / "0.1.0" / "vigil/exporters/demo.py")] == sha(
        home / "0.1.0" / "vigil/exporters/demo.py"
    )
    assert files[str(conf / "targets.yml")] == sha(conf / "targets.yml")
    assert (doc["bundle_channel"], doc["manifest_sha256"], doc["run_id"]) == ("debian", "cd" * 32, "run-3")

    # site.yml with tags that select no role: common's always-tagged preflight and the last play
    before = facts.read_bytes()
    contract = contract_vars(tmp_path / "home")
    extra_site = dict(
        extra,
        vigil_run_id="run-4",
        __common_deployed={},
        vigil_bundle_dir=contract["vigil_bundle_dir"],
        vigil_artifacts={**contract["vigil_artifacts"], **extra["vigil_artifacts"]},
    )
    run = run_playbook(tmp_path / "b", "site.yml", inv, extra_site, args=("--tags", "no_such_role"))
    assert run.rc == 0, run.output
    assert facts.read_bytes() == before  # nothing recorded in this run: nothing written
    recorded = {
        "demo": {
            "role": "demo",
            "component": "demo-component",
            "version": "2.0",
            "bundle_version": 4,
            "home": str(tmp_path / "opt/demo"),
            "current": "",
            "paths": [str(conf / "targets.yml")],
            "config_dirs": [],
            "trees": [],
        }
    }
    run = run_playbook(
        tmp_path / "c",
        "site.yml",
        inv,
        dict(extra_site, vigil_bundle_version=4, __common_deployed=recorded),
        args=("--tags", "no_such_role"),
    )
    assert run.rc == 0, run.output
    assert run.stats()["node01"]["changed"] == 1
    comps = json.loads(facts.read_text())["components"]
    assert sorted(comps) == ["demo-component", "vigil-exporters"]  # the wheel's entry is kept
    assert comps["vigil-exporters"] == doc["components"]["vigil-exporters"]
    # check mode writes nothing
    after = facts.read_bytes()
    recorded["demo"]["version"] = "3.0"
    run = run_playbook(
        tmp_path / "d",
        "site.yml",
        inv,
        dict(extra_site, vigil_bundle_version=5, __common_deployed=recorded),
        args=("--tags", "no_such_role", "--check"),
    )
    assert run.rc == 0, run.output
    assert facts.read_bytes() == after


def test_the_module_runs_on_python_3_9() -> None:
    """The hosts' python3 may be 3.9: the module parses as 3.9 code (no match, no 3.10+ syntax)."""
    import ast

    ast.parse(MODULE.read_text(), feature_version=(3, 9))
    assert sys.version_info >= (3, 9)
