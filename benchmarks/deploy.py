#!/usr/bin/env python3
"""Deploy wall time on the lab: a first deploy onto fresh hosts, then a rerun, per host.

    first deploy  (fresh hosts: `lab down`, `lab up`, then `vigil deploy`)
    rerun         (the same deploy again: nothing to change)
    rerun / first                                   goal <= 0.30
    check         (`vigil deploy --check` on the unchanged site: the daily drift question)
    check / rerun                                   goal <= 1.0

Per host: the time from the play's first task on that host to its last task, read from the
run's ansible-runner events (`$VIGIL_HOME/runs/<id>/artifacts/job_events`); then, for the first
deploy and the rerun, the ten most expensive tasks and the seconds per role
(benchmarks/deploy_profile.py, which stands in for Ansible's `profile_tasks`).
Needs root and the lab's prerequisites (scripts/system-deps.sh).
Usage: python benchmarks/deploy.py [--workdir DIR] [--keep-lab]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_profile import profile  # noqa: E402


def vigil(env: dict[str, str], *args: str) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "vigil.installer.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    if res.returncode != 0:
        raise SystemExit(
            f"FAIL: benchmark: vigil {' '.join(args)}: {res.stderr.strip() or res.stdout[-2000:]}"
        )
    return res.stdout


def signed_store(env: dict[str, str], work: Path, channels: list[str]) -> None:
    """A release key and trust root under WORK, installed in env's VIGIL_HOME, and one bundle per
    channel built with it (versions 1, 2, ...) and imported."""
    key = work / "release"
    vigil(env, "keys", "generate", "--out", str(key))
    trust = str(work / "trust.json")
    vigil(env, "trust", "init", "--key", f"{key}.pub", "--threshold", "1", "--out", trust)
    vigil(env, "trust", "install", trust)
    for version, channel in enumerate(channels, start=1):
        build = ["--channel", channel, "--version", str(version), "--key", f"{key}.key"]
        vigil(env, "bundle", "build", *build, "--out", str(work / "out"))
        vigil(env, "bundle", "import", str(work / "out" / f"vigil-{version}-amd64.bundle"))


def per_host_seconds(run_dir: Path) -> dict[str, float]:
    spans: dict[str, list[float]] = {}
    for path in (run_dir / "artifacts" / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        host = (event.get("event_data") or {}).get("host")
        created = event.get("created")
        if not host or not created or not event.get("event", "").startswith("runner_on_"):
            continue
        t = datetime.fromisoformat(created).timestamp()
        span = spans.setdefault(host, [t, t])
        span[0], span[1] = min(span[0], t), max(span[1], t)
    return {h: round(b - a, 1) for h, (a, b) in sorted(spans.items())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep-lab", action="store_true", help="leave the lab running afterwards")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vigil-deploy-bench-", dir=args.workdir))
    env = {**os.environ, "VIGIL_HOME": str(work / "home"), "PYTHONPATH": str(REPO)}
    inventory = work / "inventory"
    signed_store(env, work, ["debian"])

    vigil(env, "lab", "down")
    t = time.monotonic()
    vigil(env, "lab", "up", "--inventory", str(inventory))
    lab_up = time.monotonic() - t

    runs = []
    for _ in range(2):
        t = time.monotonic()
        out = json.loads(vigil(env, "deploy", "-i", str(inventory), "--json"))
        runs.append((time.monotonic() - t, out))
    t = time.monotonic()
    check = json.loads(vigil(env, "deploy", "-i", str(inventory), "--check", "--json"))
    check_s = time.monotonic() - t
    if not args.keep_lab:
        vigil(env, "lab", "down")
    (first_s, first), (rerun_s, rerun) = runs
    first_hosts, rerun_hosts = (
        per_host_seconds(Path(first["run_dir"])),
        per_host_seconds(Path(rerun["run_dir"])),
    )
    print(f"lab up (fresh hosts, warm root fs cache) {lab_up:.1f} s")
    print(f"first deploy {first_s:7.1f} s   changed {sum(c['changed'] for c in first['hosts'].values())}")
    print(f"rerun        {rerun_s:7.1f} s   changed {sum(c['changed'] for c in rerun['hosts'].values())}")
    print(f"rerun / first  {rerun_s / first_s:.3f}  (goal <= 0.30)")
    drift = sum(c["changed"] for c in check["hosts"].values())
    print(f"check        {check_s:7.1f} s   would change {drift}")
    print(f"check / rerun  {check_s / rerun_s:.3f}  (goal <= 1.0)")
    print(f"{'host':<8} {'first s':>8} {'rerun s':>8} {'ratio':>6}")
    for host in sorted(first_hosts):
        a, b = first_hosts[host], rerun_hosts.get(host, 0.0)
        print(f"{host:<8} {a:>8.1f} {b:>8.1f} {b / a if a else 0:>6.2f}")
    for name, out in (("first deploy", first), ("rerun", rerun)):
        p = profile(Path(out["run_dir"]))
        print(f"\n{name}: {len(p['tasks'])} tasks, {p['host_results']} host results; the ten most expensive:")
        for t in sorted(p["tasks"], key=lambda t: -t["seconds"])[:10]:
            print(f"  {t['seconds']:6.2f} s  {t['role']:<18} {t['task'][:80]}")
        print("  per role: " + ", ".join(f"{r} {s:.0f} s" for r, s in p["by_role"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
