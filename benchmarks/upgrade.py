#!/usr/bin/env python3
"""Upgrade wall time on the lab: debian (Debian 12's builds) -> debian-next (Debian 13's), per host.

    first deploy  (fresh hosts: `lab down`, `lab up`, then `vigil deploy` of the debian bundle)
    upgrade       (`vigil upgrade --to 2 --serial N`: the real version jump)
    no-op upgrade (`vigil upgrade --to 2` again: already at the target)
    no-op / first                                   goal <= 0.30
    status        (`vigil status`: the facts read back, every file hashed again)

Per host: the seconds each step's playbook run spent on it, summed over the upgrade's runs
(`$VIGIL_HOME/runs/<upgrade id>/*/artifacts/job_events`), as benchmarks/deploy.py counts them.
Needs root and the lab's prerequisites (scripts/system-deps.sh).
Usage: python benchmarks/upgrade.py [--workdir DIR] [--serial N] [--keep-lab]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy import per_host_seconds, signed_store, vigil  # noqa: E402 - the sibling benchmark's helpers


def timed(env: dict[str, str], *args: str) -> tuple[float, str]:
    t = time.monotonic()
    out = vigil(env, *args)
    return time.monotonic() - t, out


def upgrade_hosts(run_dir: Path) -> dict[str, float]:
    total: dict[str, float] = {}
    for step in sorted(p for p in run_dir.iterdir() if (p / "artifacts" / "job_events").is_dir()):
        for host, secs in per_host_seconds(step).items():
            total[host] = round(total.get(host, 0.0) + secs, 1)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--serial", type=int, default=3, help="hosts changed at a time (default 3)")
    ap.add_argument("--keep-lab", action="store_true", help="leave the lab running afterwards")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vigil-upgrade-bench-", dir=args.workdir))
    env = {**os.environ, "VIGIL_HOME": str(work / "home"), "PYTHONPATH": str(Path(__file__).parent.parent)}
    inventory = str(work / "inventory")
    signed_store(env, work, ["debian", "debian-next"])

    vigil(env, "lab", "down")
    vigil(env, "lab", "up", "--inventory", inventory)
    first_s, first = timed(env, "deploy", "-i", inventory, "--bundle", "1", "--json")
    up_s, up = timed(env, "upgrade", "-i", inventory, "--to", "2", "--serial", str(args.serial), "--json")
    noop_s, noop = timed(env, "upgrade", "-i", inventory, "--to", "2", "--json")
    status_s, _ = timed(env, "status", "-i", inventory, "--json")
    if not args.keep_lab:
        vigil(env, "lab", "down")
    up_doc, noop_doc = json.loads(up), json.loads(noop)
    first_hosts = per_host_seconds(Path(json.loads(first)["run_dir"]))
    up_hosts = upgrade_hosts(Path(up_doc["run_dir"]))
    noop_hosts = upgrade_hosts(Path(noop_doc["run_dir"]))
    print(f"first deploy   {first_s:7.1f} s")
    print(f"upgrade        {up_s:7.1f} s   steps run {len(up_doc['steps'])} (--serial {args.serial})")
    print(
        f"no-op upgrade  {noop_s:7.1f} s   steps run {len(noop_doc['steps'])}, "
        f"skipped {len(noop_doc['skipped'])}"
    )
    print(f"no-op / first    {noop_s / first_s:.3f}  (goal <= 0.30)")
    print(f"status         {status_s:7.1f} s")
    print(f"{'host':<8} {'deploy s':>9} {'upgrade s':>10} {'no-op s':>8}")
    for host in sorted(first_hosts):
        print(
            f"{host:<8} {first_hosts[host]:>9.1f} {up_hosts.get(host, 0.0):>10.1f} "
            f"{noop_hosts.get(host, 0.0):>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
