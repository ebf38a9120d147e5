#!/usr/bin/env python3
"""What one evaluation of the accounting rule group costs VictoriaMetrics, now and at a git revision.

A VictoriaMetrics (the bundle's binary) holds --nodes GPU nodes of 8 GPUs for the --hours before now,
scraped every --scrape seconds: the fields the rules read (GPU_TEMP, POWER_USAGE,
TOTAL_ENERGY_CONSUMPTION, FB_USED, GPU_UTIL), each GPU in the series of its node's job, and the jobs'
slurm_job_info. Each rule of the ``vigil_accounting`` group is asked as vmalert asks it (an instant
query at a whole minute, nocache=1), --rounds times; the median of each rule is summed. The same is
done for the group as it was at --compare (a git revision; default HEAD), in the same run, so the
ratio is what the change costs on this machine. A rule of the old group that read another rule's
series reads nothing here (no vmalert ran), which makes the old figure a lower bound.

    python benchmarks/accounting_rules.py [--nodes 64] [--hours 2] [--compare REV] [--vm-binary PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
assert _spec and _spec.loader
bench_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_report)

RULES = "roles/vmalert/files/rules/vigil-accounting.yml"
FIELDS = {
    "DCGM_FI_DEV_GPU_TEMP": lambda t, g: 60.0 + g,
    "DCGM_FI_DEV_POWER_USAGE": lambda t, g: 350.0,
    "DCGM_FI_DEV_FB_USED": lambda t, g: 40000.0,
    "DCGM_FI_DEV_GPU_UTIL": lambda t, g: 95.0,
}


def lines(nodes: int, start: int, end: int, step: int) -> Iterator[dict[str, Any]]:
    times = list(range(start, end + 1, step))
    stamps = [t * 1000 for t in times]
    for n in range(nodes):
        instance = f"gpu{n:04d}:9400"
        job = str(100000 + n)
        who = {"user": f"u{n % 37}", "account": f"acct{n % 11}", "partition": "gpu"}
        for g in range(8):
            labels = {
                "instance": instance,
                "gpu": str(g),
                "hpc_job": job,
                "modelName": "NVIDIA H100 80GB HBM3",
            }
            for name, value in FIELDS.items():
                yield {
                    "metric": {"__name__": name, **labels},
                    "values": [value(t, g) for t in times],
                    "timestamps": stamps,
                }
            yield {
                "metric": {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **labels},
                "values": [1e9 + (t - start) * 350_000.0 for t in times],
                "timestamps": stamps,
            }
        yield {
            "metric": {"__name__": "slurm_job_info", "instance": instance, "hpc_job": job, **who},
            "values": [1.0] * len(times),
            "timestamps": stamps,
        }


def group_rules(text: str) -> dict[str, str]:
    for group in yaml.safe_load(text)["groups"]:
        if group["name"] == "vigil_accounting":
            return {r["record"]: r["expr"] for r in group["rules"]}
    raise SystemExit("FAIL: no vigil_accounting group")


def timed(vm: Any, expr: str, at: int) -> float:
    body = urllib.parse.urlencode({"query": expr, "time": str(at), "nocache": "1"}).encode()
    t = time.perf_counter()
    doc = json.loads(bench_report.http(f"{vm.url}/api/v1/query", data=body))
    took = time.perf_counter() - t
    if doc.get("status") != "success":
        raise SystemExit(f"FAIL: {expr[:80]}: {doc}")
    return took


def evaluate(vm: Any, rules: dict[str, str], at: int, rounds: int) -> dict[str, float]:
    return {
        name: statistics.median(timed(vm, expr, at) for _ in range(rounds)) for name, expr in rules.items()
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--scrape", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", default="HEAD", help="git revision of the group to compare with")
    ap.add_argument("--vm-binary")
    a = ap.parse_args()
    binary = bench_report.find_binary(a.vm_binary)
    new = group_rules((ROOT / RULES).read_text())
    old_text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{a.compare}:{RULES}"], capture_output=True, text=True, check=True
    ).stdout
    old = group_rules(old_text)
    tmp = Path(tempfile.mkdtemp(prefix="vigil-bench-rules-"))
    vm = bench_report.VM(binary, tmp / "vm")
    try:
        now = int(time.time()) // 60 * 60 - 120
        start = now - int(a.hours * 3600)
        series, samples, _gen_s, load_s = vm.load(lines(a.nodes, start, now, a.scrape))
        print(f"{a.nodes} nodes, {a.nodes * 8} GPUs: {series} series, {samples} samples in {load_s:.0f} s")
        evaluate(vm, new, now, 1)  # warm the index for both
        # alternate the two groups so that the machine's noise falls on both alike
        got_old, got_new = [], []
        for _ in range(a.rounds):
            got_old.append(evaluate(vm, old, now, 1))
            got_new.append(evaluate(vm, new, now, 1))
        med_old = {k: statistics.median(r[k] for r in got_old) for k in old}
        med_new = {k: statistics.median(r[k] for r in got_new) for k in new}
        for name in new:
            before = f"{med_old[name]:7.3f}" if name in med_old else "      -"
            print(f"  {name:50s} {before} s -> {med_new[name]:7.3f} s")
        total_old, total_new = sum(med_old.values()), sum(med_new.values())
        print(
            f"group at {a.compare}: {total_old:.2f} s per evaluation; now: {total_new:.2f} s "
            f"({total_new / total_old:.2f}x); the group runs every 60 s"
        )
        return 0
    finally:
        vm.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
