#!/usr/bin/env python3
"""Deploy wall time on the lab, and its cost per host: a first deploy onto fresh hosts, a rerun, a
check, at each lab size asked for (`vigil lab up --gpu-nodes N`).

    first deploy  (fresh hosts: `lab down`, `lab up --gpu-nodes N`, then `vigil deploy`)
    rerun         (the same deploy again: nothing to change)
    rerun / first                                   goal <= 0.30
    check         (`vigil deploy --check` on the unchanged site: the daily drift question)
    check / rerun                                   goal <= 1.0

For each size: the lab's boot time, each GPU node's memory (the proportional set size of the
processes in its container's cgroup, after the deploy) and disk (its overlay's upper layer), the
admin host's CPU seconds per run (this process's reaped children: vigil, ansible-playbook and its
workers, ssh). Across sizes: a least-squares line per figure (seconds = a + b x GPU nodes), b being
the marginal cost of one more GPU node, and the line read at 500 nodes.

Per host: the time from the play's first task on that host to its last task, read from the run's
ansible-runner events (`$VIGIL_HOME/runs/<id>/artifacts/job_events`); for the largest size's first
deploy and rerun, the ten most expensive tasks and the seconds per role
(benchmarks/deploy_profile.py, which stands in for Ansible's `profile_tasks`).
Needs root and the lab's prerequisites (scripts/system-deps.sh).
Usage: python benchmarks/deploy.py [--gpu-nodes 2,4,8,16] [--forks N] [--json OUT] [--workdir DIR]
       [--keep-lab]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def timed(env: dict[str, str], *args: str) -> tuple[float, float, str]:
    """(wall seconds, admin-host CPU seconds of the reaped children, stdout) of `vigil ARGS`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = vigil(env, *args)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def container_pss(host: str) -> int:
    """Bytes: the proportional set size of every process in HOST's container (its cgroup)."""
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"/vigil-lab-{host}" not in (proc / "cgroup").read_text():
                continue
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue  # gone, or a kernel thread
    return total


