"""Attacks on the payload's zstd frames and on what follows the tar stream (issue 11, findings 2 and 8).

A courier without a key swaps one frame of a correctly signed bundle for another of the same
length; a key holder (or a broken builder) signs frames with junk inside them, frames larger than
zstd could have written, or a tar stream with data after its end. Each case runs ``verify`` and
``import`` (and ``inspect`` where it reads the frame), checks the one ``FAIL:`` line, the time
it took, and that the store is as it was.
"""

from __future__ import annotations

import hashlib
import tarfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.factories import (
    Member,
    StagedFile,
    craft_bundle,
    default_members,
    make_store_env,
    payload_offset,
    tree_snapshot,
)
from tests.factories import (
    StoreEnv as Env,
)
from vigil.bundle.build import build_bundle
from vigil.bundle.container import BundleReader
from vigil.bundle.manifest import parse_manifest, zstd_bound
from vigil.bundle.payload import FRAME_BYTES
from vigil.bundle.trust import load_root
from vigil.bundle.verify import verify_bundle
from vigil.installer.cli import main

#: a PAX header of this many digits keeps CPython's vulnerable tarfile (CVE-2024-6232) busy for
#: many minutes: 40 KB already takes about a second, and the cost grows with the square
PAX_DIGITS = 1 << 20
QUICK_S = 5.0


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_store_env(tmp_path, monkeypatch.setenv)


