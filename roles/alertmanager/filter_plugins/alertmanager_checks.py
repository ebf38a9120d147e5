"""Filters of the upgrade health check (tasks/check.yml), over Alertmanager's `/api/v2/silences`.

`vigil_am_silence_ids`: the ids of the silences that are not expired (active or pending), sorted:
the baseline an upgrade must keep.
`vigil_am_silence_problems`: for each id of `ids`, what is wrong: the silence is gone, or it was
expired by a change made after `since` (epoch seconds). A silence that reached its own end during the
upgrade is not a problem.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

_FRACTION = re.compile(r"(\.\d{1,6})\d*")


def _silences(resp: Any) -> list[dict[str, Any]] | None:
    if not isinstance(resp, list):
        return None
    return [s for s in resp if isinstance(s, dict) and s.get("id")]


def _state(silence: dict[str, Any]) -> str:
    status = silence.get("status")
    return str(status.get("state", "")) if isinstance(status, dict) else ""


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    text = _FRACTION.sub(r"\1", text.strip())
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.replace(tzinfo=when.tzinfo or datetime.UTC).timestamp()


def vigil_am_silence_ids(resp: Any) -> list[str]:
    return sorted({str(s["id"]) for s in _silences(resp) or [] if _state(s) in ("active", "pending")})


def vigil_am_silence_problems(resp: Any, ids: list[Any], since: Any) -> list[str]:
    silences = _silences(resp)
    if silences is None:
        return ["no answer from /api/v2/silences"]
    by_id = {str(s["id"]): s for s in silences}
    out = []
    for sid in [str(i) for i in ids]:
        silence = by_id.get(sid)
        if silence is None:
            out.append(f"silence {sid} is gone")
            continue
        if _state(silence) == "expired":
            changed = _epoch(silence.get("updatedAt"))
            if changed is None or changed > float(since):
                out.append(f"silence {sid} was expired during the upgrade")
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "vigil_am_silence_ids": vigil_am_silence_ids,
            "vigil_am_silence_problems": vigil_am_silence_problems,
        }
