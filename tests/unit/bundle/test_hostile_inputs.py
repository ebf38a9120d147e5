"""Hostile inputs that once gave a traceback, a wrong OK or a runaway record (issue 11, findings 5-7, 9, 11).

Each test performs the attack through the real CLI and asserts the safe outcome: one
``FAIL: <object>: <reason>`` line, exit 1, and the store and the trust directory as they were.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.factories import (
    KeyPair,
    Member,
    craft_bundle,
    craft_edited_bytes,
    fixed_members,
    make_key,
    make_store_env,
    make_trust,
    tree_snapshot,
)
from tests.factories import (
    StoreEnv as Env,
)
from vigil.basics.errors import VigilError
from vigil.bundle.trust import load_root, new_root, write_root
from vigil.installer.audit import AuditLog
from vigil.installer.cli import main


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return make_store_env(tmp_path, monkeypatch.setenv, members=fixed_members())


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(args)
    return rc, capsys.readouterr().err.strip()


def one_fail_line(rc: int, err: str, *expected: str) -> str:
    assert rc == 1, err[:2000]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("FAIL: "), err[:2000]
    for text in expected:
        assert text in lines[0], f"{text!r} not in {lines[0][:2000]!r}"
    return lines[0]


def assert_refused(env: Env, bundle: Path, capsys: pytest.CaptureFixture[str], *expected: str) -> str:
    """verify and import both refuse with the same one line; the store is unchanged."""
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "verify", "--deep", str(bundle), "--trust", str(env.trust)], capsys)
    line = one_fail_line(rc, err, *expected)
    rc, err2 = run(["bundle", "import", str(bundle), "--trust", str(env.trust)], capsys)
    assert rc == 1
    assert err2 == err, "import must refuse with the same reason as verify"
    assert tree_snapshot(env.home / "bundles") == before, "a refused import changed the store"
    return line


def with_files(extra: list[Member]) -> list[Member]:
    return [*fixed_members(), *extra]


def last_record(home: Path) -> dict[str, Any]:
    return list(AuditLog(home).records())[-1]


# -- 5: runaway lengths --------------------------------------------------------------------------


def test_error_object_and_reason_are_capped() -> None:
    exc = VigilError("o" * 30_000_000, "r" * 30_000_000)
    assert len(exc.obj) < 1200 and exc.obj.endswith("… (30000000 bytes)")
    assert len(exc.reason) < 2200 and exc.reason.endswith("… (30000000 bytes)")
    assert len(str(exc)) < 3500
    short = VigilError("bundle.bundle", "expired")
    assert (short.obj, short.reason, str(short)) == ("bundle.bundle", "expired", "bundle.bundle: expired")


def test_huge_manifest_path_gives_a_short_fail_line_and_record(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "components/demo/" + "/".join(["d" * 200] * 40_000)  # 8 MB, every component a legal length

    def add(m: dict[str, Any]) -> None:
        m["files"].append({**m["files"][0], "path": huge})

    b = craft_bundle(env.out, [env.key], version=2, members=fixed_members(), edit=add)
    line = assert_refused(env, b.path, capsys, "manifest.json", "longer than 1024 bytes")
    assert len(line) < 1000
    record = last_record(env.home)
    assert record["outcome"] == "refused" and len(record["reason"]) < 1000
    assert env.home.joinpath("audit", "log.jsonl").stat().st_size < 100_000


# -- 6: tracebacks and verify/import disagreeing --------------------------------------------------


def test_file_and_directory_at_the_same_path(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    members = with_files([Member("components/demo/bin/demo/inner", b"x\n")])
    b = craft_bundle(env.out, [env.key], version=2, members=members)
    assert_refused(
        env, b.path, capsys, "manifest.json: components/demo/bin/demo", "is both a file and a directory"
    )


def test_path_component_over_255_bytes(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    long_name = "components/demo/" + "é" * 128  # 256 bytes in UTF-8, 128 characters
    b = craft_bundle(env.out, [env.key], version=2, members=with_files([Member(long_name, b"x\n")]))
    assert_refused(env, b.path, capsys, "manifest.json", "path component longer than 255 bytes")


def test_path_longer_than_the_system_takes(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    deep = "components/demo/" + "/".join(["d" * 200] * 21)  # 4 KiB: ENAMETOOLONG on import
    b = craft_bundle(env.out, [env.key], version=2, members=with_files([Member(deep, b"x\n")]))
    assert_refused(env, b.path, capsys, "manifest.json", "path longer than 1024 bytes")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("components/demo/two\nlines", "control character in name"),
        ("components/demo/\udcff", "name is not valid UTF-8"),
    ],
    ids=["newline", "lone-surrogate"],
)
def test_unprintable_paths(env: Env, capsys: pytest.CaptureFixture[str], name: str, reason: str) -> None:
    def add(m: dict[str, Any]) -> None:
        m["files"].append({**m["files"][0], "path": name})

    crafted = craft_bundle(env.out, [env.key], version=2, members=fixed_members(), edit=add)
    assert_refused(env, crafted.path, capsys, "manifest.json", reason)


def _deep(raw: bytes, depth: int) -> bytes:
    return raw.replace(b'"extra": {}', b'"extra": {"x": ' + b"[" * depth + b"]" * depth + b"}")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda raw: _deep(raw, 100_000), "nested deeper than 32 levels"),
        (lambda raw: _deep(raw, 40), "nested deeper than 32 levels"),
        (lambda raw: raw.replace(b'"version": 2', b'"version": ' + b"7" * 5000), "integer with 5000 digits"),
        (lambda raw: raw.replace(b'"extra": {}', b'"extra": {"n": NaN}'), "NaN is not JSON"),
        (
            lambda raw: raw.replace(b'"version": 2', b'"version": 2, "version": 999'),
            "duplicate key 'version'",
        ),
    ],
    ids=["nested-100000", "nested-40", "5000-digits", "nan", "duplicate-key"],
)
def test_hostile_manifest_json(
    env: Env, capsys: pytest.CaptureFixture[str], edit: Callable[[bytes], bytes], reason: str
) -> None:
    b = craft_edited_bytes(env.out, [env.key], edit, version=2)
    assert_refused(env, b.path, capsys, "manifest.json: malformed", reason)
    rc, err = run(["bundle", "inspect", str(b.path)], capsys)
    one_fail_line(rc, err, reason)


def _trust_doc(env: Env) -> str:
    return env.trust.read_text()


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda t: t.replace('"threshold": 1', '"threshold": 1, "x": ' + "[" * 100_000 + "]" * 100_000),
            "nested deeper than 32 levels",
        ),
        (lambda t: t.replace('"version": 1', '"version": ' + "1" * 5000), "integer with 5000 digits"),
        (
            lambda t: t.replace('"threshold": 1', '"threshold": 1, "threshold": 2'),
            "duplicate key 'threshold'",
        ),
    ],
    ids=["nested", "5000-digits", "duplicate-key"],
)
def test_hostile_trust_json(
    env: Env, capsys: pytest.CaptureFixture[str], edit: Callable[[str], str], reason: str
) -> None:
    bad = env.tmp / "bad-trust.json"
    text = edit(_trust_doc(env))
    assert text != _trust_doc(env)
    bad.write_text(text)
    b = craft_bundle(env.out, [env.key], version=2, members=fixed_members())
    rc, err = run(["bundle", "verify", str(b.path), "--trust", str(bad)], capsys)
    one_fail_line(rc, err, str(bad), reason)
    rc, err = run(["trust", "install", str(bad)], capsys)
    one_fail_line(rc, err, str(bad), reason)
    assert not (env.home / "trust" / "root.json").exists()


# -- 7: file modes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o777, 0o000, 0o700, 0o666])
def test_only_0644_and_0755_are_imported(env: Env, capsys: pytest.CaptureFixture[str], mode: int) -> None:
    members = with_files([Member("components/demo/bin/tool", b"#!/bin/sh\n", mode)])
    b = craft_bundle(env.out, [env.key], version=2, members=members)
    assert_refused(
        env,
        b.path,
        capsys,
        "manifest.json: components/demo/bin/tool",
        f"mode {mode:04o} is not allowed (only 0644 and 0755)",
    )


# -- 9: --trust older than, or beside, the installed root -------------------------------------------


@dataclass
class Rotated:
    old: KeyPair
    new: KeyPair
    v1: Path
    v2: Path


@pytest.fixture
def rotated(env: Env) -> Rotated:
    """The host's root went v1 (key `old`) -> v2 (key `new`): `old` is revoked."""
    old = env.key
    new = make_key(env.tmp / "keys", "new")
    v2 = new_root([new.pub], 1, version=2)
    v2.sign(old.key)
    v2.sign(new.key)
    write_root(v2, env.tmp / "v2.json")
    assert main(["trust", "install", str(env.trust)]) == 0
    assert main(["trust", "install", str(env.tmp / "v2.json")]) == 0
    return Rotated(old, new, env.trust, env.tmp / "v2.json")


