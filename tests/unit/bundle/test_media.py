"""Split and join: a missing, reordered or altered part is named and nothing is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.factories import Member, craft_bundle, make_key, make_trust
from vigil.bundle.media import parse_size
from vigil.installer.cli import main


@pytest.fixture
def split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.setenv("VIGIL_HOME", str(tmp_path / "home"))
    k = make_key(tmp_path, "k")
    make_trust(tmp_path / "trust.json", [k])
    members = [Member("components/demo/blob", os.urandom(60_000))]
    b = craft_bundle(tmp_path / "out", [k], members=members)
    assert (
        main(
            [
                "bundle",
                "split",
                str(b.path),
                "--size",
                "10K",
                "--key",
                str(k.key_path),
                "--out",
                str(tmp_path / "media"),
            ]
        )
        == 0
    )
    return b.path, tmp_path / "media" / f"{b.path.name}.parts.json", tmp_path / "trust.json"


def join(index: Path, trust: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["bundle", "join", str(index), "--trust", str(trust), "--out", str(out)])
    return rc, capsys.readouterr().err.strip()


def test_parse_size() -> None:
    assert parse_size("4G") == 4 << 30
    assert parse_size("700M") == 700 << 20
    assert parse_size("512") == 512
    with pytest.raises(Exception, match="must be a positive number"):
        parse_size("four gigs")


def test_split_join_roundtrip(
    split: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, index, trust = split
    parts = sorted(index.parent.glob("*.part[0-9][0-9][0-9]"))
    assert len(parts) == -(-bundle.stat().st_size // 10240) and len(parts) > 3
    rc, err = join(index, trust, tmp_path / "joined.bundle", capsys)
    assert rc == 0, err
    assert (tmp_path / "joined.bundle").read_bytes() == bundle.read_bytes()
    assert main(["bundle", "verify", str(tmp_path / "joined.bundle"), "--trust", str(trust)]) == 0


def test_missing_part(
    split: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, index, trust = split
    (index.parent / f"{bundle.name}.part002").unlink()
    rc, err = join(index, trust, tmp_path / "j.bundle", capsys)
    assert rc != 0
    assert err.startswith(f"FAIL: {bundle.name}.part002: part 2 of ") and err.endswith("is missing")
    assert not (tmp_path / "j.bundle").exists()


def test_reordered_parts(
    split: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, index, trust = split
    p2, p3 = index.parent / f"{bundle.name}.part002", index.parent / f"{bundle.name}.part003"
    tmp = p2.with_suffix(".swap")
    p2.rename(tmp)
    p3.rename(p2)
    tmp.rename(p3)
    rc, err = join(index, trust, tmp_path / "j.bundle", capsys)
    assert err == f"FAIL: {bundle.name}.part002: holds the bytes of part 3: parts are out of order"
    assert rc != 0 and not (tmp_path / "j.bundle").exists()
    assert list(tmp_path.glob(".j.bundle*")) == []


def test_altered_part(
    split: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, index, trust = split
    p = index.parent / f"{bundle.name}.part003"
    data = bytearray(p.read_bytes())
    data[100] ^= 0xFF
    p.write_bytes(bytes(data))
    rc, err = join(index, trust, tmp_path / "j.bundle", capsys)
    assert rc != 0
    assert err.startswith(f"FAIL: {bundle.name}.part003: altered: sha256 ")
    assert not (tmp_path / "j.bundle").exists()


def test_index_signed_by_unknown_key(
    split: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, index, _ = split
    stranger = make_key(tmp_path, "stranger")
    make_trust(tmp_path / "other.json", [stranger])
    rc, err = join(index, tmp_path / "other.json", tmp_path / "j.bundle", capsys)
    assert rc != 0
    assert err == f"FAIL: {index.name}: 0 valid signature(s) from trusted keys, threshold is 1"
