"""`vigil report` against a private VictoriaMetrics holding a simulated year of a 512-node cluster.

A VictoriaMetrics (the bundle's binary, default flags as the role deploys it: no query limit raised)
is started on 127.0.0.1 with its own temporary storage and fed, through ``/api/v1/import``:

1. **the recorded year** (2025): the accounting recording rules' series, one sample per hour on the
   hour, as tests/integration/test_reports.py writes them (roles/vmalert/files/rules/vigil-accounting.yml;
   vmalert evaluates them every minute, so a real store holds 60 times these samples):
   ``cluster:gpu_energy_joules:increase1h``, ``account_user:gpu_hours:sum1h``,
   ``account_user:gpu_energy_joules:increase1h`` and one ``job:gpu_hours:sum1h`` series per job
   (``--nodes`` × 8 GPUs, node-exclusive jobs of 1-48 h with gaps of 0-2 h, 16 accounts × 4 users);
2. **a raw month** (2026-01, no recorded series: the raw path), what the exporters scrape at 30 s:
   ``DCGM_FI_DEV_GPU_TEMP`` and ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` per GPU and job (with
   ``hpc_job``), ``slurm_job_info`` per job. The report's raw path reads these two DCGM series only
   (``DCGM_FI_DEV_POWER_USAGE`` is not queried, so it is not imported). ``--raw-nodes`` nodes,
   default 16 (SCALED: 24 M samples, the whole run about 40 s); ``--raw-nodes 512`` is the issue's
   size (778 M samples: about 10 minutes of generating and importing on a 2-core machine, 13 in all);
3. **the year's meters**: four PDU outlet-branch counters (J) at 1 min, a facility meter (kWh) at 5 min.

Then it times, each in its own ``VIGIL_HOME`` (a fresh report key each):

* ``vigil report usage --period 2025`` (the recording-rule path) and ``--period 2025-12``,
* ``vigil report usage --period 2026-01`` (the raw path over the raw month),
* ``vigil report energy --year 2025 --site site.yaml`` (12 monthly meter exports and GPU usage),
* ``vigil report list`` on an empty store: the baseline (CLI start-up and the audit record).

Goal: <= 10 s for each report. Prints the figures (a report that fails is printed with vigil's FAIL
line and the exit status is 1); asserts that each report that succeeded read the sources it should
(recorded hours for 2025, raw hours for 2026-01). Also times the year's job-count query straight to
VictoriaMetrics, as usage.py builds it and as a plain range query, beside each other, and the raw
month's first 20-day piece (GPU-hours, energy) as usage.py builds it.

    python benchmarks/report.py [--nodes 512] [--raw-nodes 16] [--vm-binary PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.installer.reports.usage import RAW_CHUNK, raw_queries, recorded_queries

ROOT = Path(__file__).resolve().parents[1]
HOUR = 3600
GPUS = 8
STEP = 30  # raw scrape interval, s
BUSY_W, IDLE_W = 350.0, 60.0
ACCOUNTS, USERS = 16, 4
GOAL_S = 10.0
YEAR = "2025"
MONTH = "2026-01"
RECORDED_MONTH = "2025-12"
BATCH_BYTES = 32 << 20


def ts(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


Y0, Y1 = ts("2025-01-01T00:00:00"), ts("2026-01-01T00:00:00")
M0, M1 = ts("2026-01-01T00:00:00"), ts("2026-02-01T00:00:00")


def find_binary(given: str | None) -> Path:
    candidates = [Path(given)] if given else []
    files = os.environ.get("VIGIL_BUNDLE_FILES")
    if files:
        candidates.append(Path(files) / "components" / "victoria-metrics" / "bin" / "victoria-metrics")
    candidates.append(
        ROOT
        / "demo"
        / "home"
        / "bundles"
        / "1"
        / "files"
        / "components"
        / "victoria-metrics"
        / "bin"
        / "victoria-metrics"
    )
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    sys.exit("FAIL: no victoria-metrics binary (give --vm-binary or VIGIL_BUNDLE_FILES=<bundle>/files)")


# --- the simulated cluster ------------------------------------------------------------------------


def schedule(nodes: int, lo: int, hi: int, seed: int) -> list[tuple[int, str, str, int, int, float]]:
    """Node-exclusive jobs: (node, job id, account/user key, start, end, watts per GPU), hour-aligned."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible job mix
    jobs = []
    n = 0
    for node in range(nodes):
        t = lo + rng.randrange(0, 3) * HOUR
        while t < hi:
            end = min(hi, t + rng.randint(1, 48) * HOUR)
            pair = f"{rng.randrange(ACCOUNTS)}/{rng.randrange(USERS)}"
            jobs.append((node, f"{seed}{n:07d}", pair, t, end, rng.uniform(250.0, 450.0)))
            n += 1
            t = end + rng.randrange(0, 3) * HOUR
    return jobs


