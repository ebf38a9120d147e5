"""Slurm job map prolog/epilog: cost per job, and a churn run against one job map dir.

1. Per job: prolog + epilog wall time (run the way slurmd runs them: fork + exec of the script) next
   to a bare `sh -c 'exit 0'`, the cost of any prolog at all. Goal: <= 3x. Reported both against
   one bare start and against the pair of bare starts a job with an empty prolog and epilog costs.
2. Churn: job starts and ends offered at a target rate (default 5,000/s) by parallel workers
   against one job map dir on 8 GPUs, with several jobs sharing GPUs; the achieved rate is what is
   reported. At the end every GPU file must hold exactly the jobs still running: zero stale or lost
   lines, then zero files once every epilog has run.

    python benchmarks/prolog.py [--jobs 300] [--churn-seconds 10] [--rate 5000] [--workers N]

Prints figures; asserts only correctness (no timing).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROLOG = ROOT / "roles" / "slurm_jobmap" / "files" / "prolog.sh"
EPILOG = ROOT / "roles" / "slurm_jobmap" / "files" / "epilog.sh"
GPUS = 8


def _env(base: Path, job: int, gpus: list[int], lock: str) -> dict[str, str]:
    return {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "VIGIL_JOBMAP_CONF": str(base / "none.conf"),
        "VIGIL_JOBMAP_DIR": str(base / "jobmap"),
        "VIGIL_TEXTFILE_DIR": str(base / "textfile"),
        "VIGIL_JOBMAP_LOCK": lock,
        "SLURM_JOB_ID": str(job),
        "SLURM_JOB_GPUS": ",".join(map(str, gpus)),
        "SLURM_JOB_USER": "alice",
        "SLURM_JOB_ACCOUNT": "physics",
        "SLURM_JOB_PARTITION": "gpu",
        "SLURMD_NODENAME": "gpu01",
    }


def _run(script: Path, env: dict[str, str]) -> None:
    rc = subprocess.run(
        [str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ).returncode
    assert rc == 0, f"{script.name} exited {rc}"


def per_job(jobs: int, lock: str) -> tuple[float, float]:
    """(bare sh -c 'exit 0' seconds, prolog + epilog seconds), medians of JOBS runs."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        bare, pair = [], []
        for j in range(jobs):
            t0 = time.perf_counter()
            subprocess.run(["sh", "-c", "exit 0"])
            bare.append(time.perf_counter() - t0)
            env = _env(base, 1000 + j, [j % GPUS, (j + 1) % GPUS], lock)
            t0 = time.perf_counter()
            _run(PROLOG, env)
            _run(EPILOG, env)
            pair.append(time.perf_counter() - t0)
        bare.sort()
        pair.sort()
        return bare[len(bare) // 2], pair[len(pair) // 2]


def churn(seconds: float, rate: int, workers: int, lock: str) -> dict[str, float]:
    """Offer RATE job starts/ends a second for SECONDS; return achieved figures after checking the map."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        rng = random.Random(5)  # noqa: S311 - a reproducible job mix
        running: deque[tuple[int, list[int]]] = deque()
        live: dict[int, list[int]] = {}
        guard = threading.Lock()
        next_job = [100_000]
        done = [0]
        stop = time.monotonic() + seconds
        # each worker alternates: start a job, or end the oldest one once ~64 are running
        interval = workers / rate

        def work() -> None:
            due = time.monotonic()
            while time.monotonic() < stop:
                with guard:
                    if len(running) > 64 and rng.random() < 0.5:
                        job, gpus = running.popleft()
                        phase = "epilog"
                    else:
                        job = next_job[0]
                        next_job[0] += 1
                        gpus = sorted(rng.sample(range(GPUS), rng.randint(1, 2)))
                        running.append((job, gpus))
                        phase = "prolog"
                env = _env(base, job, gpus, lock)
                if phase == "prolog":
                    _run(PROLOG, env)
                    with guard:
                        live[job] = gpus
                else:
                    # its prolog may still be running in another worker: wait for it, as slurmd does
                    while True:
                        with guard:
                            if job in live:
                                break
                        time.sleep(0.001)
                    _run(EPILOG, env)
                    with guard:
                        del live[job]
                with guard:
                    done[0] += 1
                due += interval
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)

        t0 = time.monotonic()
        threads = [threading.Thread(target=work) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        achieved = done[0] / elapsed

        # 1 the map holds exactly the running jobs
        want: dict[str, set[str]] = {}
        for job, gpus in live.items():
            for g in gpus:
                want.setdefault(str(g), set()).add(str(job))
        got: dict[str, set[str]] = {}
        stale_or_lost = 0
        for f in (base / "jobmap").iterdir():
            if f.name.startswith("."):
                continue
            lines = f.read_text().splitlines()
            stale_or_lost += len(lines) - len(set(lines))
            got[f.name] = set(lines)
        for g in set(want) | set(got):
            stale_or_lost += len(want.get(g, set()) ^ got.get(g, set()))
        textfiles = {p.name for p in (base / "textfile").iterdir() if p.name.endswith(".prom")}
        stale_or_lost += len(textfiles ^ {f"slurm_job_{j}.prom" for j in live})
        # 2 every remaining epilog empties it
        for job, gpus in list(live.items()):
            _run(EPILOG, _env(base, job, gpus, lock))
        left = [f.name for f in (base / "jobmap").iterdir() if not f.name.startswith(".")]
        left += [p.name for p in (base / "textfile").iterdir()]
        return {
            "elapsed": elapsed,
            "events": done[0],
            "achieved": achieved,
            "running_at_end": len(live),
            "stale_or_lost": stale_or_lost,
            "left_after_epilogs": len(left),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--churn-seconds", type=float, default=10)
    ap.add_argument("--rate", type=int, default=5000, help="job starts/ends offered per second")
    ap.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--lock", choices=["flock", "mkdir"], default="flock")
    args = ap.parse_args()

    bare, pair = per_job(args.jobs, args.lock)
    print(f"per job ({args.jobs} jobs, 2 GPUs each, {args.lock} lock, medians)")
    print(f"  bare sh -c 'exit 0'        {bare * 1e3:7.2f} ms")
    print(
        f"  prolog + epilog            {pair * 1e3:7.2f} ms   {pair / bare:5.1f}x one bare start, "
        f"{pair / (2 * bare):4.1f}x an empty prolog + epilog (goal <= 3x)"
    )
    r = churn(args.churn_seconds, args.rate, args.workers, args.lock)
    print(f"churn ({args.workers} workers, {os.cpu_count()} CPUs, {args.rate}/s offered, {GPUS} GPUs)")
    print(
        f"  achieved                   {r['achieved']:7.0f} job starts+ends/s "
        f"({r['events']} in {r['elapsed']:.1f} s)"
    )
    print(f"  running at the end         {r['running_at_end']:7d}")
    print(f"  stale or lost lines        {r['stale_or_lost']:7d}")
    print(f"  files left after epilogs   {r['left_after_epilogs']:7d}")
    if r["stale_or_lost"] or r["left_after_epilogs"]:
        raise SystemExit("FAIL: prolog benchmark: the job map lost or kept lines")


if __name__ == "__main__":
    main()
