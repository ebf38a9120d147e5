"""Canonical bytes, digests and timestamps shared by the writer and the verifier."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from vigil.basics.canonical import canonical_digest, canonical_json

#: ``prev`` of record 1 (and ``head`` of a checkpoint over an empty log)
GENESIS = "0" * 64

_TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


canonical = canonical_json
digest = canonical_digest


def record_hash(record: dict[str, Any]) -> str:
    """The ``hash`` a record must carry: SHA-256 of its canonical JSON without ``hash``."""
    return digest({k: v for k, v in record.items() if k != "hash"})


def format_time(when: datetime) -> str:
    """UTC RFC 3339 with microseconds and ``Z``; fixed width, so text order is time order."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now() -> str:
    """The current time as recorded in the log (tests replace this to move the clock)."""
    return format_time(datetime.now(UTC))


def is_time(value: object) -> bool:
    if not isinstance(value, str) or not _TIME_RE.fullmatch(value):
        return False
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def is_hex64(value: object) -> bool:
    return isinstance(value, str) and _HEX64_RE.fullmatch(value) is not None


def parse_since(text: str) -> str:
    """An ISO 8601 date or time given on the command line, as a log timestamp to compare with.

    A value without a zone is taken as UTC.
    """
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return format_time(when)
