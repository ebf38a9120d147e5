#!/usr/bin/env python3
"""Where a deploy's time goes, read from one run's ansible-runner events.

Ansible's `profile_tasks` callback lives in the ansible.posix collection, which vigil does not ship;
the events that ansible-runner records for every run carry the same information. A task's wall
time is the time from its start to the start of whatever came next (the next task, handler, play
or the end of the run): under the linear strategy that is what the operator waits for.

    python benchmarks/deploy_profile.py RUN_DIR [--top 10]
    (RUN_DIR: $VIGIL_HOME/runs/<id>, printed as `run_dir` by `vigil deploy --json`)

Prints the run's wall time, the number of tasks and of host-task results, the most expensive
tasks, the seconds per role, and the seconds per module (the task's action: what one round trip
to the hosts, or the controller's own work, costs across the run).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

_STARTS = ("playbook_on_task_start", "playbook_on_handler_task_start")
_BOUNDARIES = _STARTS + ("playbook_on_play_start", "playbook_on_stats")


def load_events(run_dir: Path) -> list[dict]:
    events = []
    for path in (run_dir / "artifacts" / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        if event.get("created"):
            events.append(event)
    events.sort(key=lambda e: e.get("counter", 0))
    return events


def profile(run_dir: Path) -> dict:
    """Tasks in order, each with its wall seconds, role, name and host results."""
    events = load_events(run_dir)
    if not events:
        raise SystemExit(f"FAIL: {run_dir}: no ansible-runner events under artifacts/job_events")
    tasks: list[dict] = []
    current: dict | None = None
    for event in events:
        kind = event.get("event", "")
        when = datetime.fromisoformat(event["created"]).timestamp()
        data = event.get("event_data") or {}
        if kind in _BOUNDARIES:
            if current is not None:
                current["seconds"] = when - current["t0"]
                current = None
            if kind in _STARTS:
                current = {
                    "t0": when,
                    "role": data.get("role") or "(play)",
                    "task": data.get("task") or data.get("name") or "?",
                    "action": (data.get("resolved_action") or data.get("task_action") or "?").removeprefix(
                        "ansible.builtin."
                    ),
                    "results": 0,
                }
                tasks.append(current)
        elif kind.startswith("runner_on_") and current is not None and kind != "runner_on_start":
            current["results"] += 1
    first = datetime.fromisoformat(events[0]["created"]).timestamp()
    last = datetime.fromisoformat(events[-1]["created"]).timestamp()
    tasks = [t for t in tasks if "seconds" in t]
    by_role: dict[str, float] = defaultdict(float)
    by_action: dict[str, tuple[float, int, int]] = {}  # module -> (seconds, tasks, host results)
    for t in tasks:
        by_role[t["role"]] += t["seconds"]
        seconds, n, results = by_action.get(t["action"], (0.0, 0, 0))
        by_action[t["action"]] = (seconds + t["seconds"], n + 1, results + t["results"])
    return {
        "wall_s": last - first,
        "tasks": tasks,
        "host_results": sum(t["results"] for t in tasks),
        "by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1])),
        "by_action": dict(sorted(by_action.items(), key=lambda kv: -kv[1][0])),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    p = profile(args.run_dir)
    ran = [t for t in p["tasks"] if t["results"]]
    print(
        f"wall {p['wall_s']:.1f} s, {len(p['tasks'])} tasks ({len(ran)} ran on a host), "
        f"{p['host_results']} host results"
    )
    print(f"\ntop {args.top} tasks by wall time:")
    for t in sorted(p["tasks"], key=lambda t: -t["seconds"])[: args.top]:
        print(f"  {t['seconds']:6.2f} s  {t['role']:<18} {t['task'][:80]}")
    print("\nseconds per role:")
    for role, seconds in p["by_role"].items():
        n = sum(1 for t in p["tasks"] if t["role"] == role)
        print(f"  {seconds:7.1f} s  {role:<18} {n:4d} tasks")
    print("\nseconds per module (tasks, host results, seconds per task):")
    for action, (seconds, n, results) in p["by_action"].items():
        print(f"  {seconds:7.1f} s  {action:<26} {n:4d} tasks {results:5d} results {seconds / n:5.2f} s/task")
    return 0


if __name__ == "__main__":
    sys.exit(main())
