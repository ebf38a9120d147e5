"""Keys, minisign signature format, trust roots and their rotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import make_key, make_trust
from vigil.bundle.errors import KeyFileError, SignatureError, TrustError
from vigil.bundle.signing import Minisig, load_signing_key
from vigil.bundle.trust import check_rotation, load_root, new_root
from vigil.installer.cli import main


def test_generate_writes_0600_key_and_refuses_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_HOME", str(tmp_path / "home"))
    assert main(["keys", "generate", "--out", str(tmp_path / "release")]) == 0
    assert (tmp_path / "release.key").stat().st_mode & 0o777 == 0o600
    pub = (tmp_path / "release.pub").read_text().splitlines()
    assert pub[0].startswith("untrusted comment: minisign public key ")
    before = (tmp_path / "release.key").read_bytes()
    capsys.readouterr()
    assert main(["keys", "generate", "--out", str(tmp_path / "release")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"FAIL: {tmp_path / 'release.key'}: already exists; refusing to overwrite a key"
    )
    assert (tmp_path / "release.key").read_bytes() == before


def test_passphrase_protects_key(tmp_path: Path) -> None:
    kp = make_key(tmp_path, "locked", passphrase=b"correct horse")
    assert b"ENCRYPTED" in kp.key_path.read_bytes()
    with pytest.raises(KeyFileError, match="key is encrypted; give --passphrase-file"):
        load_signing_key(kp.key_path)
    with pytest.raises(KeyFileError, match="wrong passphrase"):
        load_signing_key(kp.key_path, b"wrong")
    assert load_signing_key(kp.key_path, b"correct horse").id_hex == kp.pub.id_hex


def test_group_readable_key_is_refused(tmp_path: Path) -> None:
    kp = make_key(tmp_path, "loose")
    kp.key_path.chmod(0o640)
    with pytest.raises(KeyFileError, match=r"readable by others \(mode 0640\)"):
        load_signing_key(kp.key_path)


def test_minisig_roundtrip_and_tamper(tmp_path: Path) -> None:
    kp = make_key(tmp_path, "k")
    sig = kp.key.sign_minisig(b"message", trusted_comment="hello")
    parsed = Minisig.parse(sig.to_text(), where="x")
    assert parsed == sig
    kp.pub.verify_minisig(b"message", parsed, what="m")
    with pytest.raises(SignatureError, match="does not match"):
        kp.pub.verify_minisig(b"messagf", parsed, what="m")
    with pytest.raises(SignatureError, match="signature file has 3 lines"):
        Minisig.parse("\n".join(sig.to_text().splitlines()[:3]), where="x")


def test_trust_root_validation(tmp_path: Path) -> None:
    a, b = make_key(tmp_path, "a"), make_key(tmp_path, "b")
    with pytest.raises(TrustError, match="threshold 3 must be between 1 and 2"):
        new_root([a.pub, b.pub], 3)
    with pytest.raises(TrustError, match="the same key is listed twice"):
        new_root([a.pub, a.pub], 1)
    path = tmp_path / "t.json"
    make_trust(path, [a, b], threshold=2)
    doc = json.loads(path.read_text())
    doc["signed"]["keys"][0]["id"] = "0000000000000000"
    path.write_text(json.dumps(doc))
    with pytest.raises(TrustError, match="does not match its public key"):
        load_root(path)


def test_rotation_needs_threshold_of_current_keys(tmp_path: Path) -> None:
    a, b, c = make_key(tmp_path, "a"), make_key(tmp_path, "b"), make_key(tmp_path, "c")
    current = make_trust(tmp_path / "v1.json", [a, b], threshold=2)
    nxt = new_root([b.pub, c.pub], 1, version=2)
    with pytest.raises(TrustError, match=r"signed by 0 key\(s\) of the current trust root, 2 required"):
        check_rotation(current, nxt, where="v2")
    nxt.sign(a.key)
    nxt.sign(c.key)  # a new key's signature does not count towards the old threshold
    with pytest.raises(TrustError, match=r"signed by 1 key\(s\) of the current trust root, 2 required"):
        check_rotation(current, nxt, where="v2")
    nxt.sign(b.key)
    assert check_rotation(current, nxt, where="v2") == sorted([a.pub.id_hex, b.pub.id_hex])
    stale = new_root([c.pub], 1, version=1)
    stale.sign(a.key)
    stale.sign(b.key)
    with pytest.raises(TrustError, match="version 1 is not newer than the current trust root's 1"):
        check_rotation(current, stale, where="v1b")


def test_trust_install_rotation_via_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    a, b = make_key(tmp_path, "a"), make_key(tmp_path, "b")
    assert (
        main(
            [
                "trust",
                "init",
                "--key",
                str(a.pub_path),
                "--threshold",
                "1",
                "--out",
                str(tmp_path / "v1.json"),
            ]
        )
        == 0
    )
    assert main(["trust", "install", str(tmp_path / "v1.json")]) == 0
    assert (
        main(
            [
                "trust",
                "init",
                "--key",
                str(b.pub_path),
                "--threshold",
                "1",
                "--version",
                "2",
                "--out",
                str(tmp_path / "v2.json"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    installed = (home / "trust" / "root.json").read_bytes()
    assert main(["trust", "install", str(tmp_path / "v2.json")]) == 1
    assert "signed by 0 key(s) of the current trust root, 1 required" in capsys.readouterr().err
    assert (home / "trust" / "root.json").read_bytes() == installed
    assert main(["trust", "sign", str(tmp_path / "v2.json"), "--key", str(a.key_path)]) == 0
    capsys.readouterr()
    assert main(["trust", "install", str(tmp_path / "v2.json")]) == 1  # b, the added key, has not signed
    assert f"added key {b.pub.id_hex} did not sign this root" in capsys.readouterr().err
    assert (home / "trust" / "root.json").read_bytes() == installed
    assert main(["trust", "sign", str(tmp_path / "v2.json"), "--key", str(b.key_path)]) == 0
    assert main(["trust", "install", str(tmp_path / "v2.json")]) == 0
    assert load_root(home / "trust" / "root.json").version == 2