def test_import_with_an_older_trust_root_is_refused(
    env: Env, rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = craft_bundle(env.out, [rotated.old], version=1000, members=fixed_members())
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "import", str(evil.path), "--trust", str(rotated.v1)], capsys)
    one_fail_line(rc, err, str(rotated.v1), "version 1 is older than the installed trust root's 2")
    assert tree_snapshot(env.home / "bundles") == before
    assert (env.home / "bundles" / "highest").read_text().strip() == "1"
    record = last_record(env.home)
    assert record["outcome"] == "refused" and record["details"]["trust"] == str(rotated.v1)
    rc, err = run(["bundle", "verify", str(evil.path), "--trust", str(rotated.v1)], capsys)
    one_fail_line(rc, err, "older than the installed trust root's 2")


def test_import_with_a_foreign_root_of_the_same_version_is_refused(
    env: Env, rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = make_key(env.tmp / "keys", "mine")
    forged = env.tmp / "forged-v2.json"
    make_trust(forged, [mine], version=2)
    evil = craft_bundle(env.out, [mine], version=1000, members=fixed_members())
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "import", str(evil.path), "--trust", str(forged)], capsys)
    one_fail_line(rc, err, str(forged), "is not the installed trust root")
    assert tree_snapshot(env.home / "bundles") == before


