"""Filter `vigil_rule_file`: a shipped rule file as it is deployed.

The files under files/rules/ are in Prometheus' rule format as both promtool and vmalert 1.79
(the debian channel's) accept it. Deployed, five settings may change them:

1. `keep_firing_for` ({alert: duration}, files/keep-firing-for.yml) adds each alert's
   `keep_firing_for:` (only where the bundle's vmalert is 1.92 or newer: older ones refuse it);
2. `duration_cap` (a duration such as `30s`) lowers every alert's `for:` and `keep_firing_for:` to
   at most that much (the lab, so that an injected fault shows within a minute); an annotation that
   states the `for:` ("for 5 minutes") is made to state the lowered one ("for 20 seconds"), so a
   page never claims a duration the rule does not have;
3. `runbook_base` (a URL) is put in front of each relative `runbook_url`;
4. `group_params` ({group: {param: [values]}}) adds vmalert's group `params:` (HTTP parameters of
   every query of the group), which promtool refuses. It is written as lines of its own under the
   group's `- name:` line, so the file keeps its comments;
5. `interval_cap` (a duration of at least 1s, such as `10s`) lowers each group's `interval:` to at
   most that much (the lab, so that a group is evaluated as often as the targets are scraped), except
   the groups named in `interval_kept`: the role keeps the accounting groups as shipped, since the
   reports count their samples (installer/reports/usage.py). A group without `interval:` is left
   alone: it runs at vmalert's `-evaluationInterval`.

Nothing to change: the file's own text comes back unchanged (comments included), so a rerun and
the shipped file agree byte for byte.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")


def _plain(value: object) -> str:
    """A plain `str` (Ansible hands over tagged str subclasses, which yaml.safe_dump refuses)."""
    return "".join(str(value))


def _seconds(text: str) -> float:
    text = str(text).strip()
    parts = _PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _UNITS[u] for n, u in parts)


def _add_group_params(text: str, group_params: dict[str, dict[str, list[str]]]) -> str:
    """``text`` with ``params:`` under each named group's ``- name:`` line; ValueError if one is missing."""
    lines = text.splitlines(keepends=True)
    names = {str(g.get("name")) for g in (yaml.safe_load(text) or {}).get("groups") or []}
    for group, params in group_params.items():
        if str(group) not in names:
            continue
        if not isinstance(params, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in params.values()
        ):
            raise ValueError(f"group {group}: params must map names to lists of strings")
        head = re.compile(r"(\s*)- name:\s*" + re.escape(str(group)) + r"\s*$")
        at = [i for i, line in enumerate(lines) if head.fullmatch(line.rstrip("\n"))]
        if len(at) != 1:
            raise ValueError(f"group {group}: no single `- name: {group}` line to put params under")
        indent = head.fullmatch(lines[at[0]].rstrip("\n")).group(1) + "  "  # type: ignore[union-attr]
        body = "".join(
            f"{indent}  {json.dumps(_plain(k))}: {json.dumps([_plain(x) for x in v])}\n"
            for k, v in params.items()
        )
        lines.insert(at[0] + 1, f"{indent}params:  # added on deploy (vmalert only)\n{body}")
    out = "".join(lines)
    groups = {str(g.get("name")): g for g in yaml.safe_load(out).get("groups") or []}
    for group, params in group_params.items():
        if str(group) in groups and groups[str(group)].get("params") != params:
            raise ValueError(f"group {group}: params did not land where expected")
    return out


def _interval_cap(value: str) -> float | None:
    """``value`` in seconds (None when empty); ValueError unless it is a duration of at least 1s."""
    if not value:
        return None
    seconds = _seconds(value)
    if seconds < 1:
        raise ValueError(f"interval cap {_plain(value)!r}: a group interval must be at least 1s")
    return seconds


def duration_words(seconds: float) -> str:
    """A duration as an alert's text states it: 60 -> "a minute", 300 -> "5 minutes", 20 -> "20 seconds"."""
    n = int(seconds)
    for size, one, many in (
        (3600, "an hour", "hours"),
        (60, "a minute", "minutes"),
        (1, "a second", "seconds"),
    ):
        if n % size == 0 and n >= size:
            return one if n == size else f"{n // size} {many}"
    return f"{seconds:g} seconds"


def _restate_for(rule: dict[str, Any], was: float, now: float) -> None:
    """Make the rule's annotations that state its `for:` state the lowered one."""
    old, new = f"for {duration_words(was)}", f"for {duration_words(now)}"
    annotations = rule.get("annotations") or {}
    for key, text in annotations.items():
        if isinstance(text, str) and old in text:
            annotations[key] = re.sub(re.escape(old) + r"\b", new, text)


def vigil_rule_file(
    text: str,
    keep_firing_for: dict[str, str] | None = None,
    duration_cap: str = "",
    runbook_base: str = "",
    group_params: dict[str, dict[str, list[str]]] | None = None,
    interval_cap: str = "",
    interval_kept: list[str] | tuple[str, ...] = (),
) -> str:
    text = _plain(text)
    if group_params:
        text = _add_group_params(text, group_params)
    doc: Any = yaml.safe_load(text)
    cap = _seconds(duration_cap) if duration_cap else None
    every = _interval_cap(interval_cap)
    if isinstance(interval_kept, str):
        raise ValueError(f"interval_kept {interval_kept!r}: a list of group names, not one string")
    kept = {_plain(name) for name in interval_kept}
    changed = lowered = False
    for group in doc.get("groups") or []:
        if (
            every is not None
            and "interval" in group
            and _plain(group.get("name")) not in kept
            and _seconds(group["interval"]) > every
        ):
            group["interval"] = _plain(interval_cap)
            changed = lowered = True
        for rule in group.get("rules") or []:
            if "alert" not in rule:
                continue
            if keep_firing_for and rule["alert"] in keep_firing_for:
                rule["keep_firing_for"] = _plain(keep_firing_for[rule["alert"]])
                changed = True
            if cap is not None:
                for key in ("for", "keep_firing_for"):
                    if key in rule and _seconds(rule[key]) > cap:
                        if key == "for":
                            _restate_for(rule, _seconds(rule[key]), cap)
                        rule[key] = _plain(duration_cap)
                        changed = True
            url = (rule.get("annotations") or {}).get("runbook_url", "")
            if runbook_base and url and "://" not in url:
                rule["annotations"]["runbook_url"] = (
                    _plain(runbook_base).rstrip("/") + "/" + url.split("/")[-1]
                )
                changed = True
    if not changed:
        return text if text.endswith("\n") else text + "\n"
    head = [line for line in text.splitlines() if line.startswith("#")][:1]
    settings = (
        f"# As deployed: keep_firing_for {'added' if keep_firing_for else 'not added'}, "
        f"durations capped at {duration_cap or 'nothing'}, "
        + (f"group intervals capped at {interval_cap}, " if lowered else "")
        + f"runbooks under {runbook_base or 'docs/runbooks'}.\n"
    )
    return (
        "\n".join(head)
        + "\n"
        + settings
        + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)
    )


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"vigil_rule_file": vigil_rule_file}
