"""The redfish_exporter role, as far as it can be checked without a BMC or a lab host.

- its public variables, phases, handlers and templates keep the house rules the other roles keep;
- preflight refuses targets the exporter would refuse, naming the variable and the field, and never
  prints a password;
- the targets file the role renders passes the exporter's own `--check-config` with the credentials
  files the role writes (0600), and the role's validate command is the one the docs name;
- the units: command lines and hardening, the wheel's sha256 in the environment;
- the scrape job `redfish_exporter`: a scrape timeout above the largest target timeout;
- the lab: its BMC CA, certificates and accounts, and the inventory variables that switch it all on.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.roles import test_roles_specs as specs
from tests.unit.roles.rendering import (
    BIN,
    ROLES,
    SAMPLE_INVENTORY,
    ansible_env,
    contract_vars,
    render,
    run_tasks,
)
from tests.unit.roles.test_exporter_roles import HARDENING, WITH_WHEEL, render_unit, verify
from vigil.installer.lab import LabPaths
from vigil.installer.lab import bmc as lab_bmc
from vigil.installer.lab.inventory import inventory_data, write_inventory

ROLE = "redfish_exporter"
SECRET = "s3cr:et#pw"  # a password with the characters the credentials format allows
TARGETS = [
    {"name": "gpu01", "url": "https://198.18.0.21:8443", "username": "admin", "password": SECRET},
    {
        "name": "pdu01",
        "url": "https://198.18.0.11:8443/",
        "username": "admin",
        "password": SECRET,
        "auth": "basic",
        "timeout": 20,
    },
]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


# --- house rules ---------------------------------------------------------------------------------


def test_defaults_and_argument_specs_agree() -> None:
    specs.test_defaults_and_argument_specs_name_the_same_variables(ROLE)
    specs.test_argument_specs_document_type_default_and_meaning(ROLE)
    specs.test_internal_variables_carry_the_underscore_prefix(ROLE)


def test_main_wires_the_lab_simulator_then_the_phases_with_their_tags() -> None:
    # included, so that a host the part is not for skips one task per phase; `apply` hands the
    # phase's tags to the included tasks (an include keeps its own tags to itself); the fingerprint
    # compared first and stored last (test_roles_specs.py says how)
    specs.check_main_wiring(ROLE, ["bmcsim", "preflight", "install", "configure", "run"])
    tasks = [t for t in load(ROLES / ROLE / "tasks" / "main.yml") if "ansible.builtin.include_tasks" in t]
    for t in tasks:
        assert t["when"][0] == (
            "redfish_exporter_bmcsim_enabled | bool"
            if t["name"].startswith("BMC")
            else "redfish_exporter_enabled | bool"
        )


def test_restart_handlers_reload_systemd_and_skip_check_mode() -> None:
    specs.test_restart_handler_reloads_systemd_and_skips_check_mode(ROLE)
    handlers = {h["name"]: h for h in load(ROLES / ROLE / "handlers" / "main.yml")}
    assert handlers["Restart redfish_bmcsim"]["ansible.builtin.systemd_service"]["daemon_reload"] is True


def test_templates_say_they_are_managed_and_the_config_is_validated_by_the_exporter() -> None:
    for t in (ROLES / ROLE / "templates").glob("*.j2"):
        assert t.read_text().startswith("{{ ansible_managed | comment"), t
    (task,) = [t for t in load(ROLES / ROLE / "tasks" / "configure.yml") if "ansible.builtin.template" in t]
    args = task["ansible.builtin.template"]
    assert (args["mode"], args["owner"], args["validate"]) == (
        "0600",
        "{{ redfish_exporter_system_user }}",
        "{{ _redfish_exporter_check }}",
    )
    check = load(ROLES / ROLE / "vars" / "main.yml")["_redfish_exporter_check"]
    assert "-m vigil.exporters.redfish --check-config --config" in check and "%s" in check
    assert "setpriv --reuid=" in check  # as the exporter's user, who must be able to read the files


def test_every_task_that_handles_a_password_does_not_log() -> None:
    for name in ("configure.yml", "bmcsim.yml", "preflight.yml", "run.yml"):
        for task in load(ROLES / ROLE / "tasks" / name):
            text = json.dumps(task)
            if "password" in text and ("ansible.builtin.copy" in task or "loop" in task):
                assert task.get("no_log") is True, f"{name}: {task['name']}"
            # the raw list holds the passwords; `_redfish_exporter_targets` (vars/main.yml) does not
            if "loop" in task and re.search(r"(?<!_)redfish_exporter_targets", str(task["loop"])):
                assert task.get("no_log") is True, f"{name}: {task['name']} loops over the raw targets"


def test_no_command_task_leaves_changed_unsaid() -> None:
    for path in (ROLES / ROLE / "tasks").glob("*.yml"):
        for task in load(path) or []:
            for sub in [task, *task.get("block", []), *task.get("rescue", [])]:
                if "ansible.builtin.command" in sub or "ansible.builtin.shell" in sub:
                    assert "changed_when" in sub, f"{path}: {sub['name']}"


# --- preflight -----------------------------------------------------------------------------------


def preflight(tmp: Path, **extra: Any) -> tuple[int, str]:
    tasks = [{"name": ROLE, "ansible.builtin.import_role": {"name": ROLE, "tasks_from": "preflight"}}]
    res = run_tasks(tmp, tasks, extra_vars={"vigil_artifacts": WITH_WHEEL, **extra}, host="mon01")
    return res.returncode, " ".join((res.stdout + res.stderr).split())


def test_preflight_refuses_no_targets(tmp_path: Path) -> None:
    rc, out = preflight(tmp_path, redfish_exporter_port=1)
    assert (
        rc != 0
        and "`redfish_exporter_enabled` is true on mon01 but `redfish_exporter_targets` lists no BMC" in out
    )


def test_preflight_names_each_bad_target_and_field_and_never_the_password(tmp_path: Path) -> None:
    bad = [
        {
            "name": "gpu01",
            "url": "https://198.18.0.21:8443/redfish/v1",
            "username": "admin",
            "password": SECRET,
        },
        {
            "name": "gpu01",
            "url": "http://198.18.0.22",
            "username": "a:b",
            "password": SECRET,
            "colour": "red",
        },
        {
            "name": "bad name",
            "url": "https://x",
            "username": "u",
            "password": "",
            "auth": "digest",
            "timeout": 0,
        },
        {"name": "n", "url": "https://x", "username": "u", "password": SECRET, "ca_file": "ca.pem"},
        {"name": "m", "url": "https://x", "username": "u", "password": "one\ntwo"},
        {"name": "r", "url": "https://x", "username": "u", "password": "one\rtwo"},
    ]
    rc, out = preflight(tmp_path, redfish_exporter_port=1, redfish_exporter_targets=bad)
    assert rc != 0
    for says in (
        "redfish_exporter_targets[0] (gpu01): `url` must be http(s)://host[:port] (no path, query or user)",
        "redfish_exporter_targets[1] (gpu01): unknown keys colour",
        "redfish_exporter_targets[1] (gpu01): `name` used twice",
        "redfish_exporter_targets[1] (gpu01): plain http needs `insecure: true` (lab only)",
        "redfish_exporter_targets[1] (gpu01): `username` must be set, without `:` or blanks",
        "redfish_exporter_targets[2] (bad name): `name` must be 1-64 letters, digits, _ . : -",
        "redfish_exporter_targets[2] (bad name): `password` must be set, on one line",
        "redfish_exporter_targets[2] (bad name): `auth` must be session or basic",
        "redfish_exporter_targets[2] (bad name): `timeout` must be in (0, 300] seconds",
        "redfish_exporter_targets[3] (n): `ca_file` must be an absolute path on the controller",
        "redfish_exporter_targets[4] (m): `password` must be set, on one line",
        "redfish_exporter_targets[5] (r): `password` must be set, on one line",
    ):
        assert says in out, says
    assert SECRET not in out


def test_preflight_passes_good_targets_and_refuses_a_missing_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    good = [dict(TARGETS[0], ca_file=str(ca)), TARGETS[1]]
    rc, out = preflight(tmp_path, redfish_exporter_port=1, redfish_exporter_targets=good)
    assert rc == 0, out[-3000:]
    assert SECRET not in out
    ca.unlink()
    rc, out = preflight(tmp_path, redfish_exporter_port=1, redfish_exporter_targets=good)
    assert rc != 0 and f"no such CA file on the controller: {ca}" in out


# --- the targets file, checked by the exporter itself ---------------------------------------------


def render_targets(tmp: Path, targets: list[dict[str, Any]], **extra: Any) -> str:
    files = [str(ROLES / ROLE / kind / "main.yml") for kind in ("defaults", "vars")]
    task = {
        "name": "Render",
        "ansible.builtin.template": {
            "src": str(ROLES / ROLE / "templates" / "targets.yml.j2"),
            "dest": str(tmp / "targets.yml"),
            "mode": "0600",
        },
    }
    play = [{"name": "r", "hosts": "mon01", "gather_facts": False, "vars_files": files, "tasks": [task]}]
    (tmp / "p.yml").write_text(yaml.safe_dump(play))
    inv = {
        "all": {
            "hosts": {"mon01": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
        }
    }
    (tmp / "i.yml").write_text(yaml.safe_dump(inv))
    ev = {
        **contract_vars(Path("/x")),
        "vigil_artifacts": WITH_WHEEL,
        "redfish_exporter_targets": targets,
        **extra,
    }
    (tmp / "e.yml").write_text(yaml.safe_dump(ev))
    res = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(tmp / "i.yml"),
            str(tmp / "p.yml"),
            "-e",
            f"@{tmp / 'e.yml'}",
        ],
        capture_output=True,
        text=True,
        env=ansible_env(tmp),
        cwd=str(tmp),
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    return (tmp / "targets.yml").read_text()


def check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vigil.exporters.redfish", "--check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_rendered_targets_pass_the_exporters_check_config(tmp_path: Path) -> None:
    conf = tmp_path / "etc"
    (conf / "ca").mkdir(parents=True)
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    targets = [dict(TARGETS[0], ca_file=str(ca)), TARGETS[1]]
    text = render_targets(tmp_path, targets, redfish_exporter_config_dir=str(conf))
    assert SECRET not in text
    doc = yaml.safe_load(text)
    assert doc["targets"] == [
        {
            "name": "gpu01",
            "url": "https://198.18.0.21:8443",
            "credentials_file": f"{conf}/gpu01.cred",
            "ca_file": f"{conf}/ca/gpu01.pem",
            "insecure": False,
            "auth": "session",
            "timeout": 10,
        },
        {
            "name": "pdu01",
            "url": "https://198.18.0.11:8443",
            "credentials_file": f"{conf}/pdu01.cred",
            "insecure": False,
            "auth": "basic",
            "timeout": 20,
        },
    ]
    # what configure.yml writes: one line user:password per target, 0600; the CA copied
    for t in targets:
        cred = conf / f"{t['name']}.cred"
        cred.write_text(f"{t['username']}:{t['password']}\n")
        cred.chmod(0o600)
    (conf / "ca" / "gpu01.pem").write_text(ca.read_text())
    (tmp_path / "targets.yml").chmod(0o600)
    res = check_config(tmp_path / "targets.yml")
    assert (res.returncode, res.stdout.strip()) == (0, f"OK: {tmp_path / 'targets.yml'}: 2 targets"), (
        res.stderr
    )
    # the exporter refuses what the role must never write: a credentials file others can read
    (conf / "gpu01.cred").chmod(0o644)
    res = check_config(tmp_path / "targets.yml")
    assert res.returncode == 2 and "mode 0644, must be 0600 or 0400" in res.stderr
    assert SECRET not in res.stderr + res.stdout


# --- units ---------------------------------------------------------------------------------------


def unit_vars(file: str) -> dict[str, Any]:
    tasks = load(ROLES / ROLE / "tasks" / file)
    (task,) = [t for t in tasks if t.get("ansible.builtin.import_role", {}).get("tasks_from") == "unit"]
    return dict(task["vars"])


def test_exporter_unit(tmp_path: Path) -> None:
    unit = render_unit(tmp_path, ROLE, {}, unit_vars("configure.yml"))
    lines = unit.splitlines()
    assert "User=vigil-redfish-exporter" in lines and "SyslogIdentifier=vigil-redfish-exporter" in lines
    assert "ExecStart=/usr/bin/python3 \\" in lines and "    vigil.exporters.redfish \\" in lines
    assert "    --config=/etc/vigil/redfish/targets.yml \\" in lines
    assert "    --listen-address=gpu01:9610 \\" in lines
    assert "Environment=PYTHONPATH=/opt/vigil/exporters/current" in lines
    assert f"Environment=VIGIL_EXPORTERS_WHEEL_SHA256={'0' * 64}" in lines  # restarts on a new wheel
    assert "ReadWritePaths=" in lines
    for line in HARDENING:
        assert line in lines, line
    out = verify(tmp_path, unit, "vigil-redfish-exporter")
    assert "vigil-redfish-exporter.service" not in out, out


def test_bmc_simulator_unit(tmp_path: Path) -> None:
    urls = ["http://198.18.0.21:9400/metrics", "http://198.18.0.22:9400/metrics"]
    unit_vars_pdu = {
        **unit_vars("bmcsim.yml"),
        "redfish_exporter_bmcsim_mockup": "pdu",
        "redfish_exporter_bmcsim_gpu_metrics_urls": urls,
    }
    unit = render_unit(tmp_path, ROLE, {}, unit_vars_pdu)
    lines = unit.splitlines()
    assert (
        "User=vigil-bmcsim" in lines
        and "Description=vigil lab BMC simulator (rack PDU over Redfish)" in lines
    )
    assert "    vigil.exporters.redfish.bmcsim \\" in lines and "    --mockup=pdu \\" in lines
    assert "    --credentials-file=/etc/vigil/bmcsim/bmc.cred \\" in lines
    assert (
        "    --tls-cert=/etc/vigil/bmcsim/tls.crt \\" in lines
        and "    --tls-key=/etc/vigil/bmcsim/tls.key \\" in lines
    )
    assert [x.strip(" \\") for x in lines if "--gpu-metrics-url" in x] == [
        f"--gpu-metrics-url={u}" for u in urls
    ]
    assert "    --faults-file=/var/lib/vigil/bmcsim/faults.json \\" in lines
    for line in HARDENING:
        assert line in lines, line


# --- the scrape job ------------------------------------------------------------------------------


def scrape_jobs(tmp: Path, mon_vars: dict[str, Any], **extra: Any) -> dict[str, dict[str, Any]]:
    inv = json.loads(json.dumps(SAMPLE_INVENTORY))
    inv["all"]["children"]["monitoring"]["hosts"]["mon01"].update(mon_vars)
    out = render(tmp, inventory=inv, only=("scrape.yml",), extra_vars=extra)
    return {j["job_name"]: j for j in yaml.safe_load(out["scrape.yml"])["scrape_configs"]}


def test_scrape_job_waits_longer_than_the_slowest_target(tmp_path: Path) -> None:
    jobs = scrape_jobs(tmp_path, {"redfish_exporter_enabled": True, "redfish_exporter_targets": TARGETS})
    job = jobs["redfish_exporter"]
    assert job["static_configs"] == [{"targets": ["198.18.0.10:9610"], "labels": {"instance": "mon01"}}]
    # pdu01 has timeout 20: 20 + 5 s; the interval is the default 60 s
    assert (job["scrape_timeout"], job["scrape_interval"]) == ("25s", "60s")
    assert "scrape_timeout" not in jobs["node_exporter"]


def test_scrape_job_interval_never_below_its_timeout(tmp_path: Path) -> None:
    jobs = scrape_jobs(
        tmp_path,
        {
            "redfish_exporter_enabled": True,
            "redfish_exporter_targets": TARGETS[:1],
            "redfish_exporter_timeout": 5,
        },
        victoriametrics_redfish_scrape_interval=5,
    )
    assert (jobs["redfish_exporter"]["scrape_timeout"], jobs["redfish_exporter"]["scrape_interval"]) == (
        "10s",
        "10s",
    )


# --- the lab -------------------------------------------------------------------------------------


@pytest.fixture
def lab_paths(tmp_path: Path) -> LabPaths:
    return LabPaths(lab_dir=tmp_path / "lab", cache_dir=tmp_path / "cache")


def test_lab_bmc_material_is_made_once_private_and_verifies(lab_paths: LabPaths) -> None:
    m = lab_bmc.ensure_material(lab_paths)
    d = lab_bmc.bmc_dir(lab_paths)
    assert d.stat().st_mode & 0o777 == 0o700
    for b in lab_bmc.BMCS:
        cert, key = m.certs[b.name]
        assert key.stat().st_mode & 0o777 == 0o600
        assert (d / f"{b.name}.password").stat().st_mode & 0o777 == 0o600
        assert len(m.passwords[b.name]) >= 24 and ":" not in m.passwords[b.name]
        # a TLS client that trusts only the lab CA accepts the certificate for the simulator's address
        ctx = ssl.create_default_context(cafile=str(m.ca_cert))
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(str(cert), str(key))
        assert ctx.verify_mode == ssl.CERT_REQUIRED
        from cryptography import x509

        c = x509.load_pem_x509_certificate(cert.read_bytes())
        san = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == [b.ip]
        c.verify_directly_issued_by(x509.load_pem_x509_certificate(m.ca_cert.read_bytes()))
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    again = lab_bmc.ensure_material(lab_paths)
    assert again.passwords == m.passwords
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before  # nothing re-issued


def test_lab_inventory_runs_a_bmc_per_gpu_node_a_pdu_and_the_exporter(
    lab_paths: LabPaths, tmp_path: Path
) -> None:
    m = lab_bmc.ensure_material(lab_paths)
    children = inventory_data(lab_paths, bmcs=m)["all"]["children"]
    mon = children["monitoring"]["vars"]
    assert mon["redfish_exporter_enabled"] is True
    assert [(t["name"], t["url"], t["ca_file"]) for t in mon["redfish_exporter_targets"]] == [
        ("gpu01", "https://198.18.0.21:8443", str(m.ca_cert)),
        ("gpu02", "https://198.18.0.22:8443", str(m.ca_cert)),
        ("pdu01", "https://198.18.0.11:8443", str(m.ca_cert)),
    ]
    assert not any(t.get("insecure") for t in mon["redfish_exporter_targets"])
    # the scrape job fits the lab's 10 s interval
    assert mon["redfish_exporter_timeout"] + 5 <= int(mon["victoriametrics_scrape_interval"].rstrip("s"))
    gpu01 = children["gpu_nodes"]["hosts"]["gpu01"]
    assert gpu01["redfish_exporter_bmcsim_mockup"] == "rackmount1"
    assert gpu01["redfish_exporter_bmcsim_gpu_metrics_urls"] == ["http://198.18.0.21:9400/metrics"]
    assert gpu01["redfish_exporter_bmcsim_password"] == m.passwords["gpu01"]
    ctl01 = children["slurm_controller"]["hosts"]["ctl01"]
    assert ctl01["redfish_exporter_bmcsim_mockup"] == "pdu"
    assert ctl01["redfish_exporter_bmcsim_gpu_metrics_urls"] == [
        "http://198.18.0.21:9400/metrics",
        "http://198.18.0.22:9400/metrics",
    ]
    assert "redfish_exporter_bmcsim_enabled" not in children["monitoring"]["hosts"]["mon01"]
    # the passwords are in the inventory file: it is the admin's alone
    path = write_inventory(lab_paths, tmp_path / "inv", m)
    assert path.stat().st_mode & 0o777 == 0o600
    assert m.passwords["gpu01"] in path.read_text()


def test_lab_bmc_faults_use_the_simulators_state_file() -> None:
    from vigil.installer.lab import faults

    assert (
        load(ROLES / ROLE / "defaults" / "main.yml")["redfish_exporter_bmcsim_faults_file"]
        == faults.BMC_FAULTS_FILE
    )
    assert re.search(
        r'^DEFAULT_STATE = "/var/lib/vigil/bmcsim/faults.json"$', faults._faults_source(bmc=True), re.M
    )


def test_redfish_target_down_holds_back_that_targets_chassis_alerts(tmp_path: Path) -> None:
    am = yaml.safe_load(render(tmp_path, only=("alertmanager.yml",))["alertmanager.yml"])
    rules = [r for r in am["inhibit_rules"] if r["source_matchers"] == ['alertname="RedfishTargetDown"']]
    assert rules == [
        {
            "source_matchers": ['alertname="RedfishTargetDown"'],
            "target_matchers": ['alertname=~"Chassis.+"'],
            "equal": ["target"],
        }
    ]
