"""The shape of a record and of a checkpoint, checked field by field.

A line that does not have exactly this shape is *malformed*: it is reported with its
sequence number when one can be read from it, else with its line number.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from vigil.installer.audit._canonical import is_hex64, is_time
from vigil.installer.audit.errors import AuditError

OUTCOMES = ("ok", "failed", "refused")

RECORD_FIELDS = (
    "seq",
    "time",
    "actor",
    "host",
    "action",
    "object",
    "outcome",
    "reason",
    "details",
    "prev",
    "hash",
)
ACTOR_FIELDS = ("user", "uid", "operator")
CHECKPOINT_FIELDS = ("count", "head", "time", "key_id", "sig")


def _is_int(value: object) -> bool:
    return type(value) is int  # JSON true/false are not numbers here


def _load_object(line: bytes, where: str) -> dict[str, Any]:
    if not line.endswith(b"\n"):
        raise AuditError(f"{where}: malformed: incomplete line (no newline at the end)")
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise AuditError(f"{where}: malformed: not valid JSON") from None
    if not isinstance(obj, dict):
        raise AuditError(f"{where}: malformed: not a JSON object")
    return obj


def _exact_fields(obj: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        if name not in obj:
            raise AuditError(f"{where}: malformed: missing field '{name}'")
    extra = sorted(set(obj) - set(fields))
    if extra:
        raise AuditError(f"{where}: malformed: unexpected field '{extra[0]}'")


def parse_record(line: bytes, lineno: int) -> dict[str, Any]:
    """One log line as a record dict, or :class:`AuditError` saying why it is malformed."""
    obj = _load_object(line, f"line {lineno}")
    seq = obj.get("seq")
    if type(seq) is not int or seq < 1:
        raise AuditError(f"line {lineno}: malformed: no valid 'seq' (a positive integer)")
    where = f"record {seq}"
    _exact_fields(obj, RECORD_FIELDS, where)

    def bad(field: str, what: str) -> AuditError:
        return AuditError(f"{where}: malformed: field '{field}' must be {what}", seq=seq)

    if not is_time(obj["time"]):
        raise bad("time", "UTC RFC 3339 with microseconds, e.g. 2026-01-31T12:00:00.000000Z")
    actor = obj["actor"]
    if not isinstance(actor, dict):
        raise bad("actor", "an object")
    _exact_fields(actor, ACTOR_FIELDS, f"{where}: actor")
    if not isinstance(actor["user"], str):
        raise bad("actor.user", "a string")
    if not _is_int(actor["uid"]):
        raise bad("actor.uid", "an integer")
    if actor["operator"] is not None and not isinstance(actor["operator"], str):
        raise bad("actor.operator", "a string or null")
    for name in ("host", "action", "object", "reason"):
        if not isinstance(obj[name], str):
            raise bad(name, "a string")
    if not obj["action"]:
        raise bad("action", "a non-empty dotted name")
    if obj["outcome"] not in OUTCOMES:
        raise bad("outcome", "one of " + ", ".join(OUTCOMES))
    if not isinstance(obj["details"], dict):
        raise bad("details", "an object")
    for name in ("prev", "hash"):
        if not is_hex64(obj[name]):
            raise bad(name, "64 lower-case hex digits")
    return obj


def parse_checkpoint(line: bytes, number: int) -> dict[str, Any]:
    """One checkpoints line (the ``number``-th, from 1) as a dict, or :class:`AuditError`."""
    where = f"checkpoint {number}"
    obj = _load_object(line, where)
    _exact_fields(obj, CHECKPOINT_FIELDS, where)
    if not _is_int(obj["count"]) or obj["count"] < 0:
        raise AuditError(f"{where}: malformed: field 'count' must be an integer >= 0")
    if not is_hex64(obj["head"]):
        raise AuditError(f"{where}: malformed: field 'head' must be 64 lower-case hex digits")
    if not is_time(obj["time"]):
        raise AuditError(f"{where}: malformed: field 'time' must be UTC RFC 3339 with microseconds")
    if not isinstance(obj["key_id"], str):
        raise AuditError(f"{where}: malformed: field 'key_id' must be a string")
    if not isinstance(obj["sig"], str):
        raise AuditError(f"{where}: malformed: field 'sig' must be base64")
    try:
        base64.b64decode(obj["sig"], validate=True)
    except (binascii.Error, ValueError):
        raise AuditError(f"{where}: malformed: field 'sig' must be base64") from None
    return obj


def signed_part(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The fields of a checkpoint its signature covers (all but ``sig``)."""
    return {k: v for k, v in checkpoint.items() if k != "sig"}
