"""Filters of the upgrade health check (tasks/check.yml, tasks/check_targets.yml).

`vigil_seconds`: a Prometheus duration (`30s`, `1m30s`) or a number of seconds, as a number.
`vigil_vm_value`: the first value of an instant query's answer (`/api/v1/query`), or None.
`vigil_vm_target_problems`: what is wrong with one host's targets, from the answer to
`up{instance="<host>"}[<window>]` (raw samples, with their own timestamps): `[job, reason]` for each
expected job that has no `up` series, whose last sample is not newer than `since` (epoch seconds),
or whose last sample is not 1.
`vigil_vmagent_target_problems`: the same from a vmagent's own `/api/v1/targets` (the monitoring
pair: the targets are each vmagent's, and each replica holds both vmagents' samples, so a replica's
`up` would hide one vmagent that cannot reach a target): `[job, reason]` for each expected job with no
target of that instance, not scraped since `since`, or not up.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")


def vigil_seconds(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return float(sum(int(n) * _UNITS[u] for n, u in parts))


def _result(resp: Any) -> list[Any] | None:
    if not isinstance(resp, dict) or resp.get("status") != "success":
        return None
    data = resp.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    return result if isinstance(result, list) else None


def vigil_vm_value(resp: Any) -> float | None:
    result = _result(resp)
    if not result or not isinstance(result[0], dict):
        return None
    value = result[0].get("value")
    try:
        return float(value[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vigil_vm_target_problems(resp: Any, jobs: list[str], since: Any) -> list[list[str]]:
    result = _result(resp)
    if result is None:
        return [[str(job), "VictoriaMetrics gave no answer to the query of its `up` series"] for job in jobs]
    since_f = float(since)
    last: dict[str, tuple[float, str]] = {}
    for series in result:
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            continue
        job = str(series["metric"].get("job", ""))
        samples = series.get("values")
        if samples is None and series.get("value") is not None:
            samples = [series["value"]]
        for sample in samples or []:
            try:
                ts, value = float(sample[0]), str(sample[1])
            except (TypeError, ValueError, IndexError, KeyError):
                continue
            if job not in last or ts > last[job][0]:
                last[job] = (ts, value)
    out = []
    for job in jobs:
        if job not in last:
            out.append([job, "not scraped (no `up` series for it)"])
            continue
        ts, value = last[job]
        if ts <= since_f:
            out.append([job, f"not scraped since {_when(since_f)} (last scrape {_when(ts)})"])
        elif value != "1":
            out.append([job, f"down: up == {value} at {_when(ts)}"])
    return out


def _epoch(text: Any) -> float | None:
    try:
        when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


def vigil_vmagent_target_problems(resp: Any, jobs: list[str], instance: str, since: Any) -> list[list[str]]:
    data = resp.get("data") if isinstance(resp, dict) and resp.get("status") == "success" else None
    targets = data.get("activeTargets") if isinstance(data, dict) else None
    if not isinstance(targets, list):
        return [[str(job), "vmagent gave no answer to the query of its targets"] for job in jobs]
    since_f = float(since)
    found: dict[str, tuple[float, str, str]] = {}
    for t in targets:
        labels = t.get("labels") if isinstance(t, dict) else None
        if not isinstance(labels, dict) or labels.get("instance") != instance:
            continue
        job = str(labels.get("job", ""))
        ts = _epoch(t.get("lastScrape")) or 0.0
        if job not in found or ts > found[job][0]:
            found[job] = (ts, str(t.get("health", "")), str(t.get("lastError", ""))[:200])
    out = []
    for job in jobs:
        if job not in found:
            out.append([job, "not scraped (vmagent has no such target)"])
            continue
        ts, health, error = found[job]
        if ts <= since_f:
            out.append([job, f"not scraped since {_when(since_f)}"])
        elif health != "up":
            out.append([job, f"down: {health or 'unknown'}" + (f" ({error})" if error else "")])
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "vigil_seconds": vigil_seconds,
            "vigil_vm_value": vigil_vm_value,
            "vigil_vm_target_problems": vigil_vm_target_problems,
            "vigil_vmagent_target_problems": vigil_vmagent_target_problems,
        }
