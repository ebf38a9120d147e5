"""The Alertmanager cluster of a monitoring pair (roles alertmanager, vmalert, firewall;
docs/alerts.md, "Two Alertmanagers"), rendered for both topologies: one monitoring host keeps today's
flags, clustering off; two gossip with each other over mutual TLS with the site CA, each vmalert
notifies both, and each firewall lets only the other member in to the gossip port. The real
binaries run this configuration in tests/integration/test_alertmanager_pair.py."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.roles.rendering import (
    DEBIAN_ARTIFACTS,
    PAIR_INVENTORY,
    ROLES,
    contract_vars,
    exec_argv,
    pair_tls_vars,
    render,
    run_playbook,
)
from tests.unit.roles.test_role_firewall import SITE, _play

PAIR = PAIR_INVENTORY
NEXT_ARTIFACTS = {
    **DEBIAN_ARTIFACTS,
    "bin/alertmanager": ("prometheus-alertmanager", "0.28.1+ds-1"),
    "bin/amtool": ("prometheus-alertmanager", "0.28.1+ds-1"),
}
UNITS = ("alertmanager.service", "vmalert.service")


def _site_vars(tmp: Path, artifacts: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    ev = pair_tls_vars(tmp / "site")
    if artifacts is not None:
        ev["vigil_artifacts"] = contract_vars(tmp / "home", artifacts)["vigil_artifacts"]
    return ev


def _flags(argv: list[str], prefix: str) -> list[str]:
    return [a for a in argv if a.startswith(prefix)]


def test_one_monitoring_host_keeps_clustering_off_and_one_notifier(tmp_path: Path) -> None:
    out = render(tmp_path, extra_vars=_site_vars(tmp_path), only=UNITS)
    am = exec_argv(out["alertmanager.service"])
    # an empty listen address turns the gossip off (both channels default to 0.0.0.0:9094)
    assert _flags(am, "--cluster.") == ["--cluster.listen-address="]
    vmalert = exec_argv(out["vmalert.service"])
    assert _flags(vmalert, "-notifier.url=") == ["-notifier.url=https://198.18.0.10:9093"]
    assert len(_flags(vmalert, "-notifier.tlsCAFile=")) == 1


def test_a_pair_gossips_over_mutual_tls_with_the_other_member_as_peer(tmp_path: Path) -> None:
    ev = _site_vars(tmp_path)
    for host, me, peer in (("mon01", "198.18.0.10", "198.18.0.12"), ("mon02", "198.18.0.12", "198.18.0.10")):
        tmp = tmp_path / host
        out = render(tmp, extra_vars=ev, inventory=PAIR, host=host, only=(*UNITS, "cluster-tls.yml"))
        am = exec_argv(out["alertmanager.service"])
        assert _flags(am, "--cluster.") == [
            f"--cluster.listen-address={me}:9094",
            f"--cluster.peer={peer}:9094",
            "--cluster.pushpull-interval=10s",
            "--cluster.tls-config=/etc/vigil/alertmanager/cluster-tls.yml",
        ], host
        # the API keeps its TLS and login
        assert "--web.config.file=/etc/vigil/alertmanager/web.yml" in am

        tls = yaml.safe_load(out["cluster-tls.yml"])
        assert tls["tls_server_config"] == {
            "cert_file": "/etc/vigil/tls/server.crt",
            "key_file": "/etc/vigil/tls/server.key",
            "client_ca_file": "/etc/vigil/tls/ca.crt",
            "client_auth_type": "RequireAndVerifyClientCert",
            "min_version": "TLS12",
        }, host  # Debian 12's 0.25 refuses client_allowed_sans
        assert tls["tls_client_config"] == {
            "cert_file": "/etc/vigil/tls/client.crt",
            "key_file": "/etc/vigil/tls/client.key",
            "ca_file": "/etc/vigil/tls/ca.crt",
            "min_version": "TLS12",
        }, host

        # each vmalert sends every alert to both Alertmanagers, each link with the CA and the login
        vmalert = exec_argv(out["vmalert.service"])
        assert _flags(vmalert, "-notifier.url=") == [
            "-notifier.url=https://198.18.0.10:9093",
            "-notifier.url=https://198.18.0.12:9093",
        ], host
        assert _flags(vmalert, "-notifier.tlsCAFile=") == ["-notifier.tlsCAFile=/etc/vigil/tls/ca.crt"] * 2
        assert (
            _flags(vmalert, "-notifier.basicAuth.username=") == ["-notifier.basicAuth.username=vigil-api"] * 2
        )


def test_debian_next_also_checks_the_peers_names(tmp_path: Path) -> None:
    out = render(
        tmp_path, extra_vars=_site_vars(tmp_path, NEXT_ARTIFACTS), inventory=PAIR, only=("cluster-tls.yml",)
    )
    tls = yaml.safe_load(out["cluster-tls.yml"])
    assert tls["tls_server_config"]["client_allowed_sans"] == ["mon01", "mon02"]


def test_a_pair_without_a_site_ca_gossips_in_the_clear_on_its_addresses(tmp_path: Path) -> None:
    out = render(tmp_path, inventory=PAIR, host="mon02", only=UNITS)
    am = exec_argv(out["alertmanager.service"])
    assert _flags(am, "--cluster.") == [
        "--cluster.listen-address=198.18.0.12:9094",
        "--cluster.peer=198.18.0.10:9094",
        "--cluster.pushpull-interval=10s",
    ]
    vmalert = exec_argv(out["vmalert.service"])
    assert _flags(vmalert, "-notifier.url=") == [
        "-notifier.url=http://198.18.0.10:9093",
        "-notifier.url=http://198.18.0.12:9093",
    ]
    assert not _flags(vmalert, "-notifier.tlsCAFile=")


def test_the_ports_and_ipv6_members_come_from_each_hosts_settings(tmp_path: Path) -> None:
    inv = copy.deepcopy(PAIR)
    inv["all"]["children"]["monitoring"]["hosts"]["mon02"] = {
        "ansible_host": "2001:db8::12",
        "alertmanager_cluster_port": 9194,
        "alertmanager_port": 9193,
    }
    out = render(tmp_path, inventory=inv, only=UNITS)
    am = exec_argv(out["alertmanager.service"])
    assert _flags(am, "--cluster.peer=") == ["--cluster.peer=[2001:db8::12]:9194"]
    vmalert = exec_argv(out["vmalert.service"])
    assert "-notifier.url=http://[2001:db8::12]:9193" in vmalert


def test_preflight_refuses_a_gossip_port_equal_to_the_api_port(tmp_path: Path) -> None:
    tasks = [{"ansible.builtin.import_tasks": str(ROLES / "alertmanager" / "tasks" / "preflight.yml")}]
    play = [
        {
            "name": "preflight",
            "hosts": "mon01",
            "gather_facts": False,
            "vars_files": [
                str(ROLES / "alertmanager" / "defaults" / "main.yml"),
                str(ROLES / "alertmanager" / "vars" / "main.yml"),
            ],
            "tasks": tasks,
        }
    ]
    res = run_playbook(
        tmp_path, play, PAIR, {**contract_vars(tmp_path / "home"), "alertmanager_cluster_port": 9093}
    )
    assert res.returncode != 0
    assert "check `alertmanager_cluster_port` (9093: a port other than" in res.stdout


# --- the firewall -------------------------------------------------------------------------------

PAIR_SITE: dict[str, Any] = copy.deepcopy(SITE)
PAIR_SITE["all"]["children"]["monitoring"]["hosts"]["mon02"] = {"ansible_host": "198.18.0.12"}


@pytest.fixture(scope="module")
def pair_rulesets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("firewall-pair")
    res = _play(tmp, PAIR_SITE, {"firewall_admin_networks": ["198.18.0.1/32"]})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    return {p.stem: p.read_text() for p in (tmp / "out").glob("*.nft")}


def _peers(text: str, proto: str) -> tuple[set[int], set[str]]:
    ports = re.search(rf"{proto} dport \{{ ([0-9, ]+) \}} ip saddr @peers_v4 accept", text)
    assert ports, f"no {proto} peers rule in:\n{text}"
    body = re.search(r"set peers_v4 \{(.*?)\n\t\}", text, re.S)
    assert body
    elements = re.search(r"elements = \{ ([^}]*) \}", body.group(1))
    return {int(p) for p in ports.group(1).split(", ")}, set(
        elements.group(1).split(", ") if elements else ()
    )


def test_the_gossip_port_is_open_to_the_other_member_only(pair_rulesets: dict[str, str]) -> None:
    for host, other in (("mon01", "198.18.0.12"), ("mon02", "198.18.0.10")):
        text = pair_rulesets[host]
        for proto in ("tcp", "udp"):
            assert _peers(text, proto) == ({9094}, {other}), (host, proto)
        assert re.search(r"tcp dport \{ [0-9, ]*9094[0-9, ]* \} counter drop", text), host
        assert re.search(r"udp dport \{ 9094 \} counter drop", text), host
        # the API ports stay as they were
        assert "9093" in text
    for host in ("ctl01", "gpu01", "gpu02", "login01"):
        assert "peers_v4" not in pair_rulesets[host] and "udp dport" not in pair_rulesets[host], host


def test_one_monitoring_host_opens_no_gossip_port(tmp_path: Path) -> None:
    res = _play(tmp_path, SITE, {"firewall_admin_networks": ["198.18.0.1/32"]})
    assert res.returncode == 0, res.stdout[-3000:]
    text = (tmp_path / "out" / "mon01.nft").read_text()
    assert "peers_v4" not in text and "9094" not in text and "udp" not in text


def test_a_member_without_an_address_is_refused(tmp_path: Path) -> None:
    site = copy.deepcopy(PAIR_SITE)
    site["all"]["children"]["monitoring"]["hosts"]["mon02"] = {}
    res = _play(
        tmp_path,
        site,
        {
            "firewall_admin_networks": ["198.18.0.1/32"],
            "firewall_monitoring_sources": ["198.18.0.10", "198.18.0.12"],
            "firewall_cluster_networks": ["198.18.0.0/24"],
        },
    )
    assert res.returncode != 0
    assert "not an IPv4 or IPv6 address or network" in res.stdout


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("unshare") is None,
    reason="needs root, nft and unshare (scripts/system-deps.sh)",
)
def test_nft_loads_the_pairs_rulesets(pair_rulesets: dict[str, str], tmp_path: Path) -> None:
    for host in ("mon01", "mon02"):
        path = tmp_path / f"{host}.nft"
        path.write_text(pair_rulesets[host])
        res = subprocess.run(
            ["unshare", "--net", "sh", "-c", f"nft -f {path} && nft -j list table inet vigil"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert res.returncode == 0, f"{host}: {res.stderr}"
        rules = [i["rule"] for i in json.loads(res.stdout)["nftables"] if "rule" in i]
        udp = [
            r
            for r in rules
            if any(
                e.get("match", {}).get("left", {}).get("payload", {}).get("protocol") == "udp"
                for e in r["expr"]
            )
        ]
        assert len(udp) == 3, host  # v4 and v6 accept, then the drop


def _vmalert_preflight(tmp: Path, flags: dict[str, list[str]]) -> str:
    tmp.mkdir(parents=True)
    inv = copy.deepcopy(PAIR)
    for host, host_flags in flags.items():
        inv["all"]["children"]["monitoring"]["hosts"][host]["vmalert_extra_flags"] = host_flags
    play = [
        {
            "name": "vmalert preflight",
            "hosts": "mon01",
            "gather_facts": False,
            "tasks": [{"ansible.builtin.import_role": {"name": "vmalert", "tasks_from": "preflight"}}],
        }
    ]
    res = run_playbook(tmp, play, inv, contract_vars(tmp / "home"))
    return " ".join((res.stdout + res.stderr).split())


def test_vmalerts_that_label_their_alerts_apart_are_refused(tmp_path: Path) -> None:
    out = _vmalert_preflight(
        tmp_path / "apart",
        {"mon01": ["-external.label=replica=a"], "mon02": ["-external.label=replica=b", "-loggerLevel=WARN"]},
    )
    assert (
        "the `-external.label` flags in `vmalert_extra_flags` differ between the hosts of group monitoring"
        in out
    )
    assert '"-external.label=replica=a" / "-external.label=replica=b"' in out
    # the same labels on both (other flags may differ): this check passes
    out = _vmalert_preflight(
        tmp_path / "alike",
        {"mon01": ["-external.label=site=a"], "mon02": ["-loggerLevel=WARN", "-external.label=site=a"]},
    )
    assert re.search(r"label their alerts alike\] \**\s*ok: \[mon01\]", out), out[-2000:]
