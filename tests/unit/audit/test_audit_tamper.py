"""The tamper corpus: each way of altering a real log is named by ``vigil audit verify``.

Every case starts from a log written by real vigil commands, changes it the way an
intruder would, and asserts the exact first error line and the exit code.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from audit_helpers import LogFiles, Result, line, rechain, rehash
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vigil.installer.audit import key_id
from vigil.installer.audit._canonical import canonical

Vigil = Callable[..., Result]


def _fails_with(vigil: Vigil, message: str) -> Result:
    result = vigil("audit", "verify")
    assert result.rc == 1
    assert result.first_error == f"FAIL: audit: {message}"
    assert result.out == ""
    return result


def test_untouched_log_verifies(vigil: Vigil, real_log: LogFiles) -> None:
    records, checkpoints = real_log.records(), real_log.checkpoints()
    head = records[-1]["hash"][:12]
    result = vigil("audit", "verify")
    assert result.rc == 0, result.err
    assert result.out == f"OK: audit: {len(records)} records, {len(checkpoints)} checkpoints, head {head}\n"
    # the refused usage errors are in it, as real commands recorded them
    assert [r["outcome"] for r in records][2:5] == ["refused", "ok", "refused"]
    assert records[3]["actor"]["operator"] == "alice"


def test_edited_record(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    records[2]["outcome"] = "ok"  # hide a refusal
    real_log.write_records(records)
    _fails_with(vigil, "record 3: hash mismatch (record edited)")


def test_deleted_record(vigil: Vigil, real_log: LogFiles) -> None:
    lines = real_log.log_lines()
    del lines[2]
    real_log.write_log(lines)
    _fails_with(vigil, "record 3: missing: log jumps from record 2 to record 4 (record deleted)")


def test_reordered_records(vigil: Vigil, real_log: LogFiles) -> None:
    lines = real_log.log_lines()
    lines[2], lines[3] = lines[3], lines[2]
    real_log.write_log(lines)
    _fails_with(vigil, "record 3: out of order: record 4 comes before it (records reordered)")


def test_record_moved_back(vigil: Vigil, real_log: LogFiles) -> None:
    lines = real_log.log_lines()
    lines.insert(5, lines.pop(1))  # record 2 moved after record 6
    real_log.write_log(lines)
    _fails_with(vigil, "record 2: out of order: record 3 comes before it (records reordered)")


def test_inserted_record_with_valid_hash(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    forged = rehash(
        {**records[2], "action": "bundle.import", "object": "evil.bundle", "prev": records[1]["hash"]}
    )
    real_log.write_records(records[:2] + [forged] + records[2:])
    _fails_with(vigil, "record 3: appears twice (record inserted)")


def test_inserted_record_renumbered(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    forged = rehash({**records[2], "action": "bundle.import", "prev": records[1]["hash"]})
    # the records after it renumbered and rehashed, but the chain not rebuilt
    later = [rehash({**r, "seq": r["seq"] + 1}) for r in records[2:]]
    real_log.write_records(records[:2] + [forged] + later)
    number = real_log.checkpoint_number(3)
    _fails_with(
        vigil,
        f"record 3: differs from the record signed in checkpoint {number} and record 4 does not follow it "
        "(record inserted or replaced)",
    )


def test_truncated_tail(vigil: Vigil, real_log: LogFiles) -> None:
    number = real_log.checkpoint_number(7)
    real_log.write_log(real_log.log_lines()[:6])
    result = _fails_with(
        vigil,
        f"record 7: missing: log ends at record 6 but checkpoint {number} covers 7 records (tail truncated)",
    )
    # and the cut log is not extended: the verify command itself could not be recorded
    assert result.err.splitlines()[1].startswith("FAIL: audit: record 7: missing: log ends at record 6")
    assert len(real_log.records()) == 6


def test_rewritten_tail_differs_from_signed_head(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    records[-1]["outcome"] = "failed"
    real_log.write_records(rechain(records, len(records) - 1))
    number = real_log.checkpoint_number(8)
    _fails_with(vigil, f"record 8: hash differs from the head signed in checkpoint {number} (log rewritten)")


def test_rechained_from_middle_differs_from_signed_head(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    records[3]["actor"]["operator"] = "mallory"
    real_log.write_records(rechain(records, 3))
    number = real_log.checkpoint_number(4)
    _fails_with(vigil, f"record 4: hash differs from the head signed in checkpoint {number} (log rewritten)")


def test_forged_checkpoint_bad_signature(vigil: Vigil, real_log: LogFiles) -> None:
    cps = real_log.checkpoints()
    # move checkpoint 4's time by a microsecond: still in order, but no longer what was signed
    t = cps[3]["time"]
    cps[3]["time"] = t[:-2] + str((int(t[-2]) + 1) % 10) + "Z" if t[-2] != "9" else t[:-2] + "8Z"
    real_log.write_checkpoints([line(cp) for cp in cps])
    _fails_with(vigil, "checkpoint 4: bad signature (checkpoint forged or altered)")


def test_forged_checkpoint_unknown_key(vigil: Vigil, real_log: LogFiles) -> None:
    cps = real_log.checkpoints()
    other = Ed25519PrivateKey.generate()
    fields = {k: v for k, v in cps[3].items() if k != "sig"}
    fields["key_id"] = key_id(other.public_key())
    cps[3] = {**fields, "sig": base64.b64encode(other.sign(canonical(fields))).decode()}
    real_log.write_checkpoints([line(cp) for cp in cps])
    _fails_with(vigil, f"checkpoint 4: signed by unknown key {fields['key_id']} (forged)")


def test_replayed_checkpoint(vigil: Vigil, real_log: LogFiles) -> None:
    lines = real_log.checkpoint_lines()
    last = json.loads(lines[-1])["count"]
    real_log.write_checkpoints(lines + [lines[1]])
    _fails_with(
        vigil,
        f"checkpoint {len(lines) + 1}: count {json.loads(lines[1])['count']} does not follow "
        f"checkpoint {len(lines)}'s {last} (checkpoint replayed or rolled back)",
    )


def test_rolled_back_checkpoint_time(vigil: Vigil, real_log: LogFiles, home: Path) -> None:
    # even one signed with the appliance's own key may not go back in time
    key = serialization.load_pem_private_key((home / "audit" / "audit.key").read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    cps = real_log.checkpoints()
    fields = {k: v for k, v in cps[4].items() if k != "sig"}
    fields["time"] = cps[2]["time"]
    cps[4] = {**fields, "sig": base64.b64encode(key.sign(canonical(fields))).decode()}
    real_log.write_checkpoints([line(cp) for cp in cps])
    _fails_with(
        vigil,
        f"checkpoint 5: time goes backwards ({cps[2]['time']} is before checkpoint 4's {cps[3]['time']}) "
        "(checkpoint replayed or rolled back)",
    )


def test_time_backwards(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    backdated = "2020-01-01T00:00:00.000000Z"
    records[3]["time"] = backdated
    real_log.write_records(rechain(records, 3))
    _fails_with(
        vigil, f"record 4: time goes backwards ({backdated} is before record 3's {records[2]['time']})"
    )


def test_malformed_line_not_json(vigil: Vigil, real_log: LogFiles) -> None:
    lines = real_log.log_lines()
    lines[4] = "{this is not json\n"
    real_log.write_log(lines)
    _fails_with(vigil, "line 5: malformed: not valid JSON")


def test_malformed_record_missing_field(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    del records[4]["host"]
    real_log.write_records(records)
    _fails_with(vigil, "record 5: malformed: missing field 'host'")


def test_malformed_record_wrong_type(vigil: Vigil, real_log: LogFiles) -> None:
    records = real_log.records()
    records[4]["actor"]["uid"] = str(records[4]["actor"]["uid"])
    real_log.write_records(records)
    _fails_with(vigil, "record 5: malformed: field 'actor.uid' must be an integer")


def test_malformed_line_cut_short(vigil: Vigil, real_log: LogFiles) -> None:
    lines = real_log.log_lines()
    real_log.write_log(lines[:-1] + [lines[-1][:40]])
    _fails_with(vigil, f"line {len(lines)}: malformed: incomplete line (no newline at the end)")


def test_malformed_checkpoint(vigil: Vigil, real_log: LogFiles) -> None:
    cps = real_log.checkpoints()
    cps[1]["count"] = "2"
    real_log.write_checkpoints([line(cp) for cp in cps])
    _fails_with(vigil, "checkpoint 2: malformed: field 'count' must be an integer >= 0")


def test_checkpoints_deleted(vigil: Vigil, real_log: LogFiles) -> None:
    real_log.write_checkpoints([])
    _fails_with(vigil, "checkpoint 1: missing: the log has 8 records but no signed checkpoint")


def test_verify_against_another_public_key(vigil: Vigil, real_log: LogFiles, tmp_path: Path) -> None:
    other = Ed25519PrivateKey.generate().public_key()
    pub = tmp_path / "other.pub"
    pub.write_bytes(
        other.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    ours = real_log.checkpoints()[0]["key_id"]
    result = vigil("audit", "verify", "--checkpoint-key", str(pub))
    assert result.rc == 1
    assert result.first_error == f"FAIL: audit: checkpoint 1: signed by unknown key {ours} (forged)"


def test_checkpoint_older_than_its_record(vigil: Vigil, real_log: LogFiles, home: Path) -> None:
    key = serialization.load_pem_private_key((home / "audit" / "audit.key").read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    cps = real_log.checkpoints()
    fields = {k: v for k, v in cps[0].items() if k != "sig"}
    fields["time"] = "2020-01-01T00:00:00.000000Z"
    cps[0] = {**fields, "sig": base64.b64encode(key.sign(canonical(fields))).decode()}
    real_log.write_checkpoints([line(cp) for cp in cps])
    _fails_with(vigil, "checkpoint 1: time is before record 1's (checkpoint replayed)")
