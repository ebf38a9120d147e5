"""The audit log API: records, chaining, checkpoints, reading, modes, failures."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tracemalloc
from pathlib import Path

import pytest
from audit_helpers import LogFiles, line, rehash

from vigil.installer.audit import (
    GENESIS,
    AuditError,
    AuditLog,
    _canonical,
    canonical,
    record_command,
    verify,
    verify_summary,
)
from vigil.installer.audit._files import last_line
from vigil.installer.audit.keys import load_or_create, load_public_key, sign


def _verify(log: AuditLog) -> None:
    verify(log.paths.log, log.paths.checkpoints, log.paths.public_key)


def test_record_fields_and_chain(home: Path) -> None:
    log = AuditLog(home)
    first = log.append("bundle.import", "vigil-1.0.bundle", "ok", details={"version": "1.0", "path": home})
    second = log.append(
        "bundle.import", "evil.bundle", "refused", "signature below threshold", actor_operator="alice"
    )
    assert first["seq"] == 1 and second["seq"] == 2
    assert first["prev"] == GENESIS and second["prev"] == first["hash"]
    without_hash = {k: v for k, v in second.items() if k != "hash"}
    assert (
        second["hash"]
        == hashlib.sha256(
            json.dumps(without_hash, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        ).hexdigest()
    )
    assert first["details"] == {"version": "1.0", "path": str(home)}
    assert second["actor"] == {"user": second["actor"]["user"], "uid": os.getuid(), "operator": "alice"}
    assert (second["outcome"], second["reason"]) == ("refused", "signature below threshold")
    assert second["time"].endswith("Z") and len(second["time"]) == len("2026-01-01T00:00:00.000000Z")
    # the file holds exactly the canonical lines
    assert log.paths.log.read_bytes() == canonical(first) + b"\n" + canonical(second) + b"\n"
    _verify(log)


def test_checkpoint_every_n_records(home: Path) -> None:
    log = AuditLog(home, checkpoint_every=5)
    for i in range(12):
        log.append("test.append", str(i), "ok")
    counts = [cp["count"] for cp in LogFiles(home).checkpoints()]
    assert counts == [1, 6, 11]
    assert verify_summary(log.paths.log, log.paths.checkpoints, log.paths.public_key).checkpoints == 3


def test_checkpoint_over_covered_head_is_not_repeated(home: Path) -> None:
    log = AuditLog(home)
    log.append("test.append", "x", "ok")
    first = log.checkpoint()
    assert log.checkpoint() == first
    assert len(LogFiles(home).checkpoints()) == 1


def test_checkpoint_of_empty_log_signs_genesis(home: Path) -> None:
    log = AuditLog(home)
    cp = log.checkpoint()
    assert (cp["count"], cp["head"]) == (0, GENESIS)
    _verify(log)
    log.append("test.append", "x", "ok")
    _verify(log)


def test_records_filters(home: Path) -> None:
    log = AuditLog(home)
    log.append("bundle.import", "a", "ok")
    log.append("bundles.other", "b", "ok")
    log.append("bundle", "c", "ok")
    log.append("deploy.start", "d", "ok")
    assert [r["object"] for r in log.records(action="bundle")] == ["a", "c"]
    assert [r["object"] for r in log.records(action="bundle.")] == ["a", "c"]
    third = list(log.records())[2]["time"]
    assert [r["object"] for r in log.records(since=third)] == ["c", "d"]
    assert list(AuditLog(home / "elsewhere").records()) == []


def test_clock_step_back_keeps_time_monotonic(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = AuditLog(home)
    first = log.append("test.append", "x", "ok")
    monkeypatch.setattr(_canonical, "now", lambda: "2020-01-01T00:00:00.000000Z")
    second = log.append("test.append", "y", "ok")
    assert second["time"] == first["time"]
    assert second["details"]["clock_behind_us"] > 0
    _verify(log)


def test_modes_and_key_files(home: Path) -> None:
    log = AuditLog(home)
    log.append("test.append", "x", "ok", checkpoint=True)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(log.paths.dir) == 0o750
    assert mode(log.paths.log) == 0o640
    assert mode(log.paths.checkpoints) == 0o640
    assert mode(log.paths.private_key) == 0o600
    assert load_public_key(log.paths.public_key)  # the shipped public key is a real Ed25519 key
    assert not list(log.paths.dir.glob("*.tmp"))


def test_unwritable_audit_dir_raises(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "audit").write_text("not a directory")
    with pytest.raises(AuditError) as info:
        AuditLog(home).append("test.append", "x", "ok")
    assert str(info.value) == f"audit: {home / 'audit'}: cannot write (not a directory)"


def test_record_command_failure_fails_the_command(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "audit").write_text("not a directory")
    with pytest.raises(AuditError):
        record_command(home, argv=["audit", "checkpoint"], action="audit.checkpoint", obj="", outcome="ok")


def test_record_command_records_what_it_is_given(home: Path) -> None:
    record_command(
        home,
        argv=["bundle", "import", "x.bundle"],
        operator="bob",
        action="bundle.import",
        obj="x.bundle",
        details={"version": "1.2"},
        outcome="refused",
        reason="bundle: signature invalid",
    )
    (record,) = LogFiles(home).records()
    assert record["details"] == {"version": "1.2", "argv": ["bundle", "import", "x.bundle"]}
    assert (record["action"], record["object"], record["outcome"]) == ("bundle.import", "x.bundle", "refused")
    assert record["actor"]["operator"] == "bob"
    (cp,) = LogFiles(home).checkpoints()
    assert (cp["count"], cp["head"]) == (1, record["hash"])


def test_append_refuses_to_extend_a_truncated_log(home: Path) -> None:
    log = AuditLog(home)
    for i in range(3):
        log.append("test.append", str(i), "ok", checkpoint=True)
    files = LogFiles(home)
    files.write_log(files.log_lines()[:2])
    with pytest.raises(AuditError) as info:
        log.append("test.append", "after", "ok")
    assert str(info.value).startswith(
        "audit: record 3: missing: log ends at record 2 but the latest checkpoint"
    )
    assert len(files.records()) == 2


def test_prev_mismatch_in_uncheckpointed_tail(home: Path) -> None:
    log = AuditLog(home)
    for i in range(6):
        log.append("test.append", str(i), "ok")  # only record 1 is checkpointed
    files = LogFiles(home)
    records = files.records()
    records[3] = rehash({**records[3], "object": "replaced"})
    files.write_records(records)
    with pytest.raises(AuditError) as info:
        _verify(log)
    assert (
        str(info.value)
        == "audit: record 5: prev does not match the hash of record 4 (record inserted or replaced)"
    )
    assert info.value.seq == 5


def test_duplicate_in_uncheckpointed_tail(home: Path) -> None:
    log = AuditLog(home)
    for i in range(4):
        log.append("test.append", str(i), "ok")
    files = LogFiles(home)
    lines = files.log_lines()
    files.write_log(lines + [lines[-1]])
    with pytest.raises(AuditError, match=r"^audit: record 4: appears twice \(record inserted\)$"):
        _verify(log)


def test_last_line_reads_across_chunks(tmp_path: Path) -> None:
    p = tmp_path / "f"
    long = b"x" * 50_000
    p.write_bytes(b"first\n" + long + b"\n")
    assert last_line(p) == long + b"\n"
    p.write_bytes(long + b"\n")
    assert last_line(p) == long + b"\n"
    p.write_bytes(b"")
    assert last_line(p) is None
    assert last_line(tmp_path / "missing") is None


def test_verify_streams_in_constant_memory(home: Path) -> None:
    """A 4 000-record log (about 1.2 MB) verifies in far less memory than the file takes."""
    log = AuditLog(home)
    log.append("test.append", "0", "ok")  # makes the key and the first checkpoint
    key = load_or_create(log.paths)
    (record,) = LogFiles(home).records()
    with open(log.paths.log, "ab") as f:
        for seq in range(2, 4_001):
            record = rehash({**record, "seq": seq, "prev": record["hash"], "object": str(seq)})
            f.write(line(record).encode())
    fields = {
        "count": 4_000,
        "head": record["hash"],
        "time": _canonical.now(),
        "key_id": LogFiles(home).checkpoints()[0]["key_id"],
    }
    with open(log.paths.checkpoints, "ab") as f:
        f.write(line({**fields, "sig": sign(key, fields)}).encode())
    assert log.paths.log.stat().st_size > 1_000_000
    tracemalloc.start()
    try:
        summary = verify_summary(log.paths.log, log.paths.checkpoints, log.paths.public_key)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (summary.records, summary.checkpoints) == (4_000, 2)
    assert peak < 256 * 1024, peak
