"""Slurm exporter: scrape time vs the bare Slurm commands it runs, at 20,000 queued jobs, and peak memory.

Runs on the lab controller (ctl01, Slurm 22.05): submits 20 held job arrays of 1,000 tasks under
the account `xbench` (MaxArraySize is 1001 there; a pending array is one job record, so
MaxJobCount does not stop it), then on ctl01 times, ROUNDS times each:

- bare: `squeue`, `sinfo` and `sdiag` with the exporter's exact format strings, run at once by `sh`
  (the exporter runs them in parallel too) with their output thrown away;
- scrape: one `SlurmCollector.scrape()` — the same commands plus parsing and rendering;

prints the medians, their ratio (goal <= 1.2) and the exporter process's peak RSS (VmHWM), then
cancels the arrays. Usage (as root, lab up):  .venv/bin/python benchmarks/slurm_exporter.py [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vigil.bundle.fetchers._project import build_project_wheel
from vigil.exporters.slurm.commands import commands, new_marks
from vigil.installer.lab import LabPaths, ssh, ssh_argv

ROOT = Path(__file__).resolve().parents[1]

CTL = "198.18.0.11"
PREFIX = "/opt/vigil-test/exporters-bench"
ACCOUNT = "xbench"

REMOTE = r"""
import json, statistics, subprocess, sys, time
sys.path.insert(0, %(prefix)r)
from vigil.exporters.slurm import SlurmCollector
rounds = %(rounds)d
bare_cmd = %(bare)r
bare, scrape = [], []
col = SlurmCollector(timeout=60)
text = col.scrape()  # warm-up (and a check that every command answered)
assert 'slurm_up{command="squeue"} 1' in text, text[-2000:]
for _ in range(rounds):
    t = time.monotonic()
    subprocess.run(["sh", "-c", bare_cmd], check=True)
    bare.append(time.monotonic() - t)
    t = time.monotonic(); text = col.scrape(); scrape.append(time.monotonic() - t)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
pending = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
              if l.startswith("slurm_jobs{") and 'account="%(account)s"' in l)
print(json.dumps({"bare": bare, "scrape": scrape, "vmhwm_kib": hwm, "bytes": len(text),
                  "xbench_jobs": pending}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000, help="queued array tasks (multiple of 1000)")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    paths = LabPaths.from_env()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_project_wheel(ROOT / "exporters", Path(tmp))
        cmd = (
            f"rm -rf {PREFIX} && mkdir -p {PREFIX} && cat > /tmp/{wheel.name} && "
            f"python3 -m zipfile -e /tmp/{wheel.name} {PREFIX} && rm /tmp/{wheel.name}"
        )
        cp = subprocess.run(
            ssh_argv(paths, CTL, cmd), input=wheel.read_bytes(), capture_output=True, timeout=60
        )
        if cp.returncode != 0:
            print(f"FAIL: ctl01: {cp.stderr.decode().strip()}", file=sys.stderr)
            return 1
    cp = ssh(
        paths, CTL, "scontrol show config | awk '/^MaxJobCount/ {print $3}'; squeue -h -r -t all | wc -l"
    )
    limit, queued = (int(x) for x in cp.stdout.split())
    if a.jobs + queued > limit:
        print(
            f"FAIL: ctl01: MaxJobCount is {limit} and {queued} job records exist "
            f"(finished ones stay MinJobAge seconds): {a.jobs} more do not fit "
            f"(array tasks count one by one); raise MaxJobCount in the lab's slurm.conf or pass --jobs",
            file=sys.stderr,
        )
        return 1
    job_ids: list[str] = []
    try:
        t = time.monotonic()
        for _ in range(a.jobs // 1000):
            cp = ssh(
                paths,
                CTL,
                f"timeout 30 sbatch --parsable --hold -A {ACCOUNT} --array=0-999 --chdir=/tmp "
                "--output=/dev/null --wrap 'sleep 1'",
            )
            if cp.returncode != 0:
                print(f"FAIL: sbatch: {cp.stderr.strip()}", file=sys.stderr)
                return 1
            job_ids.append(cp.stdout.strip().split(";")[0])
        print(f"submitted {len(job_ids)} held arrays ({a.jobs} tasks) in {time.monotonic() - t:.1f}s")
        bare = " & ".join(
            " ".join(shlex.quote(x) for x in argv) + " >/dev/null" for argv in commands(new_marks()).values()
        )
        script = REMOTE % {"prefix": PREFIX, "rounds": a.rounds, "bare": bare + " & wait", "account": ACCOUNT}
        cp = subprocess.run(
            ssh_argv(paths, CTL, "python3 -"), input=script, capture_output=True, text=True, timeout=900
        )
        if cp.returncode != 0:
            print(f"FAIL: ctl01: {cp.stderr.strip()}", file=sys.stderr)
            return 1
        r = json.loads(cp.stdout)
    finally:
        if job_ids:
            ssh(paths, CTL, "scancel " + " ".join(job_ids))
        ssh(paths, CTL, f"rm -rf {PREFIX}")
    import statistics

    bare_s, scrape_s = statistics.median(r["bare"]), statistics.median(r["scrape"])
    print(f"queued tasks seen by the exporter (account {ACCOUNT}): {int(r['xbench_jobs'])}")
    print(f"{'':34}{'median':>10}{'min':>10}{'max':>10}")
    print(
        f"{'bare squeue+sinfo+sdiag (parallel)':34}{bare_s:>9.3f}s"
        f"{min(r['bare']):>9.3f}s{max(r['bare']):>9.3f}s"
    )
    print(f"{'exporter scrape':34}{scrape_s:>9.3f}s{min(r['scrape']):>9.3f}s{max(r['scrape']):>9.3f}s")
    print(f"ratio scrape/bare: {scrape_s / bare_s:.2f}x (goal <= 1.2x)")
    print(f"exporter peak RSS (VmHWM): {r['vmhwm_kib'] / 1024:.1f} MiB; exposition {r['bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
