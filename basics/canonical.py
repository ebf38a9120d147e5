"""Canonical JSON: the one byte form of a JSON value that digests and signatures are computed over.

Keys sorted, no insignificant whitespace, UTF-8 as is (not ``\\u`` escapes), and no NaN or
infinity (JSON has none; a value that holds one is refused rather than written non-standard).
Trust roots, audit records and checkpoints all hash these bytes, so there is one function for it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> bytes:
    """The canonical bytes of ``obj``; ``ValueError`` for NaN or infinity."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def canonical_digest(obj: Any) -> str:
    """SHA-256 hex of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()