def who(pair: str) -> dict[str, str]:
    a, u = pair.split("/")
    return {"account": f"acct{int(a):02d}", "user": f"user{int(a):02d}{u}"}


def recorded_lines(nodes: int, counts: dict[str, int]) -> Iterator[dict[str, Any]]:
    """The rules' hourly series for the year: each sample at t covers (t-1h, t]."""
    jobs = schedule(nodes, Y0, Y1, seed=1)
    hours = (Y1 - Y0) // HOUR
    stamps = [(Y0 + (i + 1) * HOUR) * 1000 for i in range(hours)]
    busy_j = [0.0] * hours
    busy_gpus = [0] * hours
    per_pair: dict[str, tuple[list[float], list[float]]] = {}
    for _node, jid, pair, start, end, watts in jobs:
        i0, i1 = (start - Y0) // HOUR, (end - Y0) // HOUR
        gh, gj = per_pair.setdefault(pair, ([0.0] * hours, [0.0] * hours))
        joules = GPUS * watts * HOUR
        for i in range(i0, i1):
            gh[i] += GPUS
            gj[i] += joules
            busy_j[i] += joules
            busy_gpus[i] += GPUS
        yield {
            "metric": {"__name__": "job:gpu_hours:sum1h", "hpc_job": jid, **who(pair)},
            "values": [float(GPUS)] * (i1 - i0),
            "timestamps": stamps[i0:i1],
        }
    counts["jobs"] = len(jobs)
    total_gpus = nodes * GPUS
    yield {
        "metric": {"__name__": "cluster:gpu_energy_joules:increase1h"},
        "values": [busy_j[i] + (total_gpus - busy_gpus[i]) * IDLE_W * HOUR for i in range(hours)],
        "timestamps": stamps,
    }
    for pair, (gh, gj) in per_pair.items():
        keep = [i for i, h in enumerate(gh) if h > 0]
        for name, values in (
            ("account_user:gpu_hours:sum1h", gh),
            ("account_user:gpu_energy_joules:increase1h", gj),
        ):
            yield {
                "metric": {"__name__": name, **who(pair)},
                "values": [values[i] for i in keep],
                "timestamps": [stamps[i] for i in keep],
            }


def raw_lines(nodes: int, counts: dict[str, int]) -> Iterator[dict[str, Any]]:
    """What dcgm-exporter and node_exporter are scraped for over the month, at 30 s."""
    jobs = schedule(nodes, M0 - 6 * HOUR, M1 + HOUR, seed=2)
    counts["raw_jobs"] = len(jobs)
    times = list(range(M0 - 2 * HOUR, M1 + HOUR, STEP))
    by_node: dict[int, list[tuple[int, str, str, int, int, float]]] = {}
    for job in jobs:
        by_node.setdefault(job[0], []).append(job)
    for node in range(nodes):
        host = f"gpu{node:03d}"
        instance = f"{host}:9400"
        node_jobs = by_node.get(node, [])
        for gpu in range(GPUS):
            energy = 5e9 + gpu * 1e6  # mJ since boot
            series: dict[str, tuple[list[int], list[float], list[float]]] = {}
            k = 0
            for t in times:
                while k < len(node_jobs) and node_jobs[k][4] <= t:
                    k += 1
                job = node_jobs[k] if k < len(node_jobs) and node_jobs[k][3] <= t else None
                stamps, temps, energies = series.setdefault(job[1] if job else "", ([], [], []))
                stamps.append(t * 1000)
                temps.append(68.0 if job else 34.0)
                energies.append(energy)
                energy += (job[5] if job else IDLE_W) * STEP * 1000
            for jid, (stamps, temps, energies) in series.items():
                labels = {
                    "gpu": str(gpu),
                    "UUID": f"GPU-{host}-{gpu}",
                    "Hostname": host,
                    "instance": instance,
                }
                if jid:
                    labels["hpc_job"] = jid
                yield {
                    "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels},
                    "values": temps,
                    "timestamps": stamps,
                }
                yield {
                    "metric": {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **labels},
                    "values": energies,
                    "timestamps": stamps,
                }
    for node, jid, pair, start, end, _ in jobs:
        stamps = [t * 1000 for t in times if start <= t < end]
        if stamps:
            yield {
                "metric": {
                    "__name__": "slurm_job_info",
                    "hpc_job": jid,
                    **who(pair),
                    "partition": "gpu",
                    "node": f"gpu{node:03d}",
                    "instance": f"gpu{node:03d}:9400",
                },
                "values": [1] * len(stamps),
                "timestamps": stamps,
            }


