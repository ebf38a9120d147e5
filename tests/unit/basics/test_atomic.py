"""Stage, then rename, attacked: planted links, failures half-way, modes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vigil.basics.atomic import atomic_writer, copy_file_atomic, write_file_atomic
from vigil.installer.lab._files import write as lab_write


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "dir" / "state.json"
    target.parent.mkdir()
    target.symlink_to(victim)
    write_file_atomic(target, b"new", mode=0o600)
    assert victim.read_text() == "keep"
    assert not target.is_symlink() and target.read_bytes() == b"new"
    assert oct(target.stat().st_mode & 0o777) == "0o600"


def test_links_planted_under_the_old_predictable_names_are_never_followed(tmp_path: Path) -> None:
    """The lab writes into a host's root file system, which the host's root controls: it may plant links
    under any name it can guess (the writer once used ``.NAME.vigil-tmp``)."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    root = tmp_path / "rootfs" / "etc"
    root.mkdir(parents=True)
    for guess in (".hosts.vigil-tmp", "hosts.tmp", ".hosts.tmp"):
        (root / guess).symlink_to(victim)
    lab_write(root / "hosts", "198.18.0.10 mon01\n", mode=0o644)
    assert victim.read_text() == "keep"
    assert (root / "hosts").read_text() == "198.18.0.10 mon01\n"


def test_a_failure_half_way_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "lock.yaml"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write(b"half of the new")
        raise RuntimeError("disk gone")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock.yaml"]


def test_content_is_private_until_it_is_complete(tmp_path: Path) -> None:
    target = tmp_path / "key"
    with atomic_writer(target, mode=0o644) as out:
        (staged,) = [p for p in tmp_path.iterdir() if p.name.startswith(".key.")]
        assert oct(staged.stat().st_mode & 0o777) == "0o600"
        out.write(b"x")
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def test_copy_keeps_bytes_and_sets_the_mode(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(os.urandom(3 << 20))
    copy_file_atomic(src, tmp_path / "dst", mode=0o755)
    assert (tmp_path / "dst").read_bytes() == src.read_bytes()
    assert oct((tmp_path / "dst").stat().st_mode & 0o777) == "0o755"
