"""Role `audit`: its structure, its templates rendered by Ansible (the rules they make pass the rules
checker), its TLS material (the site CA's, which `vigil deploy` issues:
tests/unit/deploy/test_host_certificates.py), the package installer. The host-side scripts, the rules
checker and the probe, have their own tests: test_audit_files.py.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.unit.roles import test_roles_specs as specs
from tests.unit.roles.rendering import BIN, ROLES, SAMPLE_INVENTORY, ansible_env, contract_vars

ROLE = ROLES / "audit"
FILES = ROLE / "files"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, FILES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- structure ----------------------------------------------------------------------------------


def test_defaults_and_argument_specs_agree() -> None:
    defaults = load(ROLE / "defaults" / "main.yml")
    options = load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    types = {bool: "bool", int: "int", str: "str", list: "list", dict: "dict"}
    for name, value in defaults.items():
        assert name.startswith("audit_"), name
        assert options[name]["default"] == value, name
        assert options[name]["type"] == types[type(value)], name
        assert len(options[name]["description"]) > 20, name


def test_vars_are_underscored_and_main_wires_the_phases() -> None:
    assert all(k.startswith("_audit_") for k in load(ROLE / "vars" / "main.yml"))
    specs.check_main_wiring("audit", ["preflight", "install", "configure", "run"])


def _tasks(path: Path) -> list[dict[str, Any]]:
    out = []
    for task in load(path) or []:
        out += [task, *task.get("block", []), *task.get("rescue", [])]
    return out


def test_commands_say_whether_they_changed_and_configs_are_validated() -> None:
    for path in (ROLE / "tasks").glob("*.yml"):
        for task in _tasks(path):
            if any(
                k in task
                for k in ("ansible.builtin.command", "ansible.builtin.shell", "ansible.builtin.script")
            ):
                assert "changed_when" in task, f"{path.name}: {task['name']}"
    configure = {t["name"]: t for t in _tasks(ROLE / "tasks" / "configure.yml")}
    rules = configure["Install vigil's audit rules"]["vars"]["_common_files"]
    assert [f["validate"] for f in rules] == ["{{ _audit_check_rules }}"]
    variables = load(ROLE / "vars" / "main.yml")
    assert "%s" in variables["_audit_check_rules"]
    rsyslog = configure["Configure rsyslog's forwarding of the audit trail"]["ansible.builtin.template"]
    assert rsyslog["validate"] == "/usr/sbin/rsyslogd -N1 -f %s"
    journald = configure["Create the audit directories and journald's drop-in"]["vars"]["_common_files"]
    assert [f["validate"] for f in journald] == ["{{ _audit_check_ini }}"]
    assert "%s" in variables["_audit_check_ini"]


def test_handlers_reload_systemd_and_skip_check_mode() -> None:
    for h in load(ROLE / "handlers" / "main.yml"):
        assert h["name"].startswith("Restart ")
        assert h["ansible.builtin.systemd_service"]["daemon_reload"] is True
        assert h["when"] == "not ansible_check_mode"


def test_templates_say_they_are_managed() -> None:
    templates = sorted(ROLE.glob("templates/*.j2"))
    assert len(templates) == 5
    for t in templates:
        assert t.read_text().startswith("{{ ansible_managed | comment }}"), t


def test_tls_material_is_the_site_cas_which_the_deploy_passed() -> None:
    configure = {t["name"]: t for t in _tasks(ROLE / "tasks" / "configure.yml")}
    block = configure["TLS material for the forwarding (the site CA's, issued by deploy)"]["block"]
    copy = {t["name"]: t for t in block}["Copy the CA certificate, this host's certificate and key"]
    assert copy["ansible.builtin.import_role"] == {"name": "_common", "tasks_from": "files"}
    args = copy["vars"]
    assert args["_common_files_dirs"] == [{"path": "{{ audit_tls_dir }}", "mode": "0700"}]
    items = {f["path"].rsplit("/", 1)[1]: f for f in args["_common_files"]}
    assert items["ca.crt"]["src"] == "{{ _audit_pki_dir ~ '/ca.crt' }}" and items["ca.crt"]["mode"] == "0644"
    key = items["{{ _audit_cert_usage }}.key"]
    issued = "{{ _audit_pki_dir }}/issued/{{ inventory_hostname }}/{{ _audit_cert_usage }}"
    assert args["__audit_issued"] == issued
    assert key["src"] == "{{ __audit_issued ~ '.key' }}"
    assert key["mode"] == "0600" and "owner" not in key and "group" not in key  # root's
    assert load(ROLE / "vars" / "main.yml")["_audit_pki_dir"] == "{{ vigil_pki_dir | default('') }}"
    assert not (FILES / "audit_ca.py").exists()  # one CA for the site


# --- templates rendered by Ansible --------------------------------------------------------------

TEMPLATES = {
    "vigil.rules": "vigil.rules.j2",
    "journald.conf": "journald.conf.j2",
    "rsyslog.conf": "rsyslog-vigil.conf.j2",
    "prune.service": "vigil-audit-prune.service.j2",
    "prune.timer": "vigil-audit-prune.timer.j2",
}


def render(
    tmp: Path, host: str, extra: dict[str, Any] | None = None, present: list[str] | None = None
) -> dict[str, str]:
    """Render the role's templates for ``host`` of the sample inventory, with the role's defaults and vars."""
    out = tmp / f"rendered-{host}"
    out.mkdir(parents=True, exist_ok=True)
    defaults = load(ROLE / "defaults" / "main.yml")
    everything = (
        defaults["audit_watch_config"]
        + defaults["audit_watch_keys"]
        + defaults["audit_watch_store"]
        + defaults["audit_exec_paths"]
        + defaults["audit_service_control_paths"]
    )
    tasks = [
        {
            "name": f"Render {name}",
            "ansible.builtin.template": {
                "src": str(ROLE / "templates" / src),
                "dest": str(out / name),
                "mode": "0644",
            },
        }
        for name, src in TEMPLATES.items()
    ]
    play = [
        {
            "name": "Render the audit role's templates",
            "hosts": host,
            "gather_facts": False,
            "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
            "vars": {"__audit_present": present if present is not None else everything},
            "tasks": tasks,
        }
    ]
    (tmp / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp / "inventory.yml").write_text(yaml.safe_dump(SAMPLE_INVENTORY, sort_keys=False))
    (tmp / "extra.json").write_text(json.dumps({**contract_vars(tmp / "home"), **(extra or {})}))
    res = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(tmp / "inventory.yml"),
            str(tmp / "play.yml"),
            "-e",
            f"@{tmp / 'extra.json'}",
        ],
        capture_output=True,
        text=True,
        env=ansible_env(tmp),
        cwd=str(tmp),
        check=False,
    )
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-2000:]
    return {p.name: p.read_text() for p in out.iterdir()}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("client"), "gpu01")


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("receiver"), "mon01")


def rule_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def test_rules_cover_config_keys_store_vigil_and_service_control(client: dict[str, str]) -> None:
    lines = rule_lines(client["vigil.rules"])
    assert "-w /etc/vigil -p wa -k vigil-config" in lines
    assert "-w /etc/systemd/system -p wa -k vigil-config" in lines
    assert "-w /etc/audit -p wa -k vigil-config" in lines
    assert "-w /etc/vigil/audit/tls -p wa -k vigil-keys" in lines
    assert "-w /var/lib/vigil/audit -p wa -k vigil-keys" in lines
    assert "-w /var/lib/vigil/bundles -p wa -k vigil-bundle-store" in lines
    assert "-a always,exit -F path=/usr/local/bin/vigil -F perm=x -k vigil-exec" in lines
    assert "-a always,exit -F path=/usr/bin/systemctl -F perm=x -k vigil-service-control" in lines
    assert not any(ln.startswith("-e") for ln in lines)
    assert module("check_audit_rules").check_text(client["vigil.rules"]) == []


def test_rules_lock_last_only_when_asked_and_leave_out_paths_without_a_place(tmp_path: Path) -> None:
    out = render(
        tmp_path,
        "gpu01",
        {
            "audit_lock_rules": True,
            "audit_watch_store": ["/srv/vigil/bundles"],
            "audit_extra_rules": ["-w /etc/sudoers -p wa -k site-sudoers"],
        },
        present=["/etc/vigil", "/usr/bin/systemctl"],
    )
    lines = rule_lines(out["vigil.rules"])
    assert lines == [
        "-w /etc/vigil -p wa -k vigil-config",
        "-a always,exit -F path=/usr/bin/systemctl -F perm=x -k vigil-service-control",
        "-w /etc/sudoers -p wa -k site-sudoers",
        "-e 2",
    ]
    assert module("check_audit_rules").check_text(out["vigil.rules"]) == []


def test_journald_is_persistent_with_size_and_retention(client: dict[str, str]) -> None:
    ini = configparser.ConfigParser(strict=True)
    ini.read_string(client["journald.conf"])
    assert dict(ini["Journal"]) == {
        "storage": "persistent",
        "systemmaxuse": "2G",
        "maxretentionsec": "400d",
        "forwardtosyslog": "yes",
    }


def test_client_forwards_over_tls_to_the_receiver_by_name(client: dict[str, str]) -> None:
    conf = client["rsyslog.conf"]
    assert 'DefaultNetstreamDriverCertFile="/etc/vigil/audit/tls/client.crt"' in conf
    assert 'DefaultNetstreamDriverKeyFile="/etc/vigil/audit/tls/client.key"' in conf
    assert 'target="198.18.0.10" port="6514" protocol="tcp"' in conf
    assert 'streamDriver="gtls" streamDriverMode="1" streamDriverAuthMode="x509/name"' in conf
    assert 'streamDriverPermittedPeers="mon01"' in conf
    assert 'queue.type="LinkedList"' in conf and 'queue.maxDiskSpace="1024m"' in conf
    assert "imtcp" not in conf  # a client does not listen
    assert (
        'if $programname startswith "vigil" or $syslogfacility-text == "auth" or '
        '$syslogfacility-text == "authpriv" then' in conf
    )
    assert 'file="/var/log/audit/audit.log"' in conf


def test_receiver_listens_on_its_cluster_address_for_known_clients(receiver: dict[str, str]) -> None:
    conf = receiver["rsyslog.conf"]
    assert 'DefaultNetstreamDriverCertFile="/etc/vigil/audit/tls/server.crt"' in conf
    assert 'input(type="imtcp" address="198.18.0.10" port="6514" ruleset="vigil_remote")' in conf
    assert 'streamDriver.authMode="x509/name"' in conf and 'streamDriver.mode="1"' in conf
    peers = re.search(r"permittedPeer=\[(.*)\]", conf)
    assert peers is not None
    assert sorted(json.loads(f"[{peers.group(1)}]")) == ["ctl01", "gpu01", "gpu02", "login01"]
    assert "/var/log/vigil-remote/%fromhost:::secpath-replace%/%$year%-%$month%-%$day%.log" in conf
    assert "omfwd" not in conf  # the receiver keeps its own lines locally


def test_rsyslog_config_is_accepted_by_rsyslogd(
    client: dict[str, str], receiver: dict[str, str], tmp_path: Path
) -> None:
    rsyslogd = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
    if not Path(rsyslogd).exists():
        pytest.skip("rsyslogd is not installed on this machine (the role validates on the host)")
    for name, conf in (("client", client["rsyslog.conf"]), ("receiver", receiver["rsyslog.conf"])):
        path = tmp_path / f"{name}.conf"
        path.write_text(conf)
        res = subprocess.run([rsyslogd, "-N1", "-f", str(path)], capture_output=True, text=True, check=False)
        assert res.returncode == 0, (name, res.stderr)


def test_pruning_removes_files_older_than_the_retention(receiver: dict[str, str]) -> None:
    service = receiver["prune.service"]
    assert (
        'ExecStart=/usr/bin/find /var/log/vigil-remote -mindepth 2 -maxdepth 2 -type f -name "*.log" '
        "-mtime +400 -delete"
    ) in service
    assert "ReadWritePaths=/var/log/vigil-remote" in service and "ProtectSystem=strict" in service
    assert "OnCalendar=daily" in receiver["prune.timer"] and "Persistent=true" in receiver["prune.timer"]


# --- the package installer ----------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg")
def test_install_debs_skips_packages_installed_at_that_version_or_newer(tmp_path: Path) -> None:
    deb = tmp_path / "x.deb"
    deb.write_bytes(b"not used")
    script = str(ROLES / "_common" / "files" / "install-debs")
    res = subprocess.run(
        ["sh", script, "--check", f"dpkg=0.1={deb}", f"vigil-no-such-package=1.0-1={deb}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "install: vigil-no-such-package 1.0-1\n"
    missing = subprocess.run(
        ["sh", script, "--check", f"dpkg=0.1={tmp_path / 'gone.deb'}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.skipif(
    shutil.which("dpkg") is None or os.geteuid() != 0, reason="needs dpkg, as root (the role runs it as root)"
)
def test_install_debs_follows_no_link_at_the_old_log_name_and_shows_dpkgs_error(tmp_path: Path) -> None:
    """dpkg's output once went to the fixed /tmp/vigil-install-debs.log, where anyone could plant a link
    for root to write through. A damaged .deb of a package not installed makes dpkg fail at once,
    changing nothing: its error is shown, and neither the planted link nor its target is touched."""
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    planted = Path(tempfile.gettempdir()) / "vigil-install-debs.log"
    if planted.exists() or planted.is_symlink():
        pytest.skip(f"{planted} exists on this machine")
    planted.symlink_to(victim)
    try:
        deb = tmp_path / "vigil-no-such-package_1.0-1_all.deb"
        deb.write_bytes(b"not a debian archive")
        res = subprocess.run(
            ["sh", str(ROLES / "_common" / "files" / "install-debs"), f"vigil-no-such-package=1.0-1={deb}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert res.returncode == 1 and str(deb) in res.stderr, res.stderr
        assert victim.read_text() == "keep me\n" and planted.is_symlink()
    finally:
        planted.unlink()
