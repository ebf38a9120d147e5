"""Every template renders with the role defaults and a sample inventory, and says what it should.

Rendered by Ansible itself (tests/unit/roles/rendering.py), once per module.
"""

from __future__ import annotations

import configparser
import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.roles.rendering import (
    DEBIAN_ARTIFACTS,
    ROLES,
    SAMPLE_INVENTORY,
    contract_vars,
    render,
    tls_vars,
)

JOBS = {
    "node_exporter",
    "dcgm_exporter",
    "slurm_exporter",
    "redfish_exporter",
    "victoriametrics",
    "vmalert",
    "alertmanager",
}
HARDENING = [
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "CapabilityBoundingSet=",
    "LockPersonality=yes",
    "RestrictSUIDSGID=yes",
    "Restart=always",
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("render"))


def strip_comments(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


def targets(scrape: dict) -> dict[str, dict[str, str]]:
    """job -> {instance: target}"""
    return {
        job["job_name"]: {sc["labels"]["instance"]: sc["targets"][0] for sc in job["static_configs"]}
        for job in scrape["scrape_configs"]
    }


def test_all_templates_render_and_start_managed(rendered: dict[str, str]) -> None:
    assert len(rendered) == 13
    for name, text in rendered.items():
        assert "Ansible managed" in text.splitlines()[1], name
        assert "{{" not in text.replace("{{ $labels", "") or name.endswith(".tmpl"), name


def test_scrape_config_has_one_job_per_component_and_inventory_instances(rendered: dict[str, str]) -> None:
    scrape = yaml.safe_load(rendered["scrape.yml"])
    jobs = targets(scrape)
    assert set(jobs) <= JOBS
    # every host has node_exporter, labelled with its inventory name, at its address
    assert jobs["node_exporter"] == {
        "mon01": "198.18.0.10:9100",
        "ctl01": "198.18.0.11:9100",
        "gpu01": "198.18.0.21:9100",
        "gpu02": "198.18.0.22:9100",
        "login01": "login01:9101",
    }
    assert jobs["dcgm_exporter"] == {"gpu01": "198.18.0.21:9400", "gpu02": "198.18.0.22:9400"}
    assert jobs["slurm_exporter"] == {"ctl01": "198.18.0.11:9341"}
    assert "redfish_exporter" not in jobs  # enabled nowhere
    assert jobs["victoriametrics"] == {"mon01": "198.18.0.10:8428"}
    assert jobs["vmalert"] == {"mon01": "198.18.0.10:8880"}
    assert jobs["alertmanager"] == {"mon01": "198.18.0.10:9093"}
    assert scrape["global"] == {"scrape_interval": "30s", "scrape_timeout": "10s"}


def test_scrape_config_leaves_out_disabled_exporters(tmp_path: Path) -> None:
    inv = json.loads(json.dumps(SAMPLE_INVENTORY))
    inv["all"]["children"]["gpu_nodes"]["vars"]["dcgm_exporter_enabled"] = False
    inv["all"]["children"]["gpu_nodes"]["hosts"]["gpu02"] = {
        "ansible_host": "198.18.0.22",
        "node_exporter_enabled": False,
    }
    out = render(
        tmp_path,
        inventory=inv,
        only=("scrape.yml",),
        extra_vars={"victoriametrics_external_labels": {"site": "lab"}},
    )
    scrape = yaml.safe_load(out["scrape.yml"])
    jobs = targets(scrape)
    assert "dcgm_exporter" not in jobs
    assert "gpu02" not in jobs["node_exporter"] and "gpu01" in jobs["node_exporter"]
    assert scrape["global"]["external_labels"] == {"site": "lab"}


def test_with_a_site_ca_exporters_are_scraped_over_tls_with_the_scrape_credential(tmp_path: Path) -> None:
    import bcrypt

    ev = tls_vars(tmp_path / "site")
    out = render(tmp_path, extra_vars=ev, only=("scrape.yml", "web.yml", "node_exporter.service"))
    jobs = {job["job_name"]: job for job in yaml.safe_load(out["scrape.yml"])["scrape_configs"]}
    for name in ("node_exporter", "dcgm_exporter", "slurm_exporter"):
        assert jobs[name]["scheme"] == "https", name
        assert jobs[name]["tls_config"] == {"ca_file": "/etc/vigil/tls/ca.crt"}, name
        assert jobs[name]["basic_auth"] == {
            "username": "vigil-scrape",
            "password_file": "/etc/vigil/victoriametrics/scrape.password",
        }, name
    web = yaml.safe_load(out["web.yml"])
    assert web["tls_server_config"] == {
        "cert_file": "/etc/vigil/tls/server.crt",
        "key_file": "/etc/vigil/tls/server.key",
        "min_version": "TLS12",
    }
    [(user, hashed)] = web["basic_auth_users"].items()
    password = Path(ev["vigil_scrape_password_file"]).read_bytes().strip()
    assert user == "vigil-scrape" and bcrypt.checkpw(password, hashed.encode())
    assert password.decode() not in out["web.yml"]
    unit = out["node_exporter.service"]
    assert "--web.config.file=/etc/vigil/node_exporter/web.yml" in unit


def test_with_a_site_ca_the_monitoring_services_want_the_api_login_and_their_clients_give_it(
    tmp_path: Path,
) -> None:
    import bcrypt

    ev = tls_vars(tmp_path / "site")
    api_password = Path(ev["vigil_api_password_file"]).read_text().strip()
    key = Path(ev["vigil_metrics_key_file"]).read_text().strip()
    ca = (Path(ev["vigil_pki_dir"]) / "ca.crt").read_text().strip()
    out = render(
        tmp_path,
        extra_vars=ev,
        only=(
            "scrape.yml",
            "alertmanager-web.yml",
            "datasources.yaml",
            "grafana.ini",
            "victoriametrics.service",
            "vmalert.service",
            "alertmanager.service",
        ),
    )
    jobs = {job["job_name"]: job for job in yaml.safe_load(out["scrape.yml"])["scrape_configs"]}
    for name in ("victoriametrics", "vmalert", "alertmanager"):
        assert jobs[name]["scheme"] == "https", name
        assert jobs[name]["tls_config"] == {"ca_file": "/etc/vigil/tls/ca.crt"}, name
        assert jobs[name]["basic_auth"] == {
            "username": "vigil-api",
            "password_file": "/etc/vigil/victoriametrics/api.password",
        }, name
    # their own /metrics want the site's metrics key (-metricsAuthKey) on Debian 12's 1.79,
    # Alertmanager's the login
    assert jobs["victoriametrics"]["params"] == jobs["vmalert"]["params"] == {"authKey": [key]}
    assert "params" not in jobs["alertmanager"]

    vm = out["victoriametrics.service"]
    for flag in (
        "-tls",
        "-tlsCertFile=/etc/vigil/tls/server.crt",
        "-tlsKeyFile=/etc/vigil/tls/server.key",
        "-httpAuth.username=vigil-api",
        "-envflag.enable",
    ):
        assert flag in vm.split(), flag
    vmalert = out["vmalert.service"]
    for link in ("datasource", "remoteWrite", "remoteRead"):
        assert f"-{link}.url=https://198.18.0.10:8428" in vmalert, link
        assert f"-{link}.tlsCAFile=/etc/vigil/tls/ca.crt" in vmalert, link
        assert f"-{link}.basicAuth.username=vigil-api" in vmalert, link
        assert f"-{link}.basicAuth.passwordFile=/etc/vigil/vmalert/api.password" in vmalert, link
    assert "-notifier.url=https://198.18.0.10:9093" in vmalert
    assert "-notifier.basicAuth.passwordFile=/etc/vigil/vmalert/api.password" in vmalert
    assert "-external.url=https://198.18.0.10:8880" in vmalert and "-httpAuth.username=vigil-api" in vmalert
    assert "--web.config.file=/etc/vigil/alertmanager/web.yml" in out["alertmanager.service"]
    assert "--web.external-url=https://198.18.0.10:9093/" in out["alertmanager.service"]
    for name, text in out.items():
        if name != "datasources.yaml":
            assert api_password not in text, name  # the password reaches the services through files

    [(user, hashed)] = yaml.safe_load(out["alertmanager-web.yml"])["basic_auth_users"].items()
    assert user == "vigil-api" and bcrypt.checkpw(api_password.encode(), hashed.encode())

    [ds] = json.loads("".join(x for x in out["datasources.yaml"].splitlines() if not x.startswith("#")))[
        "datasources"
    ]
    assert (
        ds["url"] == "https://198.18.0.10:8428"
        and ds["basicAuth"] is True
        and ds["basicAuthUser"] == "vigil-api"
    )
    assert ds["jsonData"] == {"httpMethod": "POST", "timeInterval": "30s", "tlsAuthWithCACert": True}
    assert ds["secureJsonData"] == {"basicAuthPassword": api_password, "tlsCACert": ca}
    ini = out["grafana.ini"]
    assert "protocol = https" in ini and "cert_file = /etc/vigil/tls/server.crt" in ini
    assert "root_url = https://198.18.0.10:3000/" in ini


def test_without_a_site_ca_nothing_asks_for_tls(rendered: dict[str, str]) -> None:
    scrape = yaml.safe_load(rendered["scrape.yml"])
    assert not any("scheme" in job or "basic_auth" in job for job in scrape["scrape_configs"])
    assert "--web.config.file" not in rendered["node_exporter.service"]


def test_alertmanager_default_receiver_is_the_local_webhook(rendered: dict[str, str]) -> None:
    am = yaml.safe_load(rendered["alertmanager.yml"])
    assert am["route"]["receiver"] == "vigil-default"
    receivers = {r["name"]: r for r in am["receivers"]}
    assert set(receivers) == {"vigil-default", "vigil-page", "vigil-ticket", "vigil-digest"}
    for receiver in receivers.values():  # every class falls back to the local webhook
        assert receiver["webhook_configs"] == [{"url": "http://127.0.0.1:9095/", "send_resolved": True}]
        assert "email_configs" not in receiver
    assert "global" not in am


def test_alertmanager_routes_by_severity_and_groups_by_node_and_job(rendered: dict[str, str]) -> None:
    am = yaml.safe_load(rendered["alertmanager.yml"])
    assert am["route"]["group_by"] == ["instance", "hpc_job"]
    routes = {tuple(r["matchers"]): r for r in am["route"]["routes"]}
    assert routes[('severity="P0"',)]["receiver"] == "vigil-page"
    assert routes[('severity="P1"',)]["receiver"] == "vigil-ticket"
    digest = routes[('severity="P2"',)]
    assert digest["receiver"] == "vigil-digest" and digest["group_by"] == ["severity"]
    assert digest["group_interval"] == digest["repeat_interval"] == "24h"
    inhibit = {(r["source_matchers"][0], r["target_matchers"][0]): r["equal"] for r in am["inhibit_rules"]}
    assert inhibit[('alertname="NodeExporterDown"', 'alertname!="NodeExporterDown"')] == ["instance"]
    assert inhibit[('alertname="SlurmNodeDrained"', 'alertname="GpuIdleWhileAllocated"')] == ["node"]
    assert inhibit[('alertname="GpuTemperatureCritical"', 'alertname="GpuTemperatureHigh"')] == [
        "instance",
        "gpu",
    ]


def test_alertmanager_page_by_email_through_the_site_relay(tmp_path: Path) -> None:
    out = render(
        tmp_path,
        only=("alertmanager.yml",),
        extra_vars={
            "alertmanager_page_email_to": ["oncall@hpc.site.internal", "duty@hpc.site.internal"],
            "alertmanager_smtp_smarthost": "198.18.0.11:25",
            "alertmanager_ticket_webhook_url": "http://198.18.0.11:8080/tickets",
            "alertmanager_site_hosts": ["198.18.0.11"],
        },
    )
    am = yaml.safe_load(out["alertmanager.yml"])
    assert am["global"] == {
        "smtp_smarthost": "198.18.0.11:25",
        "smtp_from": "vigil-alertmanager@localhost",
        "smtp_require_tls": False,
    }
    receivers = {r["name"]: r for r in am["receivers"]}
    assert receivers["vigil-page"]["email_configs"] == [
        {"to": "oncall@hpc.site.internal, duty@hpc.site.internal", "send_resolved": True}
    ]
    assert receivers["vigil-ticket"]["webhook_configs"][0]["url"] == "http://198.18.0.11:8080/tickets"
    assert list(am)[0] == "global"


@pytest.mark.parametrize(
    "role", ["victoriametrics", "vmagent", "vmalert", "alertmanager", "node_exporter", "grafana"]
)
def test_units_are_hardened_and_write_only_their_data_dir(rendered: dict[str, str], role: str) -> None:
    unit = rendered[f"{role}.service"]
    for line in HARDENING:
        assert line in unit.splitlines(), f"{role}: {line}"
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    assert f"ReadWritePaths={defaults[f'{role}_data_dir']}" in unit.splitlines()
    assert f"User={defaults[f'{role}_system_user']}" in unit.splitlines()
    assert f"SyslogIdentifier={defaults[f'{role}_service_name']}" in unit.splitlines()


def test_unit_command_lines_carry_the_settings(rendered: dict[str, str]) -> None:
    vm = rendered["victoriametrics.service"]
    assert "-retentionPeriod=400d" in vm and "-httpListenAddr=0.0.0.0:8428" in vm
    assert "-promscrape.config=/etc/vigil/victoriametrics/scrape.yml" in vm
    assert "-dedup.minScrapeInterval" not in vm  # one monitoring host: no pair (test_vm_pair_roles.py)
    assert "ExecStart=/opt/vigil/victoria-metrics/current/bin/victoria-metrics \\" in vm
    vmalert = rendered["vmalert.service"]
    for flag in (
        "-rule=/etc/vigil/vmalert/rules/*.yml",
        "-datasource.url=http://127.0.0.1:8428",
        "-remoteWrite.url=http://127.0.0.1:8428",
        "-remoteRead.url=http://127.0.0.1:8428",
        "-notifier.url=http://127.0.0.1:9093",
        "-httpListenAddr=0.0.0.0:8880",
    ):
        assert flag in vmalert
    am = rendered["alertmanager.service"]
    assert "--cluster.listen-address= \\" in am and "--web.listen-address=0.0.0.0:9093" in am
    ne = rendered["node_exporter.service"]
    assert "--collector.textfile.directory=/var/lib/vigil/node_exporter/textfile" in ne
    assert "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" in vm


def test_grafana_ini_is_air_gapped_and_has_no_password(rendered: dict[str, str]) -> None:
    ini = configparser.ConfigParser(interpolation=None, strict=True)
    ini.read_string(rendered["grafana.ini"])
    assert ini["security"]["admin_password"] == "$__file{/etc/vigil/grafana/admin-password}"
    assert ini["analytics"]["reporting_enabled"] == "false"
    assert ini["analytics"]["check_for_updates"] == "false"
    assert ini["server"]["http_port"] == "3000"
    assert ini["auth.anonymous"]["enabled"] == "false"


def test_grafana_provisioning_points_at_victoriametrics(rendered: dict[str, str]) -> None:
    ds = json.loads(strip_comments(rendered["datasources.yaml"]))
    assert yaml.safe_load(rendered["datasources.yaml"]) == ds  # JSON is YAML, as Grafana reads it
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://127.0.0.1:8428"
    dash = json.loads(strip_comments(rendered["dashboards.yaml"]))
    assert dash["providers"][0]["options"]["path"] == "/etc/vigil/grafana/dashboards"
    for path in (ROLES / "grafana" / "files" / "dashboards").glob("*.json"):
        board = json.loads(path.read_text())
        uids = {p["datasource"]["uid"] for p in board["panels"]}
        assert uids == {source["uid"]}, path.name
        assert board["uid"] == path.stem


def _checker(name: str, path: Path) -> subprocess.CompletedProcess[str]:
    """Run a `validate` checker kept in node_exporter's vars on `path`, as Ansible would."""
    check = str(yaml.safe_load((ROLES / "node_exporter" / "vars" / "main.yml").read_text())[name])
    command = check.replace("%s", shlex.quote(str(path)))
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)


