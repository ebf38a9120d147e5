"""Every way a bundle must be rejected, each its own case, on a crafted but correctly signed bundle.

Each case checks three things: ``vigil bundle verify`` exits non-zero with one ``FAIL:`` line
naming the object and the reason; ``vigil bundle import`` refuses it the same way; and the
store is byte-for-byte what it was before.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.factories import (
    Member,
    craft_bundle,
    default_members,
    make_key,
    make_store_env,
    make_trust,
    payload_offset,
    rewrite_container,
    tree_snapshot,
)
from tests.factories import (
    StoreEnv as Env,
)
from vigil.installer.cli import main


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_store_env(tmp_path, monkeypatch.setenv)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(args)
    err = capsys.readouterr().err.strip()
    return rc, err


def assert_rejected(env: Env, bundle: Path, capsys: pytest.CaptureFixture[str], *expected: str) -> None:
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "verify", "--deep", str(bundle), "--trust", str(env.trust)], capsys)
    assert rc != 0
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("FAIL: "), err
    for text in expected:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
    rc, err2 = run(["bundle", "import", str(bundle), "--trust", str(env.trust)], capsys)
    assert rc != 0
    assert err2 == err, "import must refuse with the same reason as verify"
    assert tree_snapshot(env.home / "bundles") == before, "a refused import changed the store"


def test_good_bundle_verifies_and_imports(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    rc, _ = run(["bundle", "verify", str(b.path), "--trust", str(env.trust)], capsys)
    assert rc == 0
    assert main(["bundle", "import", str(b.path), "--trust", str(env.trust)]) == 0
    assert (env.home / "bundles" / "2" / "files" / "components/demo/bin/demo").stat().st_mode & 0o777 == 0o755
    assert (env.home / "bundles" / "highest").read_text().strip() == "2"


# 1-2: signatures and trust


def test_unknown_key(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.other], version=2)
    assert_rejected(
        env,
        b.path,
        capsys,
        "manifest.json",
        "0 valid signature(s) from trusted keys, threshold is 1",
        f"unknown key {env.other.key.id_hex}",
    )


def test_too_few_signatures(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    second = make_key(env.tmp / "keys", "second")
    make_trust(env.tmp / "trust2.json", [env.key, second], threshold=2)
    env.trust = env.tmp / "trust2.json"
    b = craft_bundle(env.out, [env.key], version=2)
    assert_rejected(env, b.path, capsys, "1 valid signature(s) from trusted keys, threshold is 2")


def test_no_signatures(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [], version=2)
    assert_rejected(env, b.path, capsys, "manifest.json: has no signatures")


def test_manifest_edited_after_signing(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    edited = b.manifest_bytes.replace(b'"version": 2', b'"version": 9')
    assert edited != b.manifest_bytes
    dst = env.out / "edited.bundle"
    rewrite_container(b.path, dst, manifest=edited)
    assert_rejected(
        env, dst, capsys, "manifest.json", f"signature by key {env.key.key.id_hex} does not match"
    )


def test_trusted_comment_altered(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    kid = env.key.key.id_hex
    sig = b.signatures[kid].replace(b"trusted comment: test bundle v2", b"trusted comment: test bundle v3")
    dst = env.out / "comment.bundle"
    rewrite_container(b.path, dst, signatures={kid: sig})
    assert_rejected(env, dst, capsys, "trusted comment", "was altered")


def test_signature_filed_under_another_key_id(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.other], version=2)
    dst = env.out / "misfiled.bundle"
    rewrite_container(b.path, dst, signatures={env.key.key.id_hex: b.signatures[env.other.key.id_hex]})
    assert_rejected(
        env,
        dst,
        capsys,
        f"signatures/{env.key.key.id_hex}.minisig",
        f"holds a signature by key {env.other.key.id_hex}",
    )


# 7-8: payload bytes


def test_payload_byte_changed(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    offset, size = payload_offset(b.path)
    data = bytearray(b.path.read_bytes())
    data[offset + size // 2] ^= 0x01
    b.path.write_bytes(bytes(data))
    assert_rejected(env, b.path, capsys, "payload.tar.zst", "altered", "differs from the signed manifest")


def test_file_content_differs_from_manifest(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = default_members()
    listed = [Member(m.name, m.data, m.mode) for m in members]
    listed[1] = Member(members[1].name, members[1].data.replace(b"a demo", b"A demo"), members[1].mode)
    b = craft_bundle(env.out, [env.key], version=2, members=members, manifest_members=listed)
    assert_rejected(
        env, b.path, capsys, "components/demo/share/readme.txt", "sha256", "differs from the manifest"
    )


def test_file_missing(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = default_members()
    b = craft_bundle(env.out, [env.key], version=2, members=members[:2], manifest_members=members)
    assert_rejected(env, b.path, capsys, "wheels/demo-1.0-py3-none-any.whl", "missing from the payload")


def test_file_not_in_manifest(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = default_members()
    extra = [*members, Member("components/demo/bin/backdoor", b"#!/bin/sh\n", 0o755)]
    b = craft_bundle(env.out, [env.key], version=2, members=extra, manifest_members=members)
    assert_rejected(env, b.path, capsys, "components/demo/bin/backdoor", "not in the manifest")


def test_duplicate_name(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = default_members()
    dup = [*members, Member(members[0].name, members[0].data, members[0].mode)]
    b = craft_bundle(env.out, [env.key], version=2, members=dup, manifest_members=members)
    assert_rejected(env, b.path, capsys, members[0].name, "appears twice in the payload")


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (Member("/etc/cron.d/evil", b"* * * * * root sh\n"), "absolute path"),
        (Member("components/../../etc/evil", b"x"), "'..' in path"),
        (
            Member("components/demo/link", type=tarfile.SYMTYPE, linkname="/etc/shadow"),
            "symlink to '/etc/shadow' leaves the bundle",
        ),
        (
            Member("components/demo/up", type=tarfile.SYMTYPE, linkname="../../../../root/.ssh"),
            "leaves the bundle",
        ),
        (
            Member("components/demo/hard", type=tarfile.LNKTYPE, linkname="../../etc/passwd"),
            "hardlink to '../../etc/passwd' leaves the bundle",
        ),
        (
            Member("components/demo/inner", type=tarfile.SYMTYPE, linkname="bin/demo"),
            "symlink entries are not allowed",
        ),
        (Member("components/demo/dev", type=tarfile.CHRTYPE), "device or fifo entries are not allowed"),
        (Member("components/demo/fifo", type=tarfile.FIFOTYPE), "device or fifo entries are not allowed"),
    ],
    ids=[
        "absolute",
        "dotdot",
        "symlink-absolute",
        "symlink-dotdot",
        "hardlink-dotdot",
        "symlink-inside",
        "char-device",
        "fifo",
    ],
)
def test_hostile_member(env: Env, capsys: pytest.CaptureFixture[str], member: Member, reason: str) -> None:
    members = default_members()
    b = craft_bundle(env.out, [env.key], version=2, members=[*members, member], manifest_members=members)
    assert_rejected(env, b.path, capsys, reason)
    assert not Path("/etc/cron.d/evil").exists()


def test_size_lie_in_payload_header(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = default_members()
    members[0].size = len(members[0].data) + 512
    listed = default_members()
    listed[0] = Member(members[0].name, members[0].data, members[0].mode)
    b = craft_bundle(env.out, [env.key], version=2, members=members, manifest_members=listed)
    assert_rejected(env, b.path, capsys, members[0].name, "size lie")


def test_manifest_size_smaller_than_file(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def shrink(m: dict[str, Any]) -> None:
        m["files"][0]["size"] -= 10

    b = craft_bundle(env.out, [env.key], version=2, edit=shrink)
    assert_rejected(env, b.path, capsys, "size lie", "manifest says")


def test_payload_size_lie(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def grow(m: dict[str, Any]) -> None:
        m["payload"]["size"] += 100
        m["payload"]["frames"][-1] += 100

    b = craft_bundle(env.out, [env.key], version=2, edit=grow)
    assert_rejected(env, b.path, capsys, "payload.tar.zst", "size lie")


# 1: layout


def test_truncated_bundle(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    data = b.path.read_bytes()
    b.path.write_bytes(data[: len(data) - 3000])
    assert_rejected(env, b.path, capsys, b.path.name, "truncated")


def test_trailing_garbage(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    with open(b.path, "ab") as fh:
        fh.write(b"GARBAGE")
    assert_rejected(env, b.path, capsys, "7 bytes of trailing data after the end of the bundle")


def test_not_a_bundle(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    p = env.out / "vigil-2-amd64.bundle"
    p.write_bytes(b"\x7fELF" + bytes(2000))
    assert_rejected(env, p, capsys, p.name, "not a vigil bundle: not a tar archive")


def test_damaged_tar_header(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """A real bundle whose first header lost a byte is a damaged bundle, not "not a bundle"."""
    b = craft_bundle(env.out, [env.key], version=2)
    data = bytearray(b.path.read_bytes())
    data[20] ^= 0x01  # inside the first member's name field: its checksum no longer matches
    b.path.write_bytes(bytes(data))
    assert_rejected(env, b.path, capsys, b.path.name, "corrupt tar header: checksum mismatch")


# 3-5: manifest content


def test_expired(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    from datetime import UTC, datetime

    b = craft_bundle(env.out, [env.key], version=2, created=datetime(2024, 1, 1, tzinfo=UTC), valid_days=30)
    assert_rejected(env, b.path, capsys, "expired on 2024-01-31T00:00:00Z")


def test_min_version_too_high(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def future(m: dict[str, Any]) -> None:
        m["min_vigil_version"] = "99.0.0"

    b = craft_bundle(env.out, [env.key], version=2, edit=future)
    assert_rejected(env, b.path, capsys, "needs vigil >= 99.0.0", "upgrade vigil first")


def test_malformed_manifest_not_json(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2, raw_manifest=b'{"format": "vigil-bundle/1", "version": ')
    assert_rejected(env, b.path, capsys, "manifest.json", "malformed: not JSON")


def test_malformed_manifest_wrong_type(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def stringly(m: dict[str, Any]) -> None:
        m["files"][1]["size"] = "163"

    b = craft_bundle(env.out, [env.key], version=2, edit=stringly)
    assert_rejected(
        env, b.path, capsys, "manifest.json", "malformed: field 'files[1].size' must be an integer"
    )


def test_frames_do_not_add_up(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def split_wrong(m: dict[str, Any]) -> None:
        m["payload"]["frames"] = [m["payload"]["size"] - 10]

    b = craft_bundle(env.out, [env.key], version=2, edit=split_wrong)
    assert_rejected(env, b.path, capsys, "malformed: field 'payload.frames' add up to")


def test_frame_larger_than_declared(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def small_frames(m: dict[str, Any]) -> None:
        m["payload"]["frame_bytes"] = 1024  # the real frame holds more: a decompression bomb guard

    b = craft_bundle(env.out, [env.key], version=2, edit=small_frames)
    assert_rejected(env, b.path, capsys, "payload.tar.zst", "more than 1024")


def test_malformed_manifest_missing_field(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def drop(m: dict[str, Any]) -> None:
        del m["payload"]["sha256"]

    b = craft_bundle(env.out, [env.key], version=2, edit=drop)
    assert_rejected(env, b.path, capsys, "malformed: field 'payload.sha256' is missing")


def test_manifest_lists_absolute_path(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def absolute(m: dict[str, Any]) -> None:
        m["files"][0]["path"] = "/usr/bin/demo"

    b = craft_bundle(env.out, [env.key], version=2, edit=absolute)
    assert_rejected(env, b.path, capsys, "/usr/bin/demo", "absolute path")


# 6: rollback


def test_rollback_refused_then_allowed(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    v3 = craft_bundle(env.out, [env.key], version=3)
    assert main(["bundle", "import", str(v3.path), "--trust", str(env.trust)]) == 0
    v2 = craft_bundle(env.out, [env.key], version=2)
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "import", str(v2.path), "--trust", str(env.trust)], capsys)
    assert rc != 0
    assert err == (
        f"FAIL: {v2.path.name}: version 2 is not newer than the highest imported (3); "
        "pass --allow-downgrade to import it anyway"
    )
    assert tree_snapshot(env.home / "bundles") == before
    assert main(["bundle", "import", str(v2.path), "--trust", str(env.trust), "--allow-downgrade"]) == 0
    assert (env.home / "bundles" / "2" / "import.json").exists()
    assert (env.home / "bundles" / "highest").read_text().strip() == "3"


def test_same_version_different_content_refused(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = default_members()
    members[1] = Member(members[1].name, b"other content\n")
    b = craft_bundle(env.out, [env.key], version=1, members=members, name="other-1.bundle")
    assert_rejected_import_only(
        env, b.path, capsys, "version 1 is already imported with a different manifest"
    )


def assert_rejected_import_only(
    env: Env, bundle: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "import", str(bundle), "--trust", str(env.trust), "--allow-downgrade"], capsys)
    assert rc != 0 and text in err, err
    assert tree_snapshot(env.home / "bundles") == before


def test_reimport_same_bundle_is_a_no_op(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    assert main(["bundle", "import", str(b.path), "--trust", str(env.trust)]) == 0
    before = tree_snapshot(env.home / "bundles")
    capsys.readouterr()
    assert main(["bundle", "import", str(b.path), "--trust", str(env.trust)]) == 0
    assert "already imported" in capsys.readouterr().out
    assert tree_snapshot(env.home / "bundles") == before


def test_a_damaged_copy_of_an_imported_bundle_is_refused_not_called_imported(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    assert main(["bundle", "import", str(b.path), "--trust", str(env.trust)]) == 0
    before = tree_snapshot(env.home / "bundles")
    # the same signed manifest, one payload byte flipped: a copy gone bad on the way in
    copy = env.out / "copy-2.bundle"
    data = bytearray(b.path.read_bytes())
    offset, size = payload_offset(b.path)
    data[offset + size // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    capsys.readouterr()
    rc, err = run(["bundle", "import", str(copy), "--trust", str(env.trust)], capsys)
    assert rc != 0
    assert len(err.splitlines()) == 1 and err.startswith("FAIL: "), err
    assert "payload.tar.zst" in err and "altered" in err, err
    assert "already imported" not in err
    assert tree_snapshot(env.home / "bundles") == before


# The default verify: every byte through the payload's signed sha256, nothing decompressed


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_verify_without_deep_refuses_any_payload_byte_changed(
    env: Env, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    offset, size = payload_offset(b.path)
    data = bytearray(b.path.read_bytes())
    data[offset + {"first": 0, "middle": size // 2, "last": size - 1}[where]] ^= 0x80
    b.path.write_bytes(bytes(data))
    rc, err = run(["bundle", "verify", str(b.path), "--trust", str(env.trust)], capsys)
    assert rc != 0
    assert err.startswith(f"FAIL: {b.path.name}: payload.tar.zst: altered: sha256 "), err
    assert "differs from the signed manifest" in err


def test_a_signed_bundle_with_a_lying_member_passes_the_byte_check_and_fails_deep_and_import(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the signer signed is what the shallow check proves; what the payload's members are is
    checked where it is unpacked (import) and by --deep."""
    members = default_members()
    listed = [Member(m.name, m.data, m.mode) for m in members]
    listed[1] = Member(members[1].name, members[1].data.replace(b"a demo", b"A demo"), members[1].mode)
    b = craft_bundle(env.out, [env.key], version=2, members=members, manifest_members=listed)
    capsys.readouterr()
    assert main(["bundle", "verify", str(b.path), "--trust", str(env.trust)]) == 0
    out = capsys.readouterr().out
    assert "payload sha256 over its" in out and "--deep checks each file" in out, out
    assert_rejected(env, b.path, capsys, "components/demo/share/readme.txt", "differs from the manifest")
