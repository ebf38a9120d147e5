"""The simulated InfiniBand tree: its layout and values, its faults, and what it refuses to write through.

node_exporter reading it is tests/integration/test_fabric.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vigil.exporters.ibsim.__main__ import main
from vigil.exporters.ibsim.tree import COUNTERS, Tree, TreeError


def read(root: Path, *parts: str) -> str:
    return root.joinpath("class", "infiniband", *parts).read_text().strip()


def test_a_new_tree_is_laid_out_as_the_kernel_does(tmp_path: Path) -> None:
    Tree(tmp_path).write(["mlx5_0", "mlx5_1"], ports=2, rate_gbps=200, now=1000.0)
    for dev in ("mlx5_0", "mlx5_1"):
        assert read(tmp_path, dev, "fw_ver") and read(tmp_path, dev, "hca_type") == "MT4129"
        for port in ("1", "2"):
            assert read(tmp_path, dev, "ports", port, "state") == "4: ACTIVE"
            assert read(tmp_path, dev, "ports", port, "phys_state") == "5: LinkUp"
            assert read(tmp_path, dev, "ports", port, "rate") == "200 Gb/sec (4X NDR)"
            names = sorted(os.listdir(tmp_path / "class/infiniband" / dev / "ports" / port / "counters"))
            assert names == sorted(COUNTERS)
            assert all(read(tmp_path, dev, "ports", port, "counters", n) == "0" for n in names)
    # nothing but the HCAs in class/infiniband: every entry there is read as one
    assert sorted(os.listdir(tmp_path / "class/infiniband")) == ["mlx5_0", "mlx5_1"]


def test_traffic_grows_while_up_and_faults_show_as_the_kernel_shows_them(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    tree.write(["mlx5_0"], now=1000.0)
    tree.advance(1010.0)
    data = int(read(tmp_path, "mlx5_0", "ports", "1", "counters", "port_rcv_data"))
    assert data == int(10 * 400 * 125_000_000 * 0.3 / 4)  # 32-bit words: the kernel's unit
    tree.set_up("mlx5_0", 1, False, 1020.0)
    assert read(tmp_path, "mlx5_0", "ports", "1", "state") == "1: DOWN"
    assert read(tmp_path, "mlx5_0", "ports", "1", "phys_state") == "3: Disabled"
    assert read(tmp_path, "mlx5_0", "ports", "1", "counters", "link_downed") == "1"
    tree.set_up("mlx5_0", 1, False, 1030.0)  # already down: not counted again
    assert read(tmp_path, "mlx5_0", "ports", "1", "counters", "link_downed") == "1"
    tree.add_errors("mlx5_0", 1, 1040.0, symbol_error=25, link_error_recovery=2)
    tree.add_errors("mlx5_0", 1, 1050.0, symbol_error=5)
    assert read(tmp_path, "mlx5_0", "ports", "1", "counters", "symbol_error") == "30"
    assert read(tmp_path, "mlx5_0", "ports", "1", "counters", "link_error_recovery") == "2"
    tree.set_up("mlx5_0", 1, True, 1060.0)
    assert read(tmp_path, "mlx5_0", "ports", "1", "state") == "4: ACTIVE"
    # counters never go down
    assert int(read(tmp_path, "mlx5_0", "ports", "1", "counters", "port_rcv_data")) >= data


@pytest.mark.parametrize("name", ["../etc", "mlx5_0/..", "", "MLX5", "mlx5 0", "a" * 40, "mlx5_0\n"])
def test_a_device_name_that_is_not_one_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(TreeError, match="expected a name such as mlx5_0"):
        Tree(tmp_path).write([name])
    assert not (tmp_path / "etc").exists()


def test_nothing_is_written_through_a_symbolic_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    # the class directory a link elsewhere
    root = tmp_path / "root"
    (root / "class").mkdir(parents=True)
    (root / "class" / "infiniband").symlink_to(outside)
    with pytest.raises(TreeError, match="not a directory"):
        Tree(root).write(["mlx5_0"])
    assert list(outside.iterdir()) == []
    # a counter file swapped for a link to a file the writer must not touch
    good = tmp_path / "good"
    tree = Tree(good)
    tree.write(["mlx5_0"], now=1.0)
    victim = outside / "victim"
    victim.write_text("keep\n")
    counter = good / "class/infiniband/mlx5_0/ports/1/counters/symbol_error"
    counter.unlink()
    counter.symlink_to(victim)
    with pytest.raises(TreeError, match="not a regular file"):
        tree.add_errors("mlx5_0", 1, 2.0, symbol_error=1)
    assert victim.read_text() == "keep\n"
    # a ports directory swapped for a link
    ports = good / "class/infiniband/mlx5_0/ports/1"
    ports.rename(good / "moved")
    ports.symlink_to(outside)
    with pytest.raises(TreeError, match="not a directory"):
        tree.advance(3.0)
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]


def test_a_broken_state_and_an_unknown_port_get_one_line(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    with pytest.raises(TreeError, match="no simulated tree here"):
        tree.advance(1.0)
    tree.write(["mlx5_0"])
    with pytest.raises(TreeError, match="mlx5_0 port 2: not in the tree"):
        tree.set_up("mlx5_0", 2, False, 1.0)
    with pytest.raises(TreeError, match="not an error counter"):
        tree.add_errors("mlx5_0", 1, 1.0, port_rcv_data=5)
    with pytest.raises(TreeError, match="not an error counter"):
        tree.add_errors("mlx5_0", 1, 1.0, symbol_error=-5)
    (tmp_path / ".vigil-ibsim.json").write_text("{not json")
    with pytest.raises(TreeError, match="unreadable"):
        tree.advance(1.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["write", "{root}", "--devices", "../x"], "expected a name such as mlx5_0"),
        (["write", "{root}", "--ports", "0"], "1 to 8 ports"),
        (["fault", "{root}", "mlx5_0:x", "down"], "expected DEVICE or DEVICE:PORT"),
        (["fault", "{root}", "mlx5_0", "errors"], "give --symbol N"),
        (["advance", "{root}"], "no simulated tree here"),
    ],
)
def test_bad_commands_get_one_line(
    tmp_path: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([a.format(root=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("FAIL: vigil-ibsim: ") and message in err


def test_the_command_line_writes_and_faults(tmp_path: Path) -> None:
    assert main(["write", str(tmp_path), "--devices", "mlx5_0,mlx5_1"]) == 0
    assert main(["fault", str(tmp_path), "mlx5_1:1", "down"]) == 0
    assert main(["fault", str(tmp_path), "mlx5_0", "errors", "--symbol", "12"]) == 0
    assert read(tmp_path, "mlx5_1", "ports", "1", "state") == "1: DOWN"
    assert read(tmp_path, "mlx5_0", "ports", "1", "counters", "symbol_error") == "12"
