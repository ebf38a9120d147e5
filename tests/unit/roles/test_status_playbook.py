"""playbooks/status.yml on local "hosts": what runs where, and what drifted — changing nothing.

Every path the playbook reads on a host comes from the facts file, whose own path is
`common_facts_file`; a `systemctl` first on PATH answers for the services.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.facts_helpers import RUN, entry, vd
from tests.unit.roles.playbook_runs import fake_systemctl, local_inventory, run_playbook


def deployed(root: Path) -> Path:
    """A host with node_exporter and vmalert deployed, its facts file written by the module."""
    facts = root / "var" / "deployed.json"
    facts.parent.mkdir(parents=True)
    ran = {
        "node_exporter": entry(
            root, "node_exporter", "prometheus-node-exporter", "1.5.0", service="vigil-node-exporter"
        ),
        "vmalert": entry(
            root, "vmalert", "victoria-metrics", "1.79.5", service="vigil-vmalert", install_name="vmalert"
        ),
    }
    vd.record(str(facts), ran, dict(RUN), "gpu01")
    return facts


def status(
    tmp: Path, facts: Path, states: dict[str, str] | None = None, host: str = "gpu01"
) -> tuple[Any, dict[str, Any]]:
    out = tmp / "status-out"
    out.mkdir(exist_ok=True)
    env = fake_systemctl(
        tmp / "fakebin", states or {"vigil-node-exporter": "active", "vigil-vmalert": "failed"}
    )
    run = run_playbook(
        tmp / "run",
        "status.yml",
        local_inventory({"gpu_nodes": [host]}),
        {"vigil_status_dir": str(out), "common_facts_file": str(facts)},
        env=env,
    )
    assert run.rc == 0, run.output
    assert run.stats()[host]["changed"] == 0, run.output  # read-only, every task
    doc_path = out / f"{host}.json"
    assert stat.S_IMODE(doc_path.stat().st_mode) == 0o600
    return run, json.loads(doc_path.read_text())


def snapshot(root: Path) -> dict[str, Any]:
    """Every file and link under ``root`` (bytes, modes, targets): to prove nothing was changed."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            if "status-out" in p.parts or "run" in p.parts or "fakebin" in p.parts:
                continue
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p)] = ("file", p.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                out[str(p)] = ("dir", stat.S_IMODE(st.st_mode))
    return out


def test_an_undrifted_host_reports_its_facts_services_and_no_drift(tmp_path: Path) -> None:
    facts = deployed(tmp_path)
    before = snapshot(tmp_path)
    _, doc = status(tmp_path, facts)
    assert doc["host"] == "gpu01"
    assert doc["facts"] == json.loads(facts.read_text())
    assert doc["drift"] == []
    assert doc["services"] == {"vigil-node-exporter": "active", "vigil-vmalert": "failed"}
    assert snapshot(tmp_path) == before


def test_a_changed_a_missing_and_an_added_file_and_a_moved_link_are_drift(tmp_path: Path) -> None:
    facts = deployed(tmp_path)
    binary = tmp_path / "opt/prometheus-node-exporter/1.5.0/bin/node_exporter"
    binary.write_text("tampered\n")
    unit = tmp_path / "units/vigil-vmalert.service"
    unit.unlink()
    extra_rule = tmp_path / "etc/vmalert/planted.yml"
    extra_rule.write_text("groups: []\n")
    link = tmp_path / "opt/vmalert/current"
    link.unlink()
    link.symlink_to("0.0.1")
    before = snapshot(tmp_path)
    _, doc = status(tmp_path, facts)
    assert sorted((d["component"], d["path"], d["reason"]) for d in doc["drift"]) == sorted(
        [
            ("prometheus-node-exporter", str(binary), "changed"),
            ("vmalert", str(unit), "missing"),
            ("vmalert", str(extra_rule), "added"),
            ("vmalert", str(link), "changed"),
        ]
    )
    assert snapshot(tmp_path) == before


def test_a_file_swapped_for_a_link_or_a_fifo_is_changed_and_never_read(tmp_path: Path) -> None:
    facts = deployed(tmp_path)
    conf = tmp_path / "etc/node_exporter/config.yml"
    conf.unlink()
    os.mkfifo(conf)  # reading it would hang the play
    binary = tmp_path / "opt/prometheus-node-exporter/1.5.0/bin/node_exporter"
    binary.unlink()
    binary.symlink_to("/dev/zero")
    _, doc = status(tmp_path, facts)
    assert {(d["path"], d["reason"]) for d in doc["drift"]} == {
        (str(conf), "changed"),
        (str(binary), "changed"),
    }


def test_a_host_never_deployed_has_no_facts_and_no_drift(tmp_path: Path) -> None:
    _, doc = status(tmp_path, tmp_path / "absent.json")
    assert doc == {"host": "gpu01", "facts": None, "drift": [], "services": {}}


def _hostile(root: Path) -> dict[str, Any]:
    """A well-formed facts document whose strings would run commands if anything templated them."""
    marker = root / "templated"
    payload = "{{ lookup('ansible.builtin.pipe', 'touch " + str(marker) + "') }}"
    conf = root / "etc" / "x"
    conf.mkdir(parents=True)
    (conf / "a").write_text("a\n")
    return {
        "format": 1,
        "host": payload,
        "bundle_version": 1,
        "bundle_channel": payload,
        "manifest_sha256": "",
        "run_id": "",
        "written_at": "",
        "components": {
            payload: {
                "version": payload,
                "role": "x",
                "service": "",
                "bundle_version": 1,
                "files": {str(conf / "a"): "0" * 64},
                "config_dirs": [str(conf)],
            }
        },
    }


def test_strings_in_the_facts_file_are_data_never_templates(tmp_path: Path) -> None:
    facts = tmp_path / "deployed.json"
    doc_in = _hostile(tmp_path)
    facts.write_text(json.dumps(doc_in))
    _, doc = status(tmp_path, facts)
    assert not (tmp_path / "templated").exists()
    assert doc["facts"] == doc_in
    (name,) = doc_in["components"]
    assert doc["drift"] == [{"component": name, "path": str(tmp_path / "etc/x/a"), "reason": "changed"}]


def _one_entry(**fields: Any) -> bytes:
    """A facts document of one entry: well formed but for ``fields``."""
    entry = {"version": "1", "role": "r", "service": "", "bundle_version": 1, "files": {}, **fields}
    return json.dumps({"format": 1, "bundle_version": 1, "components": {"x": entry}}).encode()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{ not json", "not JSON"),
        (b"\x00\xff garbage", "not JSON"),
        (b'"a string"', "not a JSON object"),
        (b'{"format": 2, "components": {}}', "format"),
        (_one_entry(files="/etc/passwd"), "entry 'x'"),
        (_one_entry(files={"relative/path": "0" * 64}), "not an absolute path"),
        (_one_entry(files={"/etc/../etc/passwd": "0" * 64}), "not an absolute path"),
        (_one_entry(config_dirs=["/"]), "config_dirs"),
        (_one_entry(service="--help; reboot"), "not a unit name"),
        (_one_entry(bundle_version="7"), "bundle_version"),
        (b"[" * 100000 + b"]" * 100000, "not JSON"),
    ],
    ids=[
        "broken",
        "binary",
        "string",
        "format",
        "files",
        "relative",
        "dotdot",
        "root-dir",
        "service",
        "bv",
        "deep",
    ],
)
def test_a_hostile_or_unparsable_facts_file_is_one_drift_entry_and_no_facts(
    tmp_path: Path, content: bytes, why: str
) -> None:
    facts = tmp_path / "deployed.json"
    facts.write_bytes(content)
    _, doc = status(tmp_path, facts)
    assert doc["facts"] is None and doc["services"] == {}
    (drift,) = doc["drift"]
    assert (drift["component"], drift["path"]) == ("", str(facts))
    assert drift["reason"].startswith("unreadable: ") and why in drift["reason"], drift


def test_a_facts_file_that_is_a_link_or_too_large_is_not_read(tmp_path: Path) -> None:
    target = deployed(tmp_path)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _, doc = status(tmp_path, link)
    assert doc["facts"] is None and "symbolic link" in doc["drift"][0]["reason"]
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (vd.MAX_BYTES + 1))
    _, doc = status(tmp_path, big)
    assert doc["facts"] is None and "larger than" in doc["drift"][0]["reason"]
