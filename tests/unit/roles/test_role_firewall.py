"""The firewall role: its rulesets for the sample site, checked and loaded by nft in a throwaway
network namespace, and its preflight's refusals. The lab test (tests/lab/test_listeners.py) sends
real connections through them."""

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

from tests.unit.roles.rendering import ROLES, SAMPLE_INVENTORY, run_playbook

ROLE = ROLES / "firewall"
ADMIN = "198.18.0.1/32"
HOSTS = ("mon01", "ctl01", "gpu01", "gpu02", "login01")
#: the sample site, every host with its address
SITE = copy.deepcopy(SAMPLE_INVENTORY)
SITE["all"]["children"]["login"]["hosts"]["login01"]["ansible_host"] = "198.18.0.30"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _play(tmp: Path, inventory: dict[str, Any], extra: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Run the role's preflight and render its ruleset for every host, on the controller."""
    out = tmp / "out"
    out.mkdir(parents=True, exist_ok=True)
    play = [
        {
            "name": "Render the firewall",
            "hosts": "all",
            "gather_facts": False,
            "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
            "tasks": [
                {"ansible.builtin.import_tasks": str(ROLE / "tasks" / "preflight.yml")},
                {
                    "name": "Render the ruleset",
                    "ansible.builtin.template": {
                        "src": str(ROLE / "templates" / "firewall.nft.j2"),
                        "dest": str(out) + "/{{ inventory_hostname }}.nft",
                        "mode": "0644",
                    },
                },
            ],
        }
    ]
    return run_playbook(tmp, play, inventory, extra)


@pytest.fixture(scope="module")
def rulesets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("firewall")
    res = _play(tmp, SITE, {"firewall_admin_networks": [ADMIN, "2001:db8:1::/64"]})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    return {h: (tmp / "out" / f"{h}.nft").read_text() for h in HOSTS}


def _rule(text: str, name: str) -> tuple[set[int], set[str]]:
    """The ports of rule NAME and the IPv4 elements of its set."""
    ports = re.search(rf"tcp dport \{{ ([0-9, ]+) \}} ip saddr @{name}_v4 accept", text)
    assert ports, f"no {name} rule in:\n{text}"
    body = re.search(rf"set {name}_v4 \{{(.*?)\n\t\}}", text, re.S)
    assert body
    elements = re.search(r"elements = \{ ([^}]*) \}", body.group(1))
    return {int(p) for p in ports.group(1).split(", ")}, set(
        elements.group(1).split(", ") if elements else ()
    )


def _dropped(text: str) -> set[int]:
    m = re.search(r"tcp dport \{ ([0-9, ]+) \} counter drop", text)
    assert m, text
    return {int(p) for p in m.group(1).split(", ")}


def test_the_port_fallbacks_agree_with_each_roles_default() -> None:
    fallbacks = _load(ROLE / "vars" / "main.yml")["_firewall_port_defaults"]
    for name, port in fallbacks.items():
        role = "audit" if name.startswith("audit_") else name.removesuffix("_port").removesuffix("_bmcsim")
        role = "alertmanager" if name.startswith("alertmanager_") else role
        assert _load(ROLES / role / "defaults" / "main.yml")[name] == port, name


def test_every_role_port_setting_is_covered_by_the_firewall() -> None:
    fallbacks = _load(ROLE / "vars" / "main.yml")["_firewall_port_defaults"]
    for defaults in ROLES.glob("*/defaults/main.yml"):
        for name, value in (_load(defaults) or {}).items():
            if name.endswith("_port") and isinstance(value, int):
                assert name in fallbacks, f"{defaults}: {name} listens where the firewall does not look"


def test_exporters_admit_the_monitoring_host_and_apis_the_admin_networks(rulesets: dict[str, str]) -> None:
    mon = rulesets["mon01"]
    ports, elements = _rule(mon, "exporters")
    assert ports == {9100, 9610} and "198.18.0.10" in elements and "198.18.0.1" not in elements
    ports, elements = _rule(mon, "apis")
    assert ports == {8428, 8880, 9093, 3000}
    assert "198.18.0.1/32" in elements and "198.18.0.10" in elements
    assert "2001:db8:1::/64" in mon  # the IPv6 admin network goes to the IPv6 set
    ports, elements = _rule(mon, "audit")
    assert ports == {6514}
    for ip in ("198.18.0.10", "198.18.0.11", "198.18.0.21", "198.18.0.22"):
        assert ip in elements
    assert _dropped(mon) == {9100, 9610, 8428, 8880, 9093, 3000, 6514}

    gpu = rulesets["gpu01"]
    ports, elements = _rule(gpu, "exporters")
    assert ports == {9100, 9400} and "198.18.0.10" in elements and "198.18.0.11" not in elements
    assert "apis_v4" not in gpu and "audit_v4" not in gpu
    assert _dropped(gpu) == {9100, 9400}
    assert _dropped(rulesets["ctl01"]) == {9100, 9341}
    assert _dropped(rulesets["login01"]) == {9101}  # the inventory's own port wins
    for text in rulesets.values():
        assert text.index('iifname "lo" accept') < text.index("counter drop")
        assert "policy accept" in text  # nothing but the stack's ports is filtered
        assert "tcp dport 22" not in text and "ssh" not in text.lower().replace("sshd", "")


needs_netns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("unshare") is None,
    reason="needs root, nft and unshare (scripts/system-deps.sh)",
)


