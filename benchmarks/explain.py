#!/usr/bin/env python3
"""How long `vigil explain job` takes for a large job in a large store.

A VictoriaMetrics (the bundle's binary, default flags as the role deploys it) holds a simulated fleet
of --nodes nodes with 8 GPUs each: every GPU's DCGM fields (the ones `vigil explain` reads) for the
8 days before now at --idle-step seconds, each GPU's samples in the series of the job on it; one job
of --job-gpus GPUs (whole nodes) ran the last hour at 15 s, one of its GPUs with the 02:42 incident
(single-bit errors rising, then a double-bit error and XID 48), and vmalert's ALERTS series for it.
The rest of the fleet runs jobs of 4 hours (each node one job at a time).

What is timed: `explain_job` for the large job (--rounds times, the median), and, as the baseline
measured in the same run, one instant query that touches every GPU of the fleet
(`count(last_over_time(DCGM_FI_DEV_GPU_TEMP[5m]))`). The issue's goal is the answer in under 5 s
for a job of 64 GPUs on 4,096 GPUs.

    python benchmarks/explain.py [--nodes 512] [--job-gpus 64] [--vm-binary PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
assert _spec and _spec.loader
bench_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_report)

from vigil.installer.reports import VictoriaMetrics  # noqa: E402
from vigil.installer.reports.explain import explain_job  # noqa: E402

FIELDS = (
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
)
JOB = "900001"


def fleet(nodes: int, job_nodes: int, now: int, idle_step: int) -> Iterator[dict[str, Any]]:
    start = now - 8 * 86400
    job_start = now - 3600
    fault = now - 60
    for n in range(nodes):
        host = f"gpu{n:04d}"
        spans: list[tuple[int, int, str, int]] = []
        t = start
        while t < now:  # 4-hour jobs back to back, ids per node
            hi = min(t + 4 * 3600, now)
            spans.append((t, hi, f"{n * 100 + len(spans)}", idle_step))
            t = hi
        if n < job_nodes:  # the large job: the last hour, at 15 s
            spans = [(lo, min(hi, job_start), j, s) for lo, hi, j, s in spans if lo < job_start]
            spans.append((job_start, now - 30, JOB, 15))
        for gpu in range(8):
            incident = n == 0 and gpu == 3
            for lo, hi, job, step in spans:
                times = list(range(lo, hi, step))
                labels = {
                    "instance": host,
                    "job": "dcgm_exporter",
                    "gpu": str(gpu),
                    "UUID": f"GPU-{n:04d}{gpu}",
                    "modelName": "NVIDIA H100 80GB HBM3",
                    "hpc_job": job,
                }
                stamps = [x * 1000 for x in times]
                for name in FIELDS:
                    if name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
                        values = [1e9 + (x - start) * 300_000.0 for x in times]
                    elif name == "DCGM_FI_DEV_GPU_TEMP":
                        values = [65.0] * len(times)
                    elif incident and name == "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":
                        values = [max(0.0, float((x - job_start) // 60) ** 2) for x in times]
                    elif incident and name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS"):
                        hit = 1.0 if name.endswith("TOTAL") else 48.0
                        values = [hit if x >= fault else 0.0 for x in times]
                    else:
                        values = [0.0] * len(times)
                    yield {"metric": {"__name__": name, **labels}, "values": values, "timestamps": stamps}
    times = list(range(fault + 30, now, 10))
    for alert in ("GpuEccDoubleBitError", "GpuXidHardwareError"):
        yield {
            "metric": {
                "__name__": "ALERTS",
                "alertname": alert,
                "alertstate": "firing",
                "severity": "P1",
                "instance": "gpu0000",
                "gpu": "3",
            },
            "values": [1.0] * len(times),
            "timestamps": [x * 1000 for x in times],
        }
    for n in range(job_nodes):
        times = list(range(job_start, now - 30, 15))
        yield {
            "metric": {
                "__name__": "slurm_job_info",
                "instance": f"gpu{n:04d}",
                "hpc_job": JOB,
                "user": "alice",
                "account": "physics",
                "partition": "gpu",
                "node": f"gpu{n:04d}",
            },
            "values": [1.0] * len(times),
            "timestamps": [x * 1000 for x in times],
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=512, help="nodes of 8 GPUs (default 512: 4,096 GPUs)")
    ap.add_argument("--job-gpus", type=int, default=64, help="GPUs of the explained job (whole nodes)")
    ap.add_argument("--idle-step", type=int, default=300, help="seconds between samples outside the job")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--vm-binary", help="victoria-metrics binary (default: the bundle's)")
    a = ap.parse_args()
    binary = bench_report.find_binary(a.vm_binary)
    tmp = Path(tempfile.mkdtemp(prefix="vigil-bench-explain-"))
    vm = None
    try:
        vm = bench_report.VM(binary, tmp / "vm")
        now = int(time.time()) // 60 * 60
        series, samples, gen_s, load_s = vm.load(fleet(a.nodes, a.job_gpus // 8, now, a.idle_step))
        print(
            f"loaded {series:,} series, {samples:,} samples ({gen_s:.1f} s making, {load_s:.1f} s importing)"
        )
        client = VictoriaMetrics(vm.url)
        time.sleep(2)
        base, took = [], []
        doc: dict[str, Any] = {}
        for _ in range(a.rounds):
            t = time.perf_counter()
            client.query("count(last_over_time(DCGM_FI_DEV_GPU_TEMP[5m]))", now)
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            doc = explain_job(client, JOB, now=now)
            took.append(time.perf_counter() - t)
        b, e = statistics.median(base), statistics.median(took)
        print(
            f"fleet {a.nodes * 8:,} GPUs, job {len(doc['gpus'])} GPUs: explain median {e:.2f} s "
            f"(min {min(took):.2f}, max {max(took):.2f}); baseline query {b:.3f} s; ratio {e / b:.1f}"
        )
        print("verdicts:", *doc["verdicts"], sep="\n  ")
        return 0 if len(doc["gpus"]) == a.job_gpus and doc["verdicts"] else 1
    finally:
        if vm is not None:
            vm.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
