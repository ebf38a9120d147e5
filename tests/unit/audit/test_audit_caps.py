"""Finding 5 of issue 11: one huge object or reason must not make a huge record, nor every later
command slow; the log's last line is read in time linear in its length."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from audit_helpers import LogFiles, line, rehash

from vigil.installer.audit import AuditLog, _files
from vigil.installer.audit._files import last_line


def test_a_huge_object_reason_and_detail_are_cut_in_the_record(home: Path) -> None:
    log = AuditLog(home)
    record = log.append(
        "bundle.verify", "o" * 30_000_000, "refused", "r" * 30_000_000, {"path": "p" * 30_000_000, "n": 3}
    )
    assert len(record["object"]) < 1100 and record["object"].endswith("… (30000000 bytes)")
    assert len(record["reason"]) < 4200 and record["reason"].endswith("… (30000000 bytes)")
    assert len(record["details"]["path"]) < 4200 and record["details"]["n"] == 3
    assert log.paths.log.stat().st_size < 20_000
    assert list(log.records())[-1] == record  # what was returned is what was stored and chained


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", None),
        (b"one\n", b"one\n"),
        (b"one", b"one"),
        (b"one\ntwo\n", b"two\n"),
        (b"one\ntwo", b"two"),
        (b"\n\n", b"\n"),
        (b"a" * 50 + b"\n" + b"b" * 70 + b"\n", b"b" * 70 + b"\n"),
        (b"a" * 63 + b"\n" + b"b" * 64, b"b" * 64),
        (b"a" * 64 + b"\n", b"a" * 64 + b"\n"),
    ],
)
def test_last_line_across_block_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, expected: bytes | None
) -> None:
    monkeypatch.setattr(_files, "_TAIL_CHUNK", 16)
    path = tmp_path / "f"
    path.write_bytes(content)
    assert last_line(path) == expected


def test_last_line_is_linear_in_the_line_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # small blocks make a quadratic reader (joining and searching the whole tail per block) take
    # ~10 s on this 4 MiB line (minutes on 30 MB); a linear one takes a fraction of a second
    monkeypatch.setattr(_files, "_TAIL_CHUNK", 64)
    path = tmp_path / "f"
    path.write_bytes(b"first\n" + b"x" * (4 << 20) + b"\n")
    started = time.monotonic()
    assert last_line(path) == b"x" * (4 << 20) + b"\n"
    assert time.monotonic() - started < 3


def test_a_huge_last_record_written_before_the_cap_does_not_stall_the_next_command(
    home: Path, real_log: LogFiles
) -> None:
    records = real_log.records()
    huge = dict(records[-1], seq=len(records) + 1, prev=records[-1]["hash"], reason="r" * (32 << 20))
    real_log.write_log([*real_log.log_lines(), line(rehash(huge))])
    started = time.monotonic()
    record = AuditLog(home).append("audit.show", "audit", "ok")
    assert record["seq"] == huge["seq"] + 1 and record["prev"] == rehash(huge)["hash"]
    assert time.monotonic() - started < 10
