"""Filters of the upgrade health check (tasks/check.yml).

`vigil_rule_group_names`: the group names of rule files (their texts), sorted.
`vigil_vmalert_group_names`: the names of the groups vmalert has loaded (`/api/v1/rules`).
`vigil_vmalert_problems`: what is wrong with vmalert, from its `/api/v1/rules` answer, as lines
`group <name>: <reason>`: an expected group not loaded; a group evaluated last before `since` (epoch
seconds) when its interval is at most `max_interval` seconds (a longer group is not waited for); a
rule whose `lastError` is not empty (but for a group not waited for whose query found the store
restarting). vmalert 1.79 and 1.112 answer alike here (groups with `name`,
`interval` in seconds, `rules` with `lastEvaluation` and `lastError`; newer ones also give the
group's `lastEvaluation`).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import yaml

_FRACTION = re.compile(r"(\.\d{1,6})\d*")
#: how vmalert (1.79 and 1.112) says its datasource did not answer a rule's query
_UNREACHABLE = "error getting response from"


def vigil_rule_group_names(texts: list[Any]) -> list[str]:
    names: set[str] = set()
    for text in texts:
        doc = yaml.safe_load(str(text)) or {}
        for group in doc.get("groups") or []:
            if isinstance(group, dict) and group.get("name"):
                names.add(str(group["name"]))
    return sorted(names)


def _groups(resp: Any) -> list[dict[str, Any]] | None:
    if not isinstance(resp, dict):
        return None
    data = resp.get("data")
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        return None
    return [g for g in groups if isinstance(g, dict)]


def vigil_vmalert_group_names(resp: Any) -> list[str]:
    return sorted({str(g.get("name", "")) for g in _groups(resp) or [] if g.get("name")})


def _epoch(text: Any) -> float | None:
    """An RFC 3339 time as vmalert writes it (nanoseconds, Z or an offset); None for none or zero."""
    if not isinstance(text, str) or not text or text.startswith("0001-"):
        return None
    text = _FRACTION.sub(r"\1", text.strip())
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def _rules(group: dict[str, Any]) -> list[dict[str, Any]]:
    rules = group.get("rules")
    if not isinstance(rules, list):  # older answers split them by kind
        rules = list(group.get("alerting_rules") or []) + list(group.get("recording_rules") or [])
    return [r for r in rules if isinstance(r, dict)]


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vigil_vmalert_problems(resp: Any, expected: list[str], since: Any, max_interval: Any) -> list[str]:
    groups = _groups(resp)
    if groups is None:
        return ["no answer from /api/v1/rules"]
    since_f, cap = float(since), float(max_interval)
    loaded = {str(g.get("name", "")) for g in groups}
    out = [f"group {name}: not loaded" for name in expected if name not in loaded]
    for group in sorted(groups, key=lambda g: str(g.get("name", ""))):
        name = str(group.get("name", ""))
        rules = _rules(group)
        try:
            interval = float(group.get("interval") or 0)
        except (TypeError, ValueError):
            interval = 0.0
        for rule in rules:
            error = str(rule.get("lastError") or "").strip()
            # a group not waited for (interval above the cap: vigil_accounting_30d's 5 m) keeps, until it
            # runs again, the error of an evaluation that met VictoriaMetrics restarting in this very
            # step; whether the store answers is the victoriametrics role's own check, so such an error
            # is not vmalert's. Any other error, and any error of a group waited for, is.
            if error and not (interval > cap and _UNREACHABLE in error):
                out.append(f"group {name}: rule {rule.get('name', '?')}: lastError {' '.join(error.split())}")
        if name not in expected or interval > cap:
            continue
        times = [
            t
            for t in [_epoch(group.get("lastEvaluation"))] + [_epoch(r.get("lastEvaluation")) for r in rules]
            if t
        ]
        last = max(times) if times else None
        if last is None:
            out.append(f"group {name}: never evaluated")
        elif last <= since_f:
            out.append(f"group {name}: not evaluated since {_when(since_f)} (last {_when(last)})")
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "vigil_rule_group_names": vigil_rule_group_names,
            "vigil_vmalert_group_names": vigil_vmalert_group_names,
            "vigil_vmalert_problems": vigil_vmalert_problems,
        }