def test_the_certificate_scan_runs_hardened_as_root_over_the_configured_dirs(
    rendered: dict[str, str], tmp_path: Path
) -> None:
    unit = rendered["vigil-tls-expiry.service"].splitlines()
    for line in [h for h in HARDENING if h != "Restart=always"] + ["PrivateNetwork=yes", "Type=oneshot"]:
        assert line in unit, line
    assert "ReadWritePaths=/var/lib/vigil/node_exporter/textfile" in unit
    assert not any(line.startswith("User=") for line in unit)  # root: it reads every host's certificates
    # A run has a time bound, from the timer (systemd) and from the deploy (Ansible's task keyword).
    assert "TimeoutStartSec=60" in unit
    tasks = yaml.safe_load((ROLES / "node_exporter" / "tasks" / "run.yml").read_text())
    (now,) = [t for t in tasks if "ansible.builtin.command" in t and "tls_expiry" in str(t)]
    assert now["timeout"] == "{{ _node_exporter_tls_expiry_timeout }}"
    assert (
        "ExecStart=/usr/bin/python3 -I /usr/local/libexec/vigil/vigil-tls-expiry"
        " --textfile-dir /var/lib/vigil/node_exporter/textfile"
        " --scan=/etc/vigil/tls --scan=/etc/vigil/audit/tls"
    ) in unit
    timer = rendered["vigil-tls-expiry.timer"].splitlines()
    assert "OnUnitActiveSec=1h" in timer and "WantedBy=timers.target" in timer
    for name in ("vigil-tls-expiry.service", "vigil-tls-expiry.timer"):
        path = tmp_path / name
        path.write_text(rendered[name])
        assert _checker("_node_exporter_check_unit", path).returncode == 0, name
        path.write_text(rendered[name] + "[Unit]\nDescription=twice\n")  # a section twice
        assert _checker("_node_exporter_check_unit", path).returncode != 0, name
    script = ROLES / "node_exporter" / "files" / "vigil_tls_expiry.py"
    assert _checker("_node_exporter_check_python", script).returncode == 0
    broken = tmp_path / "broken.py"
    broken.write_text(script.read_text()[:-200])
    assert _checker("_node_exporter_check_python", broken).returncode != 0


