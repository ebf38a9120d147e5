"""The lab's size (`vigil lab up --gpu-nodes N`): hosts, addresses, Slurm, BMCs and the inventory
follow N; the default stays the two-node lab every other test uses. Booting is the lab tests' part
(benchmarks/deploy.py boots and deploys them); this is what `lab up` writes before anything boots."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from vigil.exporters.redfish import bmcsim
from vigil.installer.lab import bmc, inventory, prepare, slurm
from vigil.installer.lab import state as lab_state
from vigil.installer.lab.errors import LabError
from vigil.installer.lab.hosts import (
    ADMIN_IP,
    DEFAULT_GPU_NODES,
    DEFAULT_MONITORING_HOSTS,
    HOSTS,
    MAX_GPU_NODES,
    MAX_MONITORING_HOSTS,
    SUBNET,
    host_by_name,
    lab_hosts,
)
from vigil.installer.lab.paths import LabPaths


def test_the_default_lab_is_the_two_node_lab() -> None:
    assert DEFAULT_GPU_NODES == 2
    assert [(h.name, h.ip) for h in HOSTS] == [
        ("mon01", "198.18.0.10"),
        ("ctl01", "198.18.0.11"),
        ("gpu01", "198.18.0.21"),
        ("gpu02", "198.18.0.22"),
    ]
    assert [b.name for b in bmc.BMCS] == ["gpu01", "gpu02", "pdu01"]


@pytest.mark.parametrize("n", [1, 16, MAX_GPU_NODES])
def test_n_gpu_nodes_get_distinct_names_and_addresses_on_the_lab_subnet(n: int) -> None:
    hosts = lab_hosts(n)
    nodes = [h for h in hosts if h.gpu_node]
    assert [h.name for h in nodes] == [f"gpu{k:02d}" for k in range(1, n + 1)]
    ips = [ipaddress.ip_address(h.ip) for h in hosts]
    assert len(set(ips)) == len(hosts)
    net = ipaddress.ip_network(SUBNET)
    assert all(ip in net and ip != ipaddress.ip_address(ADMIN_IP) for ip in ips)
    assert all(ip not in (net.network_address, net.broadcast_address) for ip in ips)
    # each is found by name in its lab (lab job --node, lab fault); a larger lab's node is no host
    # of the default lab
    assert all(host_by_name(h.name, hosts) == h for h in hosts)
    if n > DEFAULT_GPU_NODES:
        default = r"\(hosts: mon01, ctl01, gpu01, gpu02\)"
        with pytest.raises(LabError, match=rf"^gpu03: no such lab host {default}$"):
            host_by_name("gpu03")


@pytest.mark.parametrize("n", [0, -1, MAX_GPU_NODES + 1])
def test_a_size_out_of_range_is_refused(n: int) -> None:
    with pytest.raises(LabError, match=rf"^--gpu-nodes {n}: must be 1\.\.{MAX_GPU_NODES}$"):
        lab_hosts(n)


@pytest.mark.parametrize("name", ["gpu00", "gpu17", "gpu100", "gpu1", "gpu07 ", "mon02", "../gpu01"])
def test_no_other_name_is_a_host_of_a_16_node_lab(name: str) -> None:
    with pytest.raises(LabError, match="no such lab host"):
        host_by_name(name, lab_hosts(16))


def test_slurm_etc_hosts_and_bmcs_name_every_node() -> None:
    hosts = lab_hosts(16)
    conf = slurm.slurm_conf(hosts)
    node_lines = [line for line in conf.splitlines() if line.startswith("NodeName=")]
    assert [line.split()[0] for line in node_lines] == [f"NodeName=gpu{k:02d}" for k in range(1, 17)]
    assert "NodeAddr=198.18.0.36 " in node_lines[-1]
    etc = prepare.etc_hosts(hosts)
    assert all(f"{h.ip}\t{h.name}" in etc.splitlines() for h in hosts)
    bmcs = bmc.lab_bmcs(hosts)
    assert [b.name for b in bmcs] == [*(f"gpu{k:02d}" for k in range(1, 17)), "pdu01"]
    # the PDU: one outlet per node, as many as the mockup has
    assert bmcs[-1].host == "ctl01" and bmcs[-1].feeds == tuple(f"gpu{k:02d}" for k in range(1, 12))
    mockup = Path(bmcsim.__file__).parent / "mockups/public-pdu/PowerEquipment/RackPDUs/1/Outlets"
    assert len([d for d in mockup.iterdir() if d.is_dir()]) == bmc.PDU_OUTLETS


def test_the_inventory_of_a_16_node_lab(tmp_path: Path) -> None:
    paths = LabPaths(lab_dir=tmp_path / "lab", cache_dir=tmp_path / "cache")
    hosts = lab_hosts(16)
    nodes = bmc.lab_bmcs(hosts)
    material = bmc.BmcMaterial(
        ca_cert=tmp_path / "ca.crt",
        certs={b.name: (tmp_path / f"{b.name}.crt", tmp_path / f"{b.name}.key") for b in nodes},
        passwords={b.name: f"pw-{b.name}" for b in nodes},
    )
    data = inventory.inventory_data(paths, hosts, bmcs=material)
    groups = data["all"]["children"]
    gpu = groups["gpu_nodes"]["hosts"]
    assert list(gpu) == [f"gpu{k:02d}" for k in range(1, 17)]
    assert gpu["gpu16"]["ansible_host"] == "198.18.0.36"
    # every node runs its own BMC simulator; the PDU on ctl01 reads the GPU feed of the nodes on
    # its outlets, whose firewall lets ctl01 in
    assert all(v["redfish_exporter_bmcsim_enabled"] for v in gpu.values())
    fed = [f"gpu{k:02d}" for k in range(1, 12)]
    assert all("198.18.0.11/32" in gpu[n]["firewall_exporter_extra_sources"] for n in fed)
    assert "firewall_exporter_extra_sources" not in gpu["gpu12"]
    pdu = groups["slurm_controller"]["hosts"]["ctl01"]
    assert len(pdu["redfish_exporter_bmcsim_gpu_metrics_urls"]) == 11
    targets = groups["monitoring"]["vars"]["redfish_exporter_targets"]
    assert [t["name"] for t in targets] == [b.name for b in nodes]


def test_a_state_file_of_before_the_size_was_recorded_is_the_default_lab(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"format": 1, "cache_rootfs": "/c", "hosts": {}}))
    assert lab_state.load(path).gpu_nodes == DEFAULT_GPU_NODES
    st = lab_state.LabState(gpu_nodes=16)
    lab_state.save(path, st)
    assert lab_state.load(path).gpu_nodes == 16
    assert [h.name for h in lab_state.hosts_of(path)][-1] == "gpu16"
    assert lab_state.hosts_of(tmp_path / "none.json") == HOSTS


def test_a_second_monitoring_host_is_mon02_at_the_address_after_the_controller(tmp_path: Path) -> None:
    hosts = lab_hosts(2, monitoring_hosts=2)
    assert [(h.name, h.ip) for h in hosts if "monitoring" in h.groups] == [
        ("mon01", "198.18.0.10"),
        ("mon02", "198.18.0.12"),
    ]
    # the default lab keeps its four hosts; mon02 is a host of the pair's lab only
    assert lab_hosts(2) == HOSTS and len(HOSTS) == 4
    with pytest.raises(LabError, match="^mon02: no such lab host"):
        host_by_name("mon02")
    assert host_by_name("mon02", hosts).ip == "198.18.0.12"
    # the largest lab: nine monitoring hosts and 99 GPU nodes, every address distinct on the subnet
    big = lab_hosts(MAX_GPU_NODES, monitoring_hosts=MAX_MONITORING_HOSTS)
    ips = [ipaddress.ip_address(h.ip) for h in big]
    assert len(set(ips)) == len(big) == 2 + MAX_GPU_NODES + MAX_MONITORING_HOSTS - 1
    assert all(ip in ipaddress.ip_network(SUBNET) and ip != ipaddress.ip_address(ADMIN_IP) for ip in ips)
    # both are in the inventory's monitoring group, and every host knows mon02 by name
    paths = LabPaths(lab_dir=tmp_path / "lab", cache_dir=tmp_path / "cache")
    groups = inventory.inventory_data(paths, hosts)["all"]["children"]
    assert groups["monitoring"]["hosts"] == {
        "mon01": {"ansible_host": "198.18.0.10"},
        "mon02": {"ansible_host": "198.18.0.12"},
    }
    # the pair's Alertmanagers notify the lab's webhook receiver on the admin host's lab address;
    # the default lab keeps the role's receiver
    pair_vars = groups["monitoring"]["vars"]
    assert pair_vars["alertmanager_webhook_url"] == "http://198.18.0.1:9095/"
    assert pair_vars["alertmanager_site_hosts"] == ["198.18.0.1"]
    single = inventory.inventory_data(paths, lab_hosts(2))["all"]["children"]["monitoring"]["vars"]
    assert "alertmanager_webhook_url" not in single and "alertmanager_site_hosts" not in single
    assert "198.18.0.12\tmon02" in prepare.etc_hosts(hosts).splitlines()
    # mon02 runs no Slurm daemon
    assert "mon02" not in slurm.slurm_conf(hosts)


@pytest.mark.parametrize("n", [0, MAX_MONITORING_HOSTS + 1])
def test_a_monitoring_size_out_of_range_is_refused(n: int) -> None:
    with pytest.raises(LabError, match=rf"^--monitoring-hosts {n}: must be 1\.\.{MAX_MONITORING_HOSTS}$"):
        lab_hosts(2, monitoring_hosts=n)


def test_the_state_file_keeps_the_number_of_monitoring_hosts(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"format": 1, "cache_rootfs": "/c", "hosts": {}}))
    assert lab_state.load(path).monitoring_hosts == DEFAULT_MONITORING_HOSTS == 1
    lab_state.save(path, lab_state.LabState(monitoring_hosts=2))
    assert lab_state.load(path).monitoring_hosts == 2
    assert [h.name for h in lab_state.hosts_of(path)][:3] == ["mon01", "ctl01", "mon02"]