def meter_lines(nodes: int) -> Iterator[dict[str, Any]]:
    """Four PDU branch counters (J, 1 min) sharing the IT load, and the facility's (kWh, 5 min)."""
    it_kw = nodes * (GPUS * 0.3 + 1.0)  # GPUs at ~300 W plus 1 kW per node for the rest
    rng = random.Random(3)  # noqa: S311
    for branch in range(4):
        times = range(Y0 - HOUR, Y1 + HOUR + 1, 60)
        value, values = 1e12 * (branch + 1), []
        for _ in times:
            values.append(value)
            value += it_kw / 4 * 1000 * 60 * rng.uniform(0.9, 1.1)
        yield {
            "metric": {
                "__name__": "site_pdu_energy_joules_total",
                "circuit": "it",
                "instance": f"pdu{branch}",
            },
            "values": values,
            "timestamps": [t * 1000 for t in times],
        }
    times = range(Y0 - HOUR, Y1 + HOUR + 1, 300)
    yield {
        "metric": {"__name__": "site_facility_energy_kwh_total"},
        "values": [12345.0 + (t - Y0) * it_kw * 1.25 / 3600 for t in times],
        "timestamps": [t * 1000 for t in times],
    }


SITE = """\
name: Benchmark Centre
owner: Example University
operator: Example University Computing Centre
contact: dc-report@example.org
location: Espoo, Finland
type: enterprise
start_of_operation: 2019-03-01
installed_it_power_kw: 5000
meters:
  it_energy:
    - selector: 'site_pdu_energy_joules_total{circuit="it"}'
      unit: J
  total_energy:
    - selector: 'site_facility_energy_kwh_total'
      unit: kWh
declared:
  total_floor_area_m2: 2400
  computer_room_floor_area_m2: 900
  incoming_traffic_tb: 1200
  outgoing_traffic_tb: 800
  data_stored_tb: 15000
  water_input_m3: 5000
  potable_water_input_m3: 1200
  waste_heat_reused_kwh: 131400
  renewable_energy_kwh: 657000
"""


# --- a private VictoriaMetrics ---------------------------------------------------------------------


def http(url: str, *, data: bytes | None = None, timeout: float = 600) -> bytes:
    assert url.startswith("http://127.0.0.1:")
    req = urllib.request.Request(url, data=data)  # noqa: S310 - our own VictoriaMetrics on 127.0.0.1
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - as above
        return bytes(resp.read())