def test_import_with_an_unsigned_newer_root_is_refused(
    env: Env, rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = make_key(env.tmp / "keys", "mine")
    forged = env.tmp / "forged-v3.json"
    root = new_root([mine.pub], 1, version=3)
    root.sign(mine.key)
    write_root(root, forged)
    evil = craft_bundle(env.out, [mine], version=1000, members=fixed_members())
    before = tree_snapshot(env.home / "bundles")
    rc, err = run(["bundle", "import", str(evil.path), "--trust", str(forged)], capsys)
    one_fail_line(rc, err, str(forged), "signed by 0 key(s) of the current trust root, 1 required")
    assert tree_snapshot(env.home / "bundles") == before


def test_a_signed_successor_root_imports_but_does_not_raise_highest(
    env: Env, rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    v3 = new_root([rotated.new.pub], 1, version=3)
    v3.sign(rotated.new.key)
    write_root(v3, env.tmp / "v3.json")
    b = craft_bundle(env.out, [rotated.new], version=50, members=fixed_members())
    rc, err = run(["bundle", "import", str(b.path), "--trust", str(env.tmp / "v3.json")], capsys)
    assert rc == 0, err
    assert (env.home / "bundles" / "50" / "import.json").is_file()
    assert (env.home / "bundles" / "highest").read_text().strip() == "1"
    details = last_record(env.home)["details"]
    assert details["trust"] == str(env.tmp / "v3.json") and details["trust_version"] == 3
    assert details["trust_installed"] is False and details["highest_raised"] is False
    # the installed root itself, given or not, raises it
    b2 = craft_bundle(env.out, [rotated.new], version=51, members=fixed_members())
    assert main(["bundle", "import", str(b2.path), "--trust", str(rotated.v2)]) == 0
    assert (env.home / "bundles" / "highest").read_text().strip() == "51"
    details = last_record(env.home)["details"]
    assert details["trust_installed"] is True and details["highest_raised"] is True


# -- 11: rotation consent, the installed-root marker, stale staging ---------------------------------


def test_rotation_must_be_signed_by_every_added_key(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    victim = make_key(env.tmp / "keys", "victim")  # never agreed to be a signer
    assert main(["trust", "install", str(env.trust)]) == 0
    v2 = new_root([env.key.pub, victim.pub], 1, version=2)
    v2.sign(env.key.key)
    write_root(v2, env.tmp / "v2.json")
    before = tree_snapshot(env.home / "trust")
    rc, err = run(["trust", "install", str(env.tmp / "v2.json")], capsys)
    one_fail_line(rc, err, str(env.tmp / "v2.json"), f"added key {victim.pub.id_hex} did not sign")
    assert tree_snapshot(env.home / "trust") == before
    v2.sign(victim.key)
    write_root(v2, env.tmp / "v2.json")
    assert main(["trust", "install", str(env.tmp / "v2.json")]) == 0
    assert load_root(env.home / "trust" / "root.json").version == 2


@pytest.mark.parametrize("damage", ["deleted", "dangling-link"])
def test_a_lost_root_does_not_allow_a_new_first_install(
    env: Env, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    assert main(["trust", "install", str(env.trust)]) == 0
    root_json = env.home / "trust" / "root.json"
    root_json.unlink()
    if damage == "dangling-link":
        root_json.symlink_to(env.tmp / "nowhere.json")
    mine = make_key(env.tmp / "keys", "mine")
    forged = env.tmp / "forged.json"
    make_trust(forged, [mine], version=1)
    rc, err = run(["trust", "install", str(forged)], capsys)
    one_fail_line(rc, err, "trust root version 1 was installed here")
    assert os.path.lexists(root_json) == (damage == "dangling-link")
    assert not root_json.exists()
    # nor does an import with --trust take the lost root's place
    evil = craft_bundle(env.out, [mine], version=1000, members=fixed_members())
    rc, err = run(["bundle", "import", str(evil.path), "--trust", str(forged)], capsys)
    one_fail_line(rc, err, "trust root version 1 was installed here")
    assert not (env.home / "bundles" / "1000").exists()


_KILL_DURING_IMPORT = """
import os, signal, sys
import vigil.bundle.payload as payload
real = payload._read_member
def read_then_die(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
payload._read_member = read_then_die
from vigil.installer.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_staging_left_by_a_killed_import_is_cleaned_and_audited(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    b = craft_bundle(env.out, [env.key], version=2, members=fixed_members())
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILL_DURING_IMPORT,
            "bundle",
            "import",
            str(b.path),
            "--trust",
            str(env.trust),
        ],
        env={**os.environ, "VIGIL_HOME": str(env.home)},
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL
    store = env.home / "bundles"
    left = [p.name for p in store.iterdir() if p.name.startswith(".staging-")]
    assert len(left) == 1 and (store / left[0] / "files").is_dir()  # unverified bytes, never cleaned today
    # a planted link under a staging name is removed as a link, its target untouched; other names stay
    outside = env.tmp / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (store / ".staging-zz9link0").symlink_to(outside)
    (store / ".staging-not-ours").mkdir()
    assert main(["bundle", "import", str(b.path), "--trust", str(env.trust)]) == 0
    assert sorted(p.name for p in store.iterdir() if p.name.startswith(".staging")) == [".staging-not-ours"]
    assert (outside / "keep").read_text() == "keep"
    assert (store / "2" / "import.json").is_file()
    details = last_record(env.home)["details"]
    assert details["stale_staging_removed"] == sorted([left[0], ".staging-zz9link0"])


def test_duplicate_keys_outside_the_signed_part_are_refused(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(env.trust.read_text())
    doc["signatures"] = [{"key_id": env.key.pub.id_hex, "sig": "AAAA"}]
    text = json.dumps(doc).replace('"sig": "AAAA"', '"sig": "AAAA", "sig": "BBBB"')
    bad = env.tmp / "dup-sig.json"
    bad.write_text(text)
    rc, err = run(["trust", "install", str(bad)], capsys)
    one_fail_line(rc, err, str(bad), "duplicate key 'sig'")
    assert not (env.home / "trust" / "root.json").exists()
