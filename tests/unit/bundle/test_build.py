"""Building bundles: byte-identical rebuilds, the stock minisign and GNU tar read what we write."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
import zstandard

from tests.factories import KeyPair, StagedFile, make_key
from vigil.bundle.build import build_bundle
from vigil.bundle.errors import BundleError
from vigil.bundle.inspect import inspect_bundle
from vigil.bundle.trust import new_root
from vigil.bundle.verify import verify_bundle

CREATED = datetime(2026, 11, 1, tzinfo=UTC)


def staged_tree(root: Path) -> list[StagedFile]:
    root.mkdir(parents=True, exist_ok=True)
    rnd = __import__("random").Random(7)
    (root / "big").write_bytes(bytes(rnd.getrandbits(8) for _ in range(300_000)) + b"x" * 2_000_000)
    (root / "tool").write_bytes(b"#!/bin/sh\nexit 0\n")
    os.chmod(root / "tool", 0o755)
    (root / "w.whl").write_bytes(b"PK" + bytes(1000))
    return [
        StagedFile("components/demo/share/big", root / "big"),
        StagedFile("components/demo/bin/tool", root / "tool", 0o755),
        StagedFile(
            "wheels/pyyaml-6.0.2-cp311-cp311-manylinux_2_17_x86_64.whl",
            root / "w.whl",
            component="wheels",
            version="6.0.2",
            license="MIT",
        ),
    ]


def build(tmp: Path, keys: list[KeyPair], out: str, **kw: object) -> Path:
    (tmp / out).mkdir(parents=True, exist_ok=True)
    return build_bundle(
        staged_tree(tmp / "src"),
        version=kw.pop("version", 4),
        arch="amd64",
        channel="test",  # type: ignore[arg-type]
        keys=[k.key for k in keys],
        out_dir=tmp / out,
        min_vigil_version="0.1.0",
        builder_version="0.1.0",
        created=CREATED,
        kinds={"demo": "url", "wheels": "wheel"},
        **kw,  # type: ignore[arg-type]
    )


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    k1, k2 = make_key(tmp_path, "k1"), make_key(tmp_path, "k2")
    a = build(tmp_path, [k1, k2], "a")
    b = build(tmp_path, [k2, k1], "b")
    assert a.name == "vigil-4-amd64.bundle"
    assert a.read_bytes() == b.read_bytes()


def test_rebuild_identical_under_source_date_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    k = make_key(tmp_path, "k")
    out = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        out.append(
            build_bundle(
                staged_tree(tmp_path / "src"),
                version=1,
                arch="amd64",
                channel="test",
                keys=[k.key],
                out_dir=tmp_path / name,
                min_vigil_version="0.1.0",
                builder_version="0.1.0",
            )
        )
    assert out[0].read_bytes() == out[1].read_bytes()
    assert inspect_bundle(out[0])["created"] == "2026-01-01T00:00:00Z"


def test_payload_is_a_plain_deterministic_tar(tmp_path: Path) -> None:
    k = make_key(tmp_path, "k")
    path = build(tmp_path, [k], "a")
    with tarfile.open(path) as outer:
        assert outer.getnames()[0] == "manifest.json"
        assert outer.getnames()[-1] == "payload.tar.zst"
        payload = outer.extractfile("payload.tar.zst").read()  # type: ignore[union-attr]
    inner = zstandard.ZstdDecompressor().stream_reader(payload)
    with tarfile.open(fileobj=inner, mode="r|") as tar:
        infos = list(tar)
    assert infos[0].name == "sbom.cdx.json"
    assert [i.name for i in infos[1:]] == sorted(i.name for i in infos[1:])
    for info in infos:
        assert (info.uid, info.gid, info.uname, info.gname, info.mtime) == (
            0,
            0,
            "",
            "",
            int(CREATED.timestamp()),
        )
        assert info.mode in (0o644, 0o755)


def test_stock_minisign_verifies_the_manifest(tmp_path: Path) -> None:
    minisign = shutil.which("minisign")
    if minisign is None:
        pytest.fail("minisign is not installed; `make test` installs it via scripts/system-deps.sh")
    k1, k2 = make_key(tmp_path, "k1"), make_key(tmp_path, "k2")
    path = build(tmp_path, [k1, k2], "a")
    ex = tmp_path / "ex"
    ex.mkdir()
    subprocess.run(["tar", "-xf", str(path), "-C", str(ex), "manifest.json", "signatures"], check=True)
    for kp in (k1, k2):
        sig = ex / "signatures" / f"{kp.pub.id_hex}.minisig"
        res = subprocess.run(
            [minisign, "-V", "-m", str(ex / "manifest.json"), "-x", str(sig), "-p", str(kp.pub_path)],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, res.stderr
        assert "Signature and comment signature verified" in res.stdout
        assert "vigil bundle vigil-4-amd64.bundle version:4" in res.stdout
    # and it refuses an edited manifest
    (ex / "manifest.json").write_bytes(
        (ex / "manifest.json").read_bytes().replace(b'"version": 4', b'"version": 5')
    )
    res = subprocess.run(
        [
            minisign,
            "-V",
            "-m",
            str(ex / "manifest.json"),
            "-x",
            str(ex / "signatures" / f"{k1.pub.id_hex}.minisig"),
            "-p",
            str(k1.pub_path),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode != 0
    assert "Signature verification failed" in res.stderr


def test_sbom_lists_components_with_purls(tmp_path: Path) -> None:
    import json

    k = make_key(tmp_path, "k")
    path = build(tmp_path, [k], "a")
    info = inspect_bundle(path)
    assert info["sbom"]["format"] == "CycloneDX 1.6"
    assert info["sbom"]["components"] == 2
    root = new_root([k.pub], 1)
    store = tmp_path / "x"
    store.mkdir()
    verify_bundle(path, root, vigil_version="0.1.0", extract_to=store, now=CREATED)
    sbom = json.loads((store / "sbom.cdx.json").read_text())
    purls = sorted(c["purl"] for c in sbom["components"])
    assert purls == [
        "pkg:generic/demo@1.0?download_url=https://example.invalid/demo-1.0.tar.gz",
        "pkg:pypi/pyyaml@6.0.2",
    ]


def test_build_refuses_bad_inputs(tmp_path: Path) -> None:
    k = make_key(tmp_path, "k")
    with pytest.raises(BundleError, match="at least one --key"):
        build(tmp_path, [], "a")
    with pytest.raises(BundleError, match="bundle versions are integers from 1 up"):
        build(tmp_path, [k], "b", version=0)
    files = staged_tree(tmp_path / "src")
    files.append(StagedFile("../escape", files[0].source))
    (tmp_path / "c").mkdir()
    with pytest.raises(BundleError, match="cannot go into a payload: '..' in path"):
        build_bundle(
            files,
            version=1,
            arch="amd64",
            channel="t",
            keys=[k.key],
            out_dir=tmp_path / "c",
            min_vigil_version="0.1.0",
            builder_version="0.1.0",
        )
    assert list((tmp_path / "c").iterdir()) == []
