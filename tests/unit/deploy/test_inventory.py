"""Bad inventories are refused before anything runs, each with one line naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from vigil.installer.deploy.artifacts import DeployError
from vigil.installer.deploy.inventory import load_inventory

GOOD = """
all:
  vars:
    ansible_user: root
  children:
    monitoring:
      hosts:
        mon01: {ansible_host: 198.18.0.10}
    slurm_controller:
      hosts:
        ctl01: {ansible_host: 198.18.0.11}
    gpu_nodes:
      hosts:
        gpu01: {ansible_host: 198.18.0.21}
        gpu02: {ansible_host: 198.18.0.22}
"""


def write(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "inv"
    d.mkdir()
    (d / "hosts.yml").write_text(text)
    return d


def test_good_inventory(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, GOOD))
    assert inv.hosts == ["ctl01", "gpu01", "gpu02", "mon01"]
    assert inv.groups["gpu_nodes"] == ["gpu01", "gpu02"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD.replace("monitoring:", "monitring:"),
            "group 'monitring' is not one vigil knows (monitoring, slurm_controller, gpu_nodes)",
        ),
        (
            GOOD + "  hosts:\n    stray01: {ansible_host: 198.18.0.30}\n",
            "host 'stray01' is in none of the groups monitoring, slurm_controller, gpu_nodes",
        ),
        (
            GOOD.replace("gpu02: {ansible_host: 198.18.0.22}", "gpu02: {}"),
            "host 'gpu02' lacks required variable ansible_host",
        ),
        (
            GOOD.replace("mon01: {ansible_host: 198.18.0.10}", "{}").replace(
                "monitoring:\n      hosts:\n        {}", "monitoring: {}"
            ),
            "group 'monitoring' needs at least one host",
        ),
    ],
    ids=["unknown-group", "host-in-no-group", "missing-ansible_host", "empty-monitoring"],
)
def test_bad_inventory(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DeployError) as err:
        load_inventory(write(tmp_path, text))
    assert message in str(err.value)
    assert str(err.value).startswith(str(tmp_path / "inv"))


def test_site_groups_can_be_declared(tmp_path: Path) -> None:
    text = GOOD.replace(
        "  vars:\n    ansible_user: root", "  vars:\n    ansible_user: root\n    vigil_site_groups: [rack1]"
    )
    text += "    rack1:\n      hosts:\n        gpu01:\n"
    assert "gpu01" in load_inventory(write(tmp_path, text)).hosts


def test_missing_inventory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeployError, match="has no hosts.yml"):
        load_inventory(tmp_path / "empty")