def timed(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    capsys.readouterr()
    start = time.monotonic()
    rc = main(args)
    took = time.monotonic() - start
    return rc, capsys.readouterr().err.strip(), took


def refused(
    env: Env, bundle: Path, capsys: pytest.CaptureFixture[str], *expected: str, inspect: bool = False
) -> str:
    """``verify`` and ``import`` (and ``inspect``) refuse ``bundle`` quickly, with the same one line."""
    before = tree_snapshot(env.home / "bundles")
    commands = [
        ["bundle", "verify", "--deep", str(bundle), "--trust", str(env.trust)],
        ["bundle", "import", str(bundle), "--trust", str(env.trust)],
    ]
    if inspect:
        commands.append(["bundle", "inspect", str(bundle)])
    lines = []
    for args in commands:
        rc, err, took = timed(args, capsys)
        assert rc != 0, f"{args[1]} accepted it: {err}"
        assert len(err.splitlines()) == 1 and err.startswith("FAIL: "), err[:2000]
        for text in expected:
            assert text in err, f"{args[1]}: {text!r} not in {err[:2000]!r}"
        assert took < QUICK_S, f"{args[1]} took {took:.1f} s to refuse it"
        lines.append(err)
    assert len(set(lines)) == 1, f"verify, import and inspect disagree: {lines}"
    assert tree_snapshot(env.home / "bundles") == before, "a refused import changed the store"
    return lines[0]


def pax_bomb_tar() -> bytes:
    """A tar stream whose first header is a PAX extended header of PAX_DIGITS digits."""
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = PAX_DIGITS
    member = tarfile.TarInfo("components/demo/bin/demo")
    data = pax.tobuf(format=tarfile.USTAR_FORMAT) + b"1" * PAX_DIGITS + b"\0" * (-PAX_DIGITS % 512)
    data += member.tobuf(format=tarfile.USTAR_FORMAT) + b"\0" * 1024
    return data + b"\0" * (-len(data) % tarfile.RECORDSIZE)


def same_length_frame(inner: bytes, length: int) -> bytes:
    """A zstd frame of ``inner``, then junk up to ``length`` bytes (zstd stops at the frame's end)."""
    frame = zstandard.ZstdCompressor(level=19, write_checksum=True, write_content_size=True).compress(inner)
    assert len(frame) < length, (len(frame), length)
    return frame + b"J" * (length - len(frame))


def swap_frame(bundle: Path, frames: list[int], index: int, inner: bytes) -> None:
    """Replace frame ``index`` of ``bundle``'s payload in place: no key needed, same length."""
    offset, _ = payload_offset(bundle)
    start = offset + sum(frames[:index])
    data = bytearray(bundle.read_bytes())
    data[start : start + frames[index]] = same_length_frame(inner, frames[index])
    bundle.write_bytes(bytes(data))


# 2: a keyless frame swap never reaches zstd's output parser


@pytest.mark.timeout(60)
def test_swapped_first_frame_with_a_pax_bomb_is_refused_quickly(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    b = craft_bundle(env.out, [env.key], version=2)
    frames = b.manifest["payload"]["frames"]
    swap_frame(b.path, frames, 0, pax_bomb_tar())
    line = refused(
        env,
        b.path,
        capsys,
        "payload.tar.zst frame 0",
        "altered",
        "differs from the signed manifest",
        inspect=True,
    )
    assert line.startswith(f"FAIL: {b.path.name}: payload.tar.zst frame 0: altered: sha256 "), line


@pytest.mark.timeout(60)
def test_swapped_later_frame_is_named(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """The second frame starts with a tar header (the first member fills frame 0 exactly): swapped
    for the PAX bomb, it would be the next header tarfile parses."""
    first = Member("components/demo/share/big.bin", bytes(range(256)) * ((FRAME_BYTES - 512) // 256))
    b = craft_bundle(env.out, [env.key], version=2, members=[first, *default_members()])
    frames = b.manifest["payload"]["frames"]
    assert len(frames) == 2 and 512 + len(first.data) == FRAME_BYTES
    swap_frame(b.path, frames, 1, pax_bomb_tar())
    line = refused(env, b.path, capsys, "payload.tar.zst frame 1: altered")
    assert line.startswith(f"FAIL: {b.path.name}: payload.tar.zst frame 1: altered: sha256 "), line


# 2, 8: what a signed frame may hold


def test_signed_frame_with_junk_after_its_zstd_frame(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def junk(frames: list[bytes]) -> list[bytes]:
        return [frames[0] + b"JUNK" * 16, *frames[1:]]

    b = craft_bundle(env.out, [env.key], version=2, frames_edit=junk)
    refused(
        env, b.path, capsys, "payload.tar.zst frame 0", "extra data inside the signed frame", inspect=True
    )


def test_signed_frame_of_two_zstd_frames(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    empty = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(b"")

    def two(frames: list[bytes]) -> list[bytes]:
        return [frames[0] + empty, *frames[1:]]

    b = craft_bundle(env.out, [env.key], version=2, frames_edit=two)
    refused(env, b.path, capsys, "payload.tar.zst frame 0", "extra data inside the signed frame")


def test_signed_frame_larger_than_zstd_could_write(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """A tiny zstd frame padded with junk to far more than zstd's bound: refused before it is read."""

    def pad(frames: list[bytes]) -> list[bytes]:
        return [frames[0] + b"\xa5" * (8 << 20), *frames[1:]]

    b = craft_bundle(env.out, [env.key], version=2, frames_edit=pad)
    refused(
        env,
        b.path,
        capsys,
        "manifest.json",
        "payload.tar.zst frame 0 is",
        "more than zstd's bound",
        inspect=True,
    )


def test_signed_frame_size_differs_from_its_zstd_header(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def shrink(m: dict[str, Any]) -> None:
        m["payload"]["frame_content_sizes"][0] -= 512

    b = craft_bundle(env.out, [env.key], version=2, edit=shrink)
    refused(env, b.path, capsys, "payload.tar.zst frame 0", "zstd frame declares", "the manifest says")


# 8: nothing but the end-of-archive blocks after the tar stream


@pytest.mark.timeout(60)
def test_zeros_after_the_end_of_the_tar_stream(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    b = craft_bundle(env.out, [env.key], version=2, tar_edit=lambda tar: tar + bytes(16 << 20))
    assert len(b.manifest["payload"]["frames"]) == 5
    refused(env, b.path, capsys, "payload.tar.zst", "data after the end of the tar stream: the frames hold")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda tar: tar[:-1] + b"X", "the end-of-archive blocks are not zeros"),
        (
            lambda tar: (
                tar[: -tarfile.RECORDSIZE] + b"X" * tarfile.BLOCKSIZE + bytes(tarfile.RECORDSIZE - 512)
            ),
            "the end-of-archive blocks are not zeros",
        ),
        (
            lambda tar: tar + b"\0" * tarfile.BLOCKSIZE,
            "data after the end of the tar stream: the frames hold",
        ),
        (lambda tar: tar[: -tarfile.RECORDSIZE], "end-of-archive blocks are missing or short"),
    ],
    ids=["junk-in-padding", "junk-header-after-members", "one-more-zero-block", "no-end-blocks"],
)
def test_tail_of_the_tar_stream(
    env: Env, capsys: pytest.CaptureFixture[str], edit: Callable[[bytes], bytes], reason: str
) -> None:
    def check(tar: bytes) -> bytes:
        # the last member's data ends on a record, then one record of zeros: the end of the stream
        assert len(tar) == 2 * tarfile.RECORDSIZE and tar[-tarfile.RECORDSIZE :] == bytes(tarfile.RECORDSIZE)
        return edit(tar)

    members = [Member("components/demo/share/record.bin", b"r" * (tarfile.RECORDSIZE - 512))]
    b = craft_bundle(env.out, [env.key], version=2, members=members, tar_edit=check)
    refused(env, b.path, capsys, "payload.tar.zst", reason)


def test_honest_tail_still_imports(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = [Member("components/demo/share/record.bin", b"r" * (tarfile.RECORDSIZE - 512))]
    b = craft_bundle(env.out, [env.key], version=2, members=members)
    assert main(["bundle", "import", str(b.path), "--trust", str(env.trust)]) == 0
    assert (env.home / "bundles" / "2" / "files" / members[0].name).read_bytes() == members[0].data


# the format bump


def test_old_format_is_refused_by_name(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    def old(m: dict[str, Any]) -> None:
        m["format"] = "vigil-bundle/1"
        for key in ("frame_sha256", "frame_content_sizes"):
            m["payload"].pop(key, None)

    b = craft_bundle(env.out, [env.key], version=2, edit=old)
    line = refused(env, b.path, capsys, inspect=True)
    assert line.startswith(f"FAIL: {b.path.name}: format 1 is no longer accepted: "), line
    assert line.endswith(", rebuild with this vigil"), line


def test_pax_bomb_is_what_the_frame_check_keeps_out() -> None:
    """The swapped frame really is hostile: its tar stream starts with a PAX header of PAX_DIGITS
    digits (parsing it is what hangs a vulnerable interpreter; not done here)."""
    tar = pax_bomb_tar()
    header = tarfile.TarInfo.frombuf(tar[:512], "utf-8", "surrogateescape")
    assert header.type == tarfile.XHDTYPE and header.size == PAX_DIGITS
    frame = same_length_frame(tar, 4096)
    assert zstandard.ZstdDecompressor().decompress(frame) == tar  # junk after the frame is ignored by zstd
    assert len(frame) == 4096


# the builder's side


def test_built_bundle_signs_every_frame(env: Env) -> None:
    """A real build of a payload over two frames: the frame table matches the bytes it wrote, and
    the bundle verifies."""
    src = env.tmp / "src"
    src.mkdir()
    (src / "big").write_bytes(hashlib.sha256(b"seed").digest() * ((9 << 20) // 32))
    out = env.tmp / "built"
    out.mkdir()
    path = build_bundle(
        [StagedFile("components/demo/share/big", src / "big")],
        version=5,
        arch="amd64",
        channel="test",
        keys=[env.key.key],
        out_dir=out,
        min_vigil_version="0.1.0",
        builder_version="0.1.0",
        created=datetime(2026, 11, 1, tzinfo=UTC),
    )
    with BundleReader(path) as reader:
        reader.read_head()
        payload = b"".join(reader.payload_chunks())
        table = parse_manifest(reader.manifest_bytes).payload
    assert len(table.frames) == 3
    assert table.frame_content_sizes[:-1] == (FRAME_BYTES, FRAME_BYTES)
    offset = 0
    for size, digest, content in zip(
        table.frames, table.frame_sha256, table.frame_content_sizes, strict=True
    ):
        frame = payload[offset : offset + size]
        offset += size
        assert hashlib.sha256(frame).hexdigest() == digest
        assert zstandard.frame_content_size(frame) == content and size <= zstd_bound(content)
    verify_bundle(path, load_root(env.trust), vigil_version="0.1.0", now=datetime(2026, 11, 2, tzinfo=UTC))
