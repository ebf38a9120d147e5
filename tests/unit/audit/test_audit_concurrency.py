"""Concurrent writers: separate OS processes appending at once keep one intact chain."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path

from audit_helpers import LogFiles

from vigil.installer.audit import AuditLog, verify_summary

WRITERS = 4
EACH = 150


def _writer(home: str, writer: int, start: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    log = AuditLog(Path(home), checkpoint_every=25)
    start.wait()
    for i in range(EACH):
        log.append(f"test.writer{writer}", str(i), "ok", checkpoint=(i % 10 == 0))


def test_concurrent_processes_append_one_chain(home: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(home), w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * WRITERS

    log = AuditLog(home)
    summary = verify_summary(log.paths.log, log.paths.checkpoints, log.paths.public_key)
    assert summary.records == WRITERS * EACH
    records = LogFiles(home).records()
    assert [r["seq"] for r in records] == list(range(1, WRITERS * EACH + 1))
    # every append landed exactly once, in each writer's own order
    seen = Counter((r["action"], r["object"]) for r in records)
    assert set(seen.values()) == {1} and len(seen) == WRITERS * EACH
    for w in range(WRITERS):
        mine = [int(r["object"]) for r in records if r["action"] == f"test.writer{w}"]
        assert mine == list(range(EACH))
    # the writers really interleaved (otherwise this test would prove nothing about the lock)
    switches = sum(1 for a, b in zip(records, records[1:], strict=False) if a["action"] != b["action"])
    assert switches > WRITERS
    # one key was made, though all writers started on an empty directory at once
    assert len({cp["key_id"] for cp in LogFiles(home).checkpoints()}) == 1
