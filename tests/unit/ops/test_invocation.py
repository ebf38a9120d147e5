"""The operations layer's contract with every front end: one audit record per action, whatever happens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vigil.basics.errors import VigilError
from vigil.bundle.errors import BundleRejected
from vigil.installer.audit.errors import AuditError
from vigil.installer.ops import Bytes, Invocation, Step, audited


def records(home: Path) -> list[dict[str, object]]:
    log = home / "audit" / "log.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_finished_action_leaves_one_ok_record_with_what_it_said(tmp_path: Path) -> None:
    inv = Invocation(home=tmp_path, argv=["bundle", "import", "b"], operator="carol", action="bundle.import")
    with audited(inv):
        inv.object = "b"
        inv.details["version"] = 7
    (rec,) = records(tmp_path)
    assert (rec["action"], rec["object"], rec["outcome"], rec["reason"]) == ("bundle.import", "b", "ok", "")
    assert rec["details"] == {"version": 7, "argv": ["bundle", "import", "b"]}
    assert rec["actor"]["operator"] == "carol"  # type: ignore[index]


def test_a_refusal_is_recorded_with_its_reason_and_raised(tmp_path: Path) -> None:
    inv = Invocation(home=tmp_path, action="bundle.verify")
    with pytest.raises(BundleRejected), audited(inv):
        raise BundleRejected("x.bundle", "signature by an unknown key")
    (rec,) = records(tmp_path)
    assert (rec["outcome"], rec["reason"]) == ("refused", "x.bundle: signature by an unknown key")
    assert isinstance(inv.error, BundleRejected)


def test_a_defect_or_an_interrupt_is_recorded_as_failed(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), audited(Invocation(home=tmp_path, action="a")):
        _ = 1 // 0
    with pytest.raises(KeyboardInterrupt), audited(Invocation(home=tmp_path, action="b")):
        raise KeyboardInterrupt
    first, second = records(tmp_path)
    assert (first["outcome"], first["reason"]) == (
        "failed",
        "ZeroDivisionError: integer division or modulo by zero",
    )
    assert (second["outcome"], second["reason"]) == ("failed", "interrupted")


def test_an_outcome_set_by_the_front_end_is_kept(tmp_path: Path) -> None:
    inv = Invocation(home=tmp_path, action="lab.status")
    with audited(inv):
        inv.outcome = "failed"  # e.g. a status that found an unhealthy host and exits 1
    assert records(tmp_path)[0]["outcome"] == "failed"


def test_skip_audit_writes_nothing(tmp_path: Path) -> None:
    with audited(Invocation(home=tmp_path, action="help")) as inv:
        inv.skip_audit = True
    assert records(tmp_path) == []


def test_an_action_that_cannot_be_recorded_fails_and_keeps_its_own_error(tmp_path: Path) -> None:
    (tmp_path / "audit").write_text("not a directory")
    inv = Invocation(home=tmp_path, action="bundle.import")
    with pytest.raises(AuditError, match="cannot write"), audited(inv):
        raise VigilError("x.bundle", "expired")
    assert str(inv.error) == "x.bundle: expired" and inv.outcome == "failed"
    # and a successful action that cannot be recorded fails too
    with pytest.raises(AuditError), audited(Invocation(home=tmp_path, action="keys.show")):
        pass


def test_events_reach_the_sink_only_when_there_is_one(tmp_path: Path) -> None:
    quiet = Invocation(home=tmp_path)
    quiet.step("nobody listens")
    assert quiet.byte_progress("x") is None
    seen: list[object] = []
    inv = Invocation(home=tmp_path, on_event=seen.append)
    inv.step("fetching")
    update = inv.byte_progress("verify b")
    assert update is not None
    update(10, 100)
    assert seen == [Step("fetching"), Bytes("verify b", 10, 100)]