NEXT_ARTIFACTS = {
    **DEBIAN_ARTIFACTS,
    "bin/victoria-metrics": ("victoria-metrics", "1.112.0+ds1-2"),
    "bin/vmalert": ("victoria-metrics", "1.112.0+ds1-2"),
}


def test_from_1_86_victoriametrics_own_scrape_url_does_not_carry_the_metrics_key(tmp_path: Path) -> None:
    """VictoriaMetrics and vmalert 1.86 and later guard /metrics with the API login when they have
    no -metricsAuthKey: the key is then given to neither and VictoriaMetrics' own job leaves it out
    of its URL, where /targets would show it. vmalert's job keeps it whatever the version: a
    rollback that keeps the store puts vmalert 1.79 back beside a VictoriaMetrics whose scrape
    configuration it does not rewrite (tests/integration/test_metrics_key.py runs the real
    binaries, and the lab's rollback test the case itself)."""
    ev = tls_vars(tmp_path / "site")
    key = Path(ev["vigil_metrics_key_file"]).read_text().strip()
    for artifacts, in_url in ((DEBIAN_ARTIFACTS, True), (NEXT_ARTIFACTS, False)):
        arts = contract_vars(tmp_path / "site", artifacts)["vigil_artifacts"]
        out = render(tmp_path / str(in_url), extra_vars={**ev, "vigil_artifacts": arts}, only=("scrape.yml",))
        jobs = {job["job_name"]: job for job in yaml.safe_load(out["scrape.yml"])["scrape_configs"]}
        for name in ("victoriametrics", "vmalert"):
            assert jobs[name]["basic_auth"]["username"] == "vigil-api", name
        assert ("params" in jobs["victoriametrics"]) is in_url, artifacts["bin/victoria-metrics"]
        assert jobs["vmalert"]["params"] == {"authKey": [key]}
    # the services' environment files carry -metricsAuthKey only where the version wants it
    for role, guard in (
        ("victoriametrics", "{% if _victoriametrics_metrics_key | bool %}"),
        ("vmalert", "{% if _vmalert_version is version('1.86.0', '<') %}"),
    ):
        text = (ROLES / role / "tasks" / "configure.yml").read_text()
        before, after = text.split("metricsAuthKey=", 1)
        assert before.rstrip().endswith(guard), role
    versions = yaml.safe_load((ROLES / "victoriametrics" / "vars" / "main.yml").read_text())
    assert versions["_victoriametrics_metrics_login_since"] == "1.86.0"