@needs_netns
def test_nft_checks_and_loads_each_ruleset_in_a_throwaway_network_namespace(
    rulesets: dict[str, str], tmp_path: Path
) -> None:
    for host, text in rulesets.items():
        path = tmp_path / f"{host}.nft"
        path.write_text(text)
        # loaded twice: the second load replaces the table in one transaction
        script = f"nft -f {path} && nft -f {path} && nft -j list table inet vigil"
        res = subprocess.run(
            ["unshare", "--net", "sh", "-c", script], capture_output=True, text=True, check=False, timeout=60
        )
        assert res.returncode == 0, f"{host}: {res.stderr}"
        listed = json.loads(res.stdout)["nftables"]
        rules = [i["rule"] for i in listed if "rule" in i]
        assert rules and any(r["expr"][-1] == {"drop": None} for r in rules), host


@needs_netns
def test_nft_refuses_a_ruleset_with_a_bad_address(rulesets: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "bad.nft"
    path.write_text(rulesets["mon01"].replace("198.18.0.1/32", "198.18.0.300/32"))
    res = subprocess.run(
        ["unshare", "--net", "nft", "--check", "--file", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert res.returncode != 0 and "198.18.0.300" in res.stderr


def _refusal(tmp: Path, inventory: dict[str, Any], extra: dict[str, Any]) -> str:
    res = _play(tmp, inventory, extra)
    assert res.returncode != 0
    return res.stdout


def test_preflight_wants_the_admin_networks(tmp_path: Path) -> None:
    out = _refusal(tmp_path, SITE, {})
    assert "firewall: set `firewall_admin_networks`" in out


def test_preflight_refuses_a_name_or_a_hostile_string_where_an_address_belongs(tmp_path: Path) -> None:
    assert '"login01"' in _refusal(tmp_path / "d", SAMPLE_INVENTORY, {"firewall_admin_networks": [ADMIN]})
    inv = copy.deepcopy(SITE)
    inv["all"]["children"]["monitoring"]["hosts"]["mon01"]["ansible_host"] = "mon01.example.org"
    out = _refusal(tmp_path / "a", inv, {"firewall_admin_networks": [ADMIN]})
    assert "not an IPv4 or IPv6 address or network" in out and "mon01.example.org" in out
    hostile = "198.18.0.1 } accept; tcp dport 22 drop; set x { type ipv4_addr"
    out = _refusal(tmp_path / "b", SITE, {"firewall_admin_networks": [hostile]})
    assert "not an IPv4 or IPv6 address or network" in out
    # a site whose hosts have DNS names gives its networks instead
    named = {
        "firewall_admin_networks": [ADMIN],
        "firewall_monitoring_sources": ["10.0.0.5"],
        "firewall_cluster_networks": ["10.0.0.0/16"],
    }
    res = _play(tmp_path / "c", inv, named)
    assert res.returncode == 0, res.stdout[-3000:]