def upper_bytes(lab_dir: Path, host: str) -> int:
    """Bytes the host's own layer over the shared root fs holds (du of its overlay's upper dir)."""
    res = subprocess.run(
        ["du", "-sxB1", str(lab_dir / host / "upper")], capture_output=True, text=True, check=False
    )
    return int(res.stdout.split()[0]) if res.returncode == 0 and res.stdout else 0


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def one_size(env: dict[str, str], work: Path, nodes: int, forks: list[str]) -> dict:
    inventory = work / f"inventory-{nodes}"
    vigil(env, "lab", "down")
    t = time.monotonic()
    vigil(env, "lab", "up", "--gpu-nodes", str(nodes), "--inventory", str(inventory))
    up_s = time.monotonic() - t
    deploy = ["deploy", "-i", str(inventory), "--json", *forks]
    first_s, first_cpu, first = timed(env, *deploy)
    rerun_s, rerun_cpu, rerun = timed(env, *deploy)
    check_s, check_cpu, check = timed(env, *deploy, "--check")
    first, rerun, check = json.loads(first), json.loads(rerun), json.loads(check)
    lab_dir = Path(env.get("VIGIL_LAB_DIR", "/var/lib/vigil-lab"))
    gpu = [f"gpu{k:02d}" for k in range(1, nodes + 1)]
    return {
        "gpu_nodes": nodes,
        "hosts": nodes + 2,
        "lab_up_s": round(up_s, 1),
        "first_s": round(first_s, 1),
        "rerun_s": round(rerun_s, 1),
        "check_s": round(check_s, 1),
        "first_admin_cpu_s": round(first_cpu, 1),
        "rerun_admin_cpu_s": round(rerun_cpu, 1),
        "check_admin_cpu_s": round(check_cpu, 1),
        "first_changed": sum(c["changed"] for c in first["hosts"].values()),
        "rerun_changed": sum(c["changed"] for c in rerun["hosts"].values()),
        "check_would_change": sum(c["changed"] for c in check["hosts"].values()),
        "gpu_node_pss_mib": round(sum(container_pss(h) for h in gpu) / nodes / 2**20, 1),
        "gpu_node_disk_mib": round(sum(upper_bytes(lab_dir, h) for h in gpu) / nodes / 2**20, 1),
        "mon01_pss_mib": round(container_pss("mon01") / 2**20, 1),
        "first_hosts": per_host_seconds(Path(first["run_dir"])),
        "rerun_hosts": per_host_seconds(Path(rerun["run_dir"])),
        "first_run_dir": first["run_dir"],
        "rerun_run_dir": rerun["run_dir"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu-nodes", default="2", help="lab sizes, comma-separated (default: %(default)s)")
    ap.add_argument("--forks", type=int, help="passed to `vigil deploy --forks` (default: vigil's)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep-lab", action="store_true", help="leave the lab running afterwards")
    args = ap.parse_args()
    sizes = [int(n) for n in args.gpu_nodes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="vigil-deploy-bench-", dir=args.workdir))
    env = {**os.environ, "VIGIL_HOME": str(work / "home"), "PYTHONPATH": str(REPO)}
    signed_store(env, work, ["debian"])
    forks = ["--forks", str(args.forks)] if args.forks else []
    results = []
    for nodes in sizes:
        r = one_size(env, work, nodes, forks)
        results.append(r)
        print(
            f"N={nodes:<3} lab up {r['lab_up_s']:6.1f} s  first {r['first_s']:6.1f} s  "
            f"rerun {r['rerun_s']:6.1f} s  check {r['check_s']:6.1f} s  rerun/first "
            f"{r['rerun_s'] / r['first_s']:.2f}  admin CPU first/rerun/check {r['first_admin_cpu_s']:.0f}/"
            f"{r['rerun_admin_cpu_s']:.0f}/{r['check_admin_cpu_s']:.0f} s  changed on rerun "
            f"{r['rerun_changed']}, check would change {r['check_would_change']}  per GPU node "
            f"{r['gpu_node_pss_mib']:.0f} MiB PSS, {r['gpu_node_disk_mib']:.0f} MiB disk",
            flush=True,
        )
    if not args.keep_lab:
        vigil(env, "lab", "down")
    summary: dict = {"sizes": results, "forks": args.forks, "lines": {}}
    if len(results) > 1:
        xs = [float(r["gpu_nodes"]) for r in results]
        print("\nleast squares over the sizes, seconds = a + b x GPU nodes; read at 500 nodes:")
        for key in ("first_s", "rerun_s", "check_s", "first_admin_cpu_s", "rerun_admin_cpu_s", "lab_up_s"):
            a, b = fit(xs, [float(r[key]) for r in results])
            summary["lines"][key] = {"a": round(a, 2), "b": round(b, 2), "at_500": round(a + 500 * b, 0)}
            print(f"  {key:<18} a {a:7.1f}  b {b:6.2f} per node  at 500: {a + 500 * b:8.0f}")
    big = results[-1]
    for name in ("first", "rerun"):
        p = profile(Path(big[f"{name}_run_dir"]))
        print(
            f"\nN={big['gpu_nodes']} {name}: {len(p['tasks'])} tasks, {p['host_results']} host results; "
            "the ten most expensive:"
        )
        for t in sorted(p["tasks"], key=lambda t: -t["seconds"])[:10]:
            print(f"  {t['seconds']:6.2f} s  {t['role']:<18} {t['task'][:80]}")
        print("  per role: " + ", ".join(f"{r} {s:.0f} s" for r, s in p["by_role"].items()))
        summary[f"{name}_top10"] = [
            {"seconds": round(t["seconds"], 2), "role": t["role"], "task": t["task"]}
            for t in sorted(p["tasks"], key=lambda t: -t["seconds"])[:10]
        ]
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