class VM:
    def __init__(self, binary: Path, data: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{port}"
        self.log = data.with_suffix(".log")
        self.proc = subprocess.Popen(
            [
                str(binary),
                f"-storageDataPath={data}",
                f"-httpListenAddr=127.0.0.1:{port}",
                "-retentionPeriod=100y",
                "-loggerLevel=ERROR",
            ],
            stdout=open(self.log, "wb"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                http(f"{self.url}/health", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"VictoriaMetrics did not start: {self.log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)

    def load(self, lines: Iterator[dict[str, Any]]) -> tuple[int, int, float, float]:
        """Import in batches: (series, samples, seconds generating, seconds importing)."""
        series = samples = 0
        gen = post = 0.0
        batch: list[str] = []
        size = 0
        t = time.perf_counter()
        for line in lines:
            text = json.dumps(line, separators=(",", ":")) + "\n"
            batch.append(text)
            size += len(text)
            series += 1
            samples += len(line["values"])
            if size >= BATCH_BYTES:
                gen += time.perf_counter() - t
                post += self._post(batch)
                batch, size = [], 0
                t = time.perf_counter()
        gen += time.perf_counter() - t
        if batch:
            post += self._post(batch)
        t = time.perf_counter()
        http(f"{self.url}/internal/force_flush", timeout=120)
        return series, samples, gen, post + time.perf_counter() - t

    def _post(self, batch: list[str]) -> float:
        body = "".join(batch).encode()
        t = time.perf_counter()
        http(f"{self.url}/api/v1/import", data=body)
        return time.perf_counter() - t

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def vigil(home: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "VIGIL_HOME": str(home), "VIGIL_AUDIT_SYSLOG": ""}
    env.pop("VIGIL_VM_URL", None)
    exe = ROOT / ".venv" / "bin" / "vigil"
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "vigil.installer.cli"]
    t = time.perf_counter()
    cp = subprocess.run([*argv, *args], capture_output=True, text=True, env=env, timeout=900, check=False)
    return time.perf_counter() - t, cp


def report(tmp: Path, name: str, *args: str) -> tuple[float, dict[str, Any] | None, str]:
    """(seconds, the report's JSON or None, vigil's FAIL line or "")."""
    seconds, cp = vigil(tmp / f"home-{name}", "report", *args)
    if cp.returncode != 0:
        return seconds, None, (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
    path = Path(cp.stdout.strip().splitlines()[-1])
    return seconds, json.loads(path.read_bytes()), ""


def direct(vm: VM, expr: str, at: int) -> tuple[float, int | None, str]:
    """One instant query straight to VictoriaMetrics: (seconds, series in the answer or None, error)."""
    body = urllib.parse.urlencode({"query": expr, "time": str(at), "nocache": "1"}).encode()
    t = time.perf_counter()
    try:
        doc = json.loads(http(f"{vm.url}/api/v1/query", data=body))
        return time.perf_counter() - t, len(doc["data"]["result"]), ""
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        return time.perf_counter() - t, None, text.strip()[-300:]


def remove(tmp: Path) -> None:
    """Remove the temporary tree; the audit logs vigil wrote there are append-only (chattr +a as root)."""
    chattr = shutil.which("chattr")
    if chattr is not None:
        subprocess.run([chattr, "-R", "-a", str(tmp)], capture_output=True, check=False)
    shutil.rmtree(tmp, ignore_errors=True)
    if tmp.exists():
        print(f"WARNING: could not remove {tmp}", file=sys.stderr)


def _fig(run: tuple[float, dict[str, Any] | None, str]) -> tuple[float, float, str]:
    return run[0], GOAL_S, run[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=512, help="nodes (x 8 GPUs) in the recorded year")
    ap.add_argument("--raw-nodes", type=int, default=16, help="nodes (x 8 GPUs) in the raw 30 s month")
    ap.add_argument("--vm-binary", help="victoria-metrics binary (default: the bundle's)")
    a = ap.parse_args()
    binary = find_binary(a.vm_binary)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="vigil-bench-report-"))
    vm = None
    try:
        vm = VM(binary, tmp / "vm")
        counts: dict[str, int] = {}
        loads = {
            "recorded year": vm.load(recorded_lines(a.nodes, counts)),
            "raw month": vm.load(raw_lines(a.raw_nodes, counts)),
            "meters, year": vm.load(meter_lines(a.nodes)),
        }
        site = tmp / "site.yaml"
        site.write_text(SITE)
        base_s, cp = vigil(tmp / "home-list", "report", "list")
        assert cp.returncode == 0, cp.stderr
        runs = {
            "year": report(tmp, "year", "usage", "--period", YEAR, "--vm", vm.url),
            "recorded month": report(tmp, "rmonth", "usage", "--period", RECORDED_MONTH, "--vm", vm.url),
            "raw month": report(tmp, "month", "usage", "--period", MONTH, "--vm", vm.url),
            "energy": report(tmp, "energy", "energy", "--year", YEAR, "--site", str(site), "--vm", vm.url),
        }
        # the year's job count, as usage.py asks it (a 1h subquery) and as a plain range query
        window = Y1 - Y0
        jobs_as_built = direct(vm, recorded_queries(window, "")["jobs"], Y1)
        jobs_plain = direct(
            vm, f"group by (account, user, hpc_job) (max_over_time(job:gpu_hours:sum1h[{window}s]) > 0)", Y1
        )
        # the raw month's first piece (RAW_CHUNK), GPU-hours and energy, as usage.py builds them
        piece = min(RAW_CHUNK, M1 - M0)
        raw_direct = {k: direct(vm, raw_queries(piece, "")[k], M0 + piece) for k in ("gpu_hours", "joules")}
        for name, want in (("year", (8760, 0)), ("recorded month", (744, 0)), ("raw month", (0, 744))):
            doc = runs[name][1]
            if doc is not None:
                got = (doc["source"]["recorded_hours"], doc["source"]["raw_hours"])
                assert got == want, (name, doc["source"])
        disk = sum(f.stat().st_size for f in (tmp / "vm").rglob("*") if f.is_file())
    finally:
        if vm is not None:
            vm.stop()
        remove(tmp)

    print(f"VictoriaMetrics: {binary}")
    print(
        f"recorded year {YEAR}: {a.nodes} nodes x {GPUS} GPUs, {counts['jobs']} jobs, "
        f"{ACCOUNTS * USERS} account/user pairs, hourly samples"
    )
    scaled = " (SCALED: the issue's size is 512; --raw-nodes 512 runs it)" if a.raw_nodes < 512 else ""
    print(
        f"raw month {MONTH}: {a.raw_nodes} nodes x {GPUS} GPUs at {STEP} s, {counts['raw_jobs']} jobs{scaled}"
    )
    print(f"{'import':16}{'series':>10}{'samples':>13}{'generate':>10}{'import':>10}")
    for name, (series, samples, gen, post) in loads.items():
        print(f"{name:16}{series:>10,}{samples:>13,}{gen:>9.1f}s{post:>9.1f}s")
    print(f"VictoriaMetrics storage after import: {disk / 2**20:.0f} MiB")
    print()
    print(f"{'figure':60}{'seconds':>9}{'goal':>8}  met")
    rows = [
        ("baseline: vigil report list (empty store)", base_s, None, ""),
        (f"vigil report usage --period {YEAR} (recorded, {a.nodes} nodes)", *_fig(runs["year"])),
        (
            f"vigil report usage --period {RECORDED_MONTH} (recorded, {a.nodes} nodes)",
            *_fig(runs["recorded month"]),
        ),
        (f"vigil report usage --period {MONTH} (raw, {a.raw_nodes} nodes)", *_fig(runs["raw month"])),
        (f"vigil report energy --year {YEAR} (5 meters, recorded GPU)", *_fig(runs["energy"])),
    ]
    failures = []
    for name, seconds, goal, error in rows:
        met = "" if goal is None else ("FAILED" if error else "yes" if seconds <= goal else "NO")
        goal_text = "" if goal is None else f"<= {goal:.0f}s"
        print(f"{name:60}{seconds:>8.2f}s{goal_text:>8}  {met}")
        if error:
            failures.append(f"{name}: {error}")
    for line in failures:
        print(f"  {line[:600]}")
    print()
    print(f"the year's jobs query straight to VictoriaMetrics ({counts['jobs']:,} jobs in the data):")
    for name, (seconds, n, error) in (
        ("as usage.py builds it", jobs_as_built),
        ("plain range query (max_over_time(job:gpu_hours:sum1h[year]))", jobs_plain),
    ):
        outcome = f"{n:,} series" if n is not None else f"error: {error}"
        print(f"  {name:64}{seconds:>7.2f}s  {outcome}")
    print(f"raw month, first {piece // 86400}-day piece as usage.py builds it, straight to VictoriaMetrics:")
    for name, (seconds, n, error) in raw_direct.items():
        outcome = f"{n:,} series" if n is not None else f"error: {error}"
        print(f"  {name:64}{seconds:>7.2f}s  {outcome}")
    print()
    year, month, energy = runs["year"][1], runs["raw month"][1], runs["energy"][1]
    if year is not None:
        t = year["totals"]
        print(f"year: {t['gpu_hours']:,.0f} GPU-hours, {t['gpu_energy_kwh']:,.0f} kWh, {t['jobs']:,} jobs")
    if month is not None:
        print(f"raw month: {month['totals']['gpu_hours']:,.0f} GPU-hours, {month['totals']['jobs']:,} jobs")
    if energy is not None:
        print(f"energy: PUE {energy['indicators']['pue']['value']}")
    print(f"total run time {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
