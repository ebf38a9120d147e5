"""The real node_exporter (the bundle's, Debian's 1.5.0) reading the simulated InfiniBand tree: its
infiniband collector's own series, before and after the lab's faults, are what vigil's fabric rules read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.components import free_port
from tests.helpers.vmpair import Process, get
from tests.unit.exporters.expo_helpers import parse_exposition
from vigil.exporters.ibsim.tree import Tree

pytestmark = pytest.mark.integration

#: every node_exporter series the fabric rules (roles/vmalert/files/rules/vigil-fabric.yml) read
READ_BY_RULES = (
    "node_infiniband_state_id",
    "node_infiniband_symbol_error_total",
    "node_infiniband_link_error_recovery_total",
    "node_infiniband_link_downed_total",
)


def scrape(components: Path, root: Path, log: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    port = free_port()
    ne = Process(
        [str(components / "prometheus-node-exporter" / "bin" / "node_exporter"),
         f"--web.listen-address=127.0.0.1:{port}", f"--path.sysfs={root}", "--collector.disable-defaults",
         "--collector.infiniband"],
        log,
        ready=f"http://127.0.0.1:{port}/metrics",
    )  # fmt: skip
    ne.start()
    try:
        text = get(f"http://127.0.0.1:{port}/metrics").decode()
    finally:
        ne.stop()
    node = [
        ln
        for ln in text.splitlines()
        if ln.startswith("node_") or ln.startswith(("# HELP node_", "# TYPE node_"))
    ]
    # node_exporter's node_* families, through the strict parser (HELP, TYPE, each family once)
    return parse_exposition("\n".join(node) + "\n")


def test_node_exporter_reads_the_tree_and_its_faults(components: Path, tmp_path: Path) -> None:
    root = tmp_path / "sys"
    tree = Tree(root)
    tree.write(["mlx5_0", "mlx5_1"], ports=1, rate_gbps=400, now=1000.0)
    tree.advance(1060.0)
    fams = scrape(components, root, tmp_path / "ne1.log")
    assert fams["node_scrape_collector_success"] == [({"collector": "infiniband"}, 1.0)]
    for name in READ_BY_RULES:
        assert {lab["device"] for lab, _ in fams[name]} == {"mlx5_0", "mlx5_1"}, name
    assert {v for _, v in fams["node_infiniband_state_id"]} == {4.0}
    assert {v for _, v in fams["node_infiniband_rate_bytes_per_second"]} == {400 * 125_000_000.0}
    # the kernel's 32-bit words, back to bytes by node_exporter: 60 s at 30 % of 400 Gb/s
    received = dict((lab["device"], v) for lab, v in fams["node_infiniband_port_data_received_bytes_total"])
    assert received["mlx5_0"] == pytest.approx(60 * 400 * 125_000_000 * 0.3, rel=1e-6)

    tree.set_up("mlx5_1", 1, False, 1070.0)
    tree.add_errors("mlx5_0", 1, 1080.0, symbol_error=40, link_error_recovery=3)
    fams = scrape(components, root, tmp_path / "ne2.log")
    state = {lab["device"]: v for lab, v in fams["node_infiniband_state_id"]}
    assert state == {"mlx5_0": 4.0, "mlx5_1": 1.0}
    phys = {lab["device"]: v for lab, v in fams["node_infiniband_physical_state_id"]}
    assert phys == {"mlx5_0": 5.0, "mlx5_1": 3.0}
    errors = {name: {lab["device"]: v for lab, v in fams[name]} for name in READ_BY_RULES[1:]}
    assert errors["node_infiniband_symbol_error_total"] == {"mlx5_0": 40.0, "mlx5_1": 0.0}
    assert errors["node_infiniband_link_error_recovery_total"] == {"mlx5_0": 3.0, "mlx5_1": 0.0}
    assert errors["node_infiniband_link_downed_total"] == {"mlx5_0": 0.0, "mlx5_1": 1.0}
