"""Reports against a real VictoriaMetrics (the debian bundle's) on 127.0.0.1, fed known synthetic data.

The data (2025, UTC, 30 s scrapes, every GPU at a fixed power): four jobs under two accounts with
known GPU counts and durations, one crossing the September/October boundary and one crossing the
October/November boundary, idle GPUs beside them (not charged to anyone); in two partitions (physics
in both) on two GPU models (gpu01's H100s, gpu02's A100s), one job's GPU idle for the second half
of its hours (DCGM_FI_PROF_GR_ENGINE_ACTIVE 0.02: allocated, not active), and a year of facility
and IT meter counters with a meter replaced mid-year (a reset). Two VictoriaMetrics instances hold
it: ``raw`` has only what the exporters scrape (DCGM + slurm_job_info: the raw path), ``mixed``
has that plus the recording-rule series as the rules produce them, for the hours from 2025-10-16
on (the rules' path, with raw filling the first half of October). The reports must give the known
figures within 2 % on both and agree with each other; and the real vmalert, replaying the shipped
rules over the raw data, must produce series the report reads to the same figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from vigil.installer.reports import usage

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "roles" / "vmalert" / "files" / "rules" / "vigil-accounting.yml"
STEP = 30  # scrape interval, s
BUSY_W, IDLE_W = 350.0, 60.0
HOUR = 3600


def ts(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


@dataclass(frozen=True)
class Job:
    id: str
    account: str
    user: str
    host: str
    gpus: tuple[int, ...]
    start: int
    end: int
    partition: str = "gpu"
    #: from here on its GPUs are idle (allocated, not active)
    idle_from: int | None = None

    def active(self, t: int) -> bool:
        return self.idle_from is None or t < self.idle_from


JOBS = (
    Job("100", "chemistry", "carol", "gpu02", (0,), ts("2025-09-30T23:00:00"), ts("2025-10-01T01:00:00")),
    Job("101", "physics", "alice", "gpu01", (0, 1), ts("2025-10-05T10:00:00"), ts("2025-10-05T14:00:00")),
    Job(
        "102",
        "physics",
        "bob",
        "gpu01",
        (2,),
        ts("2025-10-20T00:00:00"),
        ts("2025-10-20T06:00:00"),
        partition="gpu-long",
        idle_from=ts("2025-10-20T03:00:00"),
    ),
    Job(
        "201", "chemistry", "carol", "gpu02", (1, 2, 3), ts("2025-10-31T20:00:00"), ts("2025-11-01T02:00:00")
    ),
)
HOSTS = {"gpu01": 4, "gpu02": 4}
MODELS = {"gpu01": "NVIDIA H100 80GB HBM3", "gpu02": "NVIDIA A100-SXM4-80GB"}
DATA_START, DATA_END = ts("2025-09-30T12:00:00"), ts("2025-11-01T12:00:00")
RECORDED_FROM = ts("2025-10-16T00:00:00")
OCT = (ts("2025-10-01T00:00:00"), ts("2025-11-01T00:00:00"))


def job_on(host: str, gpu: int, t: int) -> Job | None:
    for job in JOBS:
        if job.host == host and gpu in job.gpus and job.start <= t < job.end:
            return job
    return None


def expected(lo: int, hi: int) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(account, user) -> (GPU-hours, kWh, jobs) of the jobs' overlap with [lo, hi)."""
    out: dict[tuple[str, str], tuple[float, float, int]] = {}
    for job in JOBS:
        seconds = max(0, min(job.end, hi) - max(job.start, lo)) * len(job.gpus)
        if seconds:
            h, kwh, n = out.get((job.account, job.user), (0.0, 0.0, 0))
            out[(job.account, job.user)] = (h + seconds / HOUR, kwh + seconds * BUSY_W / 3.6e6, n + 1)
    return out


def overlap(job: Job, lo: int, hi: int) -> tuple[int, int]:
    """GPU-seconds of the job in [lo, hi): allocated, and active."""
    seconds = max(0, min(job.end, hi) - max(job.start, lo))
    busy_to = job.end if job.idle_from is None else job.idle_from
    active = max(0, min(busy_to, hi) - max(job.start, lo))
    return seconds * len(job.gpus), active * len(job.gpus)


def expected_breakdown(lo: int, hi: int) -> dict[str, Any]:
    """Per (account, partition): (GPU-hours, active GPU-hours, kWh, jobs); per model: (GPU-hours,
    active GPU-hours, kWh); per account: active GPU-hours."""
    parts: dict[tuple[str, str], list[float]] = {}
    models: dict[str, list[float]] = {}
    active: dict[str, float] = {}
    for job in JOBS:
        seconds, busy = overlap(job, lo, hi)
        if seconds:
            p = parts.setdefault((job.account, job.partition), [0.0, 0.0, 0.0, 0])
            m = models.setdefault(MODELS[job.host], [0.0, 0.0, 0.0])
            for into in (p, m):
                into[0] += seconds / HOUR
                into[1] += busy / HOUR
                into[2] += seconds * BUSY_W / 3.6e6
            p[3] += 1
            active[job.account] = active.get(job.account, 0.0) + busy / HOUR
    return {"partitions": parts, "models": models, "active": active}


def assert_breakdown(doc: dict[str, Any], want: dict[str, Any], rel: float) -> None:
    got = {
        (a["account"], p["partition"]): (
            p["gpu_hours"],
            p["active_gpu_hours"],
            p["gpu_energy_kwh"],
            p["jobs"],
        )
        for a in doc["accounts"]
        for p in a["partitions"]
    }
    assert set(got) == set(want["partitions"]), got
    for key, (h, act, kwh, jobs) in want["partitions"].items():
        assert got[key][:3] == pytest.approx((h, act, kwh), rel=rel, abs=0.01), key
        assert got[key][3] == jobs, key
    models = {
        m["model"]: (m["gpu_hours"], m["active_gpu_hours"], m["gpu_energy_kwh"]) for m in doc["gpu_models"]
    }
    assert set(models) == set(want["models"]), models
    for model, figures in want["models"].items():
        assert models[model] == pytest.approx(tuple(figures), rel=rel, abs=0.01), model
    for a in doc["accounts"]:
        assert a["active_gpu_hours"] == pytest.approx(
            want["active"].get(a["account"], 0.0), rel=rel, abs=0.01
        )
        assert a["active_gpu_hours"] <= a["gpu_hours"]
    assert doc["totals"]["active_gpu_hours"] == pytest.approx(sum(want["active"].values()), rel=rel, abs=0.01)


def raw_lines() -> Iterator[dict[str, Any]]:
    """What dcgm-exporter and node_exporter would have had scraped: per GPU, a series per hpc_job
    (and one without), the energy counter (mJ) continuing across them; slurm_job_info per job."""
    times = list(range(DATA_START, DATA_END, STEP))
    for host, gpus in HOSTS.items():
        instance = f"{host}:9400"
        for gpu in range(gpus):
            energy = 5e9 + gpu * 1e6  # mJ since boot: far above one interval's delta
            series: dict[str, tuple[list[int], list[float], list[float], list[float]]] = {}
            for t in times:
                job = job_on(host, gpu, t)
                key = job.id if job else ""
                stamps, temps, energies, engine = series.setdefault(key, ([], [], [], []))
                stamps.append(t * 1000)
                temps.append(68.0 if job else 34.0)
                energies.append(energy)
                engine.append(0.9 if job and job.active(t) else 0.02)
                energy += (BUSY_W if job else IDLE_W) * STEP * 1000
            for key, (stamps, temps, energies, engine) in series.items():
                labels = {
                    "gpu": str(gpu),
                    "UUID": f"GPU-{host}-{gpu}",
                    "modelName": MODELS[host],
                    "Hostname": host,
                    "instance": instance,
                }
                if key:
                    labels["hpc_job"] = key
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
                yield {
                    "metric": {"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", **labels},
                    "values": engine,
                    "timestamps": stamps,
                }
    for job in JOBS:
        stamps = [t * 1000 for t in times if job.start <= t < job.end]
        yield {
            "metric": {
                "__name__": "slurm_job_info",
                "hpc_job": job.id,
                "user": job.user,
                "account": job.account,
                "partition": job.partition,
                "node": job.host,
                "instance": f"{job.host}:9400",
            },
            "values": [1] * len(stamps),
            "timestamps": stamps,
        }


def recorded_lines(start: int) -> Iterator[dict[str, Any]]:
    """The accounting rules' series as vmalert writes them, one sample per hour on the hour from
    ``start`` on (each covering the hour before it): what the report reads from them."""
    ends = list(range(start + HOUR, DATA_END + 1, HOUR))
    per_job: dict[Job, tuple[list[float], list[float], list[float]]] = {}
    cluster = []
    for t in ends:
        total = 0.0
        for host, gpus in HOSTS.items():
            for gpu in range(gpus):
                busy = sum(1 for s in range(t - HOUR, t, STEP) if job_on(host, gpu, s))
                total += (busy * BUSY_W + (HOUR // STEP - busy) * IDLE_W) * STEP
        cluster.append(total)
        for job in JOBS:
            seconds, active = overlap(job, t - HOUR, t)
            hours, joules, busy_h = per_job.setdefault(job, ([], [], []))
            hours.append(seconds / HOUR)
            joules.append(seconds * BUSY_W)
            busy_h.append(active / HOUR)
    stamps = [t * 1000 for t in ends]
    yield {
        "metric": {"__name__": "cluster:gpu_energy_joules:increase1h"},
        "values": cluster,
        "timestamps": stamps,
    }
    # what no one was charged: the idle GPUs' energy and hours; every GPU scraped every minute
    gpus = sum(HOSTS.values())
    busy_s = [sum(overlap(job, t - HOUR, t)[0] for job in JOBS) for t in ends]
    for name, values in (
        ("cluster:gpu_unallocated_energy_joules:increase1h", [(gpus * HOUR - b) * IDLE_W for b in busy_s]),
        ("cluster:gpu_hours:sum1h", [float(gpus)] * len(ends)),
        ("cluster:gpu_unallocated_hours:sum1h", [gpus - b / HOUR for b in busy_s]),
    ):
        yield {"metric": {"__name__": name}, "values": values, "timestamps": stamps}
    # per account and user, in each partition and on each model, as the rules keep those labels
    by_cell: dict[tuple[str, ...], tuple[list[float], list[float], list[float]]] = {}
    for job, (hours, joules, busy_h) in per_job.items():
        keep = [i for i, h in enumerate(hours) if h > 0]
        who = {"user": job.user, "account": job.account, "partition": job.partition}
        yield {
            "metric": {
                "__name__": "job:gpu_hours:sum1h",
                "hpc_job": job.id,
                **who,
                "modelName": MODELS[job.host],
            },
            "values": [hours[i] for i in keep],
            "timestamps": [stamps[i] for i in keep],
        }
        cell = (job.user, job.account, job.partition, MODELS[job.host])
        ch, cj, ca = by_cell.setdefault(cell, ([0.0] * len(ends), [0.0] * len(ends), [0.0] * len(ends)))
        for i in range(len(ends)):
            ch[i] += hours[i]
            cj[i] += joules[i]
            ca[i] += busy_h[i]
    for (user, account, partition, model), (ch, cj, ca) in by_cell.items():
        keep = [i for i, h in enumerate(ch) if h > 0]
        labels = {"user": user, "account": account, "partition": partition, "modelName": model}
        for name, values in (
            ("account_user:gpu_hours:sum1h", ch),
            ("account_user:gpu_energy_joules:increase1h", cj),
            ("account_user:gpu_active_hours:sum1h", ca),
        ):
            yield {
                "metric": {"__name__": name, **labels},
                "values": [values[i] for i in keep],
                "timestamps": [stamps[i] for i in keep],
            }


#: the year's meters: IT at 100 kW as a joule counter replaced (reset to 0) on 2025-07-01, the
#: facility's at 130 kW in kWh; hourly samples
IT_KW, DC_KW = 100.0, 130.0
YEAR = (ts("2025-01-01T00:00:00"), ts("2026-01-01T00:00:00"))
METER_RESET = ts("2025-07-01T00:00:00")


def meter_lines() -> Iterator[dict[str, Any]]:
    times = list(range(YEAR[0] - HOUR, YEAR[1] + HOUR + 1, HOUR))
    it = []
    base = 7.7e12
    for t in times:
        if t < METER_RESET:
            it.append(base + (t - times[0]) * IT_KW * 1000)
        else:
            it.append((t - METER_RESET) * IT_KW * 1000)
    dc = [12345.0 + (t - times[0]) * DC_KW / 3600 for t in times]
    stamps = [t * 1000 for t in times]
    yield {
        "metric": {"__name__": "site_pdu_energy_joules_total", "circuit": "it", "instance": "pdu1"},
        "values": it,
        "timestamps": stamps,
    }
    yield {"metric": {"__name__": "site_facility_energy_kwh_total"}, "values": dc, "timestamps": stamps}


# --- a real VictoriaMetrics ------------------------------------------------------------------


def http(url: str, *, data: bytes | None = None, timeout: float) -> bytes:
    assert url.startswith("http://127.0.0.1:")
    req = urllib.request.Request(url, data=data)  # noqa: S310 - our own VictoriaMetrics on 127.0.0.1
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - as above
        return bytes(resp.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VM:
    def __init__(self, binary: Path, data: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data.with_suffix(".log")
        self.proc = subprocess.Popen(
            [
                str(binary),
                f"-storageDataPath={data}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-search.disableCache",
                "-loggerLevel=ERROR",
                *extra,
            ],
            stdout=open(self.log, "wb"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                http(f"{self.url}/health", timeout=1)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"VictoriaMetrics did not start: {self.log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)

    def load(self, lines: Iterator[dict[str, Any]]) -> None:
        body = "".join(json.dumps(line) + "\n" for line in lines).encode()
        http(f"{self.url}/api/v1/import", data=body, timeout=120)
        http(f"{self.url}/internal/force_flush", timeout=60)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vm_binary(components: Path) -> Path:
    return components / "victoria-metrics" / "bin" / "victoria-metrics"


@pytest.fixture(scope="module")
def raw_vm(vm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VM]:
    vm = VM(vm_binary, tmp_path_factory.mktemp("vm") / "raw")
    try:
        vm.load(raw_lines())
        vm.load(meter_lines())
        yield vm
    finally:
        vm.stop()


@pytest.fixture(scope="module")
def mixed_vm(vm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VM]:
    vm = VM(vm_binary, tmp_path_factory.mktemp("vm") / "mixed")
    try:
        vm.load(raw_lines())
        vm.load(recorded_lines(RECORDED_FROM))
        vm.load(meter_lines())
        yield vm
    finally:
        vm.stop()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def vigil(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIGIL_HOME": str(home), "VIGIL_AUDIT_SYSLOG": ""}
    env.pop("VIGIL_VM_URL", None)
    exe = Path(sys.executable).with_name("vigil")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def report(home: Path, *args: str) -> tuple[dict[str, Any], Path]:
    res = vigil(home, "report", *args)
    assert res.returncode == 0, res.stderr
    path = Path(res.stdout.strip().splitlines()[-1])
    assert path.name == "report.json" and path.is_file()
    return json.loads(path.read_bytes()), path


def rows(doc: dict[str, Any]) -> dict[tuple[str, str], tuple[float, float, int]]:
    return {
        (a["account"], u["user"]): (u["gpu_hours"], u["gpu_energy_kwh"], u["jobs"])
        for a in doc["accounts"]
        for u in a["users"]
    }


def assert_close(
    got: dict[tuple[str, str], tuple[float, float, int]], want: dict[Any, Any], rel: float
) -> None:
    assert set(got) == set(want)
    for key, (h, kwh, jobs) in want.items():
        assert got[key][0] == pytest.approx(h, rel=rel), key
        assert got[key][1] == pytest.approx(kwh, rel=rel), key
        assert got[key][2] == jobs, key


# --- usage ----------------------------------------------------------------------------------------


def test_raw_path_gives_the_known_load_within_2_percent(raw_vm: VM, home: Path) -> None:
    doc, _ = report(home, "usage", "--period", "2025-10", "--vm", raw_vm.url)
    assert doc["source"]["recorded_hours"] == 0 and doc["source"]["raw_hours"] == 744
    assert_close(rows(doc), expected(*OCT), 0.02)
    physics = next(a for a in doc["accounts"] if a["account"] == "physics")
    assert physics["jobs"] == 2 and physics["gpu_hours"] == pytest.approx(14.0, rel=0.02)
    # job 102 idle for 3 of its 6 hours: 11 of physics' 14 GPU-hours active
    assert physics["active_gpu_hours"] == pytest.approx(11.0, rel=0.02)
    assert_breakdown(doc, expected_breakdown(*OCT), 0.02)


def test_recording_rules_where_they_cover_and_raw_before_give_the_same(
    mixed_vm: VM, raw_vm: VM, home: Path
) -> None:
    doc, _ = report(home, "usage", "--period", "2025-10", "--vm", mixed_vm.url)
    assert (doc["source"]["raw_hours"], doc["source"]["recorded_hours"]) == (360, 384)
    assert_close(rows(doc), expected(*OCT), 0.02)
    # the second half of October: all recorded on one, all raw on the other; they agree
    recorded, _ = report(home, "usage", "--from", "2025-10-16", "--to", "2025-10-31", "--vm", mixed_vm.url)
    raw, _ = report(home, "usage", "--from", "2025-10-16", "--to", "2025-10-31", "--vm", raw_vm.url)
    assert recorded["source"]["recorded_hours"] == 384 and raw["source"]["raw_hours"] == 384
    assert_close(rows(raw), {k: v for k, v in rows(recorded).items()}, 0.02)
    assert_close(rows(recorded), expected(ts("2025-10-16T00:00:00"), OCT[1]), 0.001)
    assert_breakdown(doc, expected_breakdown(*OCT), 0.02)
    assert_breakdown(recorded, expected_breakdown(ts("2025-10-16T00:00:00"), OCT[1]), 0.001)
    assert_breakdown(raw, expected_breakdown(ts("2025-10-16T00:00:00"), OCT[1]), 0.02)


def test_billing_weights_per_partition_bill_the_known_hours(mixed_vm: VM, home: Path, tmp_path: Path) -> None:
    """physics' October: 8 GPU-hours in `gpu` at 1.0 and 6 in `gpu-long` at 3.0; chemistry's 13 in
    `gpu` (the default weight, 0.5: `gpu` is not named)."""
    billing = tmp_path / "billing.yaml"
    billing.write_text("partitions:\n  gpu-long: 3.0\ndefault: 0.5\n")
    doc, path = report(home, "usage", "--period", "2025-10", "--billing", str(billing), "--vm", mixed_vm.url)
    rows = {a["account"]: a for a in doc["accounts"]}
    assert rows["physics"]["billed_gpu_hours"] == pytest.approx(8 * 0.5 + 6 * 3.0, rel=0.02)
    assert rows["chemistry"]["billed_gpu_hours"] == pytest.approx(13 * 0.5, rel=0.02)
    assert doc["totals"]["billed_gpu_hours"] == pytest.approx(22.0 + 6.5, rel=0.02)
    assert doc["billing"]["default_weight"] == 0.5 and len(doc["billing"]["sha256"]) == 64
    header = (path.parent / "report.csv").read_text().splitlines()[0]
    assert header.endswith(",partition,active_gpu_hours,billing_weight,billed_gpu_hours")
    billing.write_text("partitions: {gpu-long: .nan}\n")
    res = vigil(
        home, "report", "usage", "--period", "2025-10", "--billing", str(billing), "--vm", mixed_vm.url
    )
    assert res.returncode == 1
    assert res.stderr.strip() == f"FAIL: {billing}: partitions.gpu-long: must be a number, not NaN"


def test_jobs_crossing_month_ends_are_split_there(mixed_vm: VM, home: Path) -> None:
    nov, _ = report(home, "usage", "--from", "2025-11-01", "--to", "2025-11-01", "--vm", mixed_vm.url)
    assert rows(nov)[("chemistry", "carol")][0] == pytest.approx(
        6.0, rel=0.001
    )  # 3 GPUs x 2 h after midnight
    oct_doc, _ = report(home, "usage", "--period", "2025-10", "--account", "chemistry", "--vm", mixed_vm.url)
    assert [a["account"] for a in oct_doc["accounts"]] == ["chemistry"]
    # job 100: 1 h of 2 in October; job 201: 4 h x 3 GPUs of 6 h x 3 GPUs
    assert oct_doc["accounts"][0]["gpu_hours"] == pytest.approx(13.0, rel=0.02)


def test_a_month_in_the_sites_time_zone_ends_at_its_midnight(mixed_vm: VM, home: Path) -> None:
    """October 2025 in Berlin: 30 Sep 22:00 UTC to 31 Oct 23:00 UTC, 745 hours (the clocks went back on
    the 26th). Job 100 (30 Sep 23:00 - 1 Oct 01:00 UTC) is all in it, job 201 only until 23:00 UTC."""
    doc, _ = report(home, "usage", "--period", "2025-10", "--timezone", "Europe/Berlin", "--vm", mixed_vm.url)
    period = doc["period"]
    assert (period["start"], period["end"], period["timezone"]) == (
        "2025-09-30T22:00:00Z",
        "2025-10-31T23:00:00Z",
        "Europe/Berlin",
    )
    assert period["start_local"] == "2025-10-01T00:00:00+02:00"
    assert doc["source"]["raw_hours"] + doc["source"]["recorded_hours"] == 745
    assert_close(rows(doc), expected(ts("2025-09-30T22:00:00"), ts("2025-10-31T23:00:00")), 0.02)
    assert rows(doc)[("chemistry", "carol")][0] == pytest.approx(2.0 + 9.0, rel=0.02)
    res = vigil(
        home, "report", "usage", "--period", "2025-10", "--timezone", "Asia/Kolkata", "--vm", mixed_vm.url
    )
    assert res.returncode != 0 and res.stderr.startswith("FAIL: time zone Asia/Kolkata: midnight of ")


def test_regenerating_gives_identical_json_that_stock_minisign_verifies(
    mixed_vm: VM, home: Path, tmp_path: Path
) -> None:
    _, first = report(home, "usage", "--period", "2025-10", "--vm", mixed_vm.url)
    data = first.read_bytes()
    _, second = report(home, "usage", "--period", "2025-10", "--vm", mixed_vm.url, "--format", "json,csv")
    assert second == first and second.read_bytes() == data
    pub = home / "reports" / "key" / "report.pub"
    res = subprocess.run(
        ["minisign", "-V", "-m", str(first), "-x", f"{first}.minisig", "-p", str(pub)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    res = vigil(home, "report", "verify", str(first))
    assert res.returncode == 0 and res.stdout.startswith(f"OK: {first}: usage report 2025-10")
    edited = tmp_path / "report.json"
    edited.write_bytes(data.replace(b"13.0", b"13.1", 1))
    shutil.copy(f"{first}.minisig", f"{edited}.minisig")
    res = vigil(home, "report", "verify", str(edited))
    assert res.returncode == 1 and res.stderr.strip().startswith(f"FAIL: {edited}: ")
    log = [json.loads(line) for line in (home / "audit" / "log.jsonl").read_text().splitlines()]
    made = [r for r in log if r["action"] == "report.usage" and r["outcome"] == "ok"]
    assert len(made) == 2 and {r["details"]["sha256"] for r in made} == {first.parent.name}


def test_a_period_without_data_fails_and_stores_nothing(mixed_vm: VM, home: Path) -> None:
    res = vigil(home, "report", "usage", "--period", "2024-10", "--vm", mixed_vm.url)
    assert res.returncode == 1
    assert (
        res.stderr.strip().splitlines()[-1].startswith("FAIL: period 2024-10: no GPU data in VictoriaMetrics")
    )
    assert not (home / "reports" / "objects").exists() or not any((home / "reports" / "objects").iterdir())


def test_export_then_verify_without_vigil(mixed_vm: VM, home: Path, tmp_path: Path) -> None:
    doc, path = report(home, "usage", "--period", "2025-10", "--vm", mixed_vm.url)
    out = tmp_path / "export"
    res = vigil(home, "report", "export", path.parent.name[:10], "--out", str(out))
    assert res.returncode == 0, res.stderr
    for name in ("report.json", "report.csv", "report.pdf"):
        res = subprocess.run(
            ["minisign", "-V", "-m", name, "-x", f"{name}.minisig", "-p", "report.pub"],
            cwd=out,
            capture_output=True,
        )
        assert res.returncode == 0
    assert (out / "report.csv").read_text().splitlines()[
        0
    ] == "period,account,user,gpu_hours,gpu_energy_kwh,jobs,partition,active_gpu_hours"
    # the PDF as stock tools read it: sound, and with the JSON's figures
    check = subprocess.run(["qpdf", "--check", "report.pdf"], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    text = subprocess.run(
        ["pdftotext", "-layout", "report.pdf", "-"], cwd=out, capture_output=True, text=True, check=True
    ).stdout
    physics = next(a for a in doc["accounts"] if a["account"] == "physics")
    assert f"{physics['gpu_hours']:,.3f}" in text and doc["period"]["start"] in text


# --- the real rules, through the real vmalert ------------------------------------------------------------


def replay(vmalert: Path, vm: VM, tmp_path: Path, start: str, end: str) -> None:
    """The shipped accounting group, replayed by vmalert in dependency order (vmalert 1.79 does not see
    a chained rule's fresh output within one replay, so each layer is its own run, flushed between)."""
    group = next(g for g in yaml.safe_load(RULES.read_text())["groups"] if g["name"] == "vigil_accounting")
    chained = (
        "job:gpu_hours:sum1h",
        "cluster:gpu_hours:sum1h",
        "cluster:gpu_unallocated_hours:sum1h",
        "account_user:gpu_active_hours:sum1h",
    )
    first = ("account_user:gpus_active:count",)  # from the raw series, though named per account

    def aggregate(name: str) -> bool:
        return name.startswith(("account:", "account_user:")) and name not in chained + first

    layers = [
        [r for r in group["rules"] if r["record"] not in chained and not aggregate(r["record"])],
        [r for r in group["rules"] if r["record"] in chained],
        [r for r in group["rules"] if aggregate(r["record"])],
    ]
    assert sum(len(layer) for layer in layers) == len(group["rules"])
    for n, rules in enumerate(layers):
        path = tmp_path / f"layer{n}.yml"
        path.write_text(yaml.safe_dump({"groups": [{**group, "rules": rules}]}))
        res = subprocess.run(
            [
                str(vmalert),
                f"-rule={path}",
                f"-datasource.url={vm.url}",
                f"-remoteWrite.url={vm.url}",
                "-datasource.queryStep=1m",
                f"-replay.timeFrom={start}",
                f"-replay.timeTo={end}",
                "-replay.disableProgressBar",
                "-replay.rulesDelay=0s",
                "-loggerLevel=ERROR",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        http(f"{vm.url}/internal/force_flush", timeout=60)
        time.sleep(2)


def test_the_shipped_rules_replayed_by_vmalert_give_the_same_figures(
    components: Path, vm_binary: Path, tmp_path: Path, home: Path
) -> None:
    vmalert = components / "victoria-metrics" / "bin" / "vmalert"
    if not vmalert.is_file():
        pytest.skip("this bundle's victoria-metrics has no vmalert")
    vm = VM(vm_binary, tmp_path / "replayed")
    try:
        vm.load(raw_lines())
        replay(vmalert, vm, tmp_path, "2025-10-05T09:00:00Z", "2025-10-05T15:00:00Z")
        doc, _ = report(home, "usage", "--from", "2025-10-05", "--to", "2025-10-05", "--vm", vm.url)
        assert doc["source"]["recorded_hours"] >= 5
        day = (ts("2025-10-05T00:00:00"), ts("2025-10-06T00:00:00"))
        assert_close(rows(doc), expected(*day), 0.02)
        assert_breakdown(doc, expected_breakdown(*day), 0.02)
    finally:
        vm.stop()


def test_replayed_rules_count_the_idle_half_of_a_job_allocated_not_active(
    components: Path, vm_binary: Path, tmp_path: Path, home: Path
) -> None:
    """Job 102 (physics, partition gpu-long, an H100) holds its GPU for 6 hours and keeps it busy for 3:
    the shipped rules, replayed by the real vmalert, record 6 GPU-hours and 3 active, in its partition
    and on its model, as the raw path reads them."""
    vmalert = components / "victoria-metrics" / "bin" / "vmalert"
    if not vmalert.is_file():
        pytest.skip("this bundle's victoria-metrics has no vmalert")
    vm = VM(vm_binary, tmp_path / "idle-replayed")
    try:
        vm.load(raw_lines())
        day = ("--from", "2025-10-20", "--to", "2025-10-20", "--vm", vm.url)
        raw, _ = report(home, "usage", *day)
        replay(vmalert, vm, tmp_path, "2025-10-19T23:00:00Z", "2025-10-20T07:00:00Z")
        doc, _ = report(home, "usage", *day)
        assert doc["source"]["recorded_hours"] >= 7, doc["source"]
        want = expected_breakdown(ts("2025-10-20T00:00:00"), ts("2025-10-21T00:00:00"))
        assert want["partitions"] == {("physics", "gpu-long"): [6.0, 3.0, 6 * BUSY_W / 1000, 1]}
        for got in (raw, doc):
            assert_breakdown(got, want, 0.02)
    finally:
        vm.stop()


def test_an_hour_whose_evaluation_is_not_yet_stored_is_read_from_raw_series(
    components: Path, vm_binary: Path, tmp_path: Path, home: Path
) -> None:
    """A report of the month in progress, made while vmalert has stored the hour's evaluations only up
    to the minute before its end (the group runs late on a loaded host): seen in the lab, the sample
    a minute early stood in for the hour and a 2-GPU job ending in that minute lost its last seconds
    (0.021 kWh reported for 0.027 measured). The hour must come from the raw series until its own
    sample is stored, and from the rules once it is, to the same figure."""
    vmalert = components / "victoria-metrics" / "bin" / "vmalert"
    assert vmalert.is_file(), f"{vmalert}: the debian bundle ships vmalert with VictoriaMetrics"
    start, end = ts("2025-10-07T13:55:00"), ts("2025-10-07T13:59:40")
    vm = VM(vm_binary, tmp_path / "late")
    try:
        vm.load(live_lines("7002", start, end))
        # what the counters measured: first to last sample of the job's series, 2 GPUs at 350 W
        measured_kwh = 2 * BUSY_W * (end - 10 - start) / 3.6e6
        day = ("--from", "2025-10-07", "--to", "2025-10-07", "--vm", vm.url)

        replay(vmalert, vm, tmp_path, "2025-10-07T12:00:00Z", "2025-10-07T13:59:00Z")
        stored = "tlast_over_time(cluster:gpu_energy_joules:increase1h[5m])"  # the last sample's time
        url = f"{vm.url}/api/v1/query?" + urllib.parse.urlencode(
            {"query": stored, "time": ts("2025-10-07T14:00:00"), "nocache": 1}
        )
        last = int(float(json.loads(http(url, timeout=60))["data"]["result"][0]["value"][1]))
        assert ts("2025-10-07T13:55:00") <= last < ts("2025-10-07T14:00:00"), last
        doc, _ = report(home, "usage", *day)
        assert (doc["source"]["recorded_hours"], doc["source"]["raw_hours"]) == (0, 1), doc["source"]
        (row,) = doc["accounts"]
        assert row["gpu_energy_kwh"] == pytest.approx(measured_kwh, rel=0.01, abs=0.0005), row

        replay(vmalert, vm, tmp_path, "2025-10-07T13:59:00Z", "2025-10-07T14:01:00Z")
        doc, _ = report(home, "usage", *day)
        assert (doc["source"]["recorded_hours"], doc["source"]["raw_hours"]) == (1, 0), doc["source"]
        (row,) = doc["accounts"]
        assert row["gpu_energy_kwh"] == pytest.approx(measured_kwh, rel=0.01, abs=0.0005), row
    finally:
        vm.stop()


def deployed_accounting_rules(dest: Path) -> Path:
    """The accounting rule file as the vmalert role installs it (its filter, its group params)."""
    import importlib.util

    role = ROOT / "roles" / "vmalert"
    spec = importlib.util.spec_from_file_location("vigil_rules", role / "filter_plugins" / "vigil_rules.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    params = yaml.safe_load((role / "vars" / "main.yml").read_text())["_vmalert_group_params"]
    dest.write_text(mod.vigil_rule_file(RULES.read_text(), group_params=params))
    return dest


def live_lines(job: str, start: int, end: int) -> Iterator[dict[str, Any]]:
    """Two GPUs of one job at 350 W, 10 s scrapes from ``start`` to ``end`` (which may lie a little
    ahead: every sample a query can ask for is already stored when vmalert evaluates)."""
    times = list(range(start, end, 10))
    stamps = [t * 1000 for t in times]
    for gpu in (0, 1):
        labels = {"gpu": str(gpu), "instance": "gpu01:9400", "hpc_job": job}
        yield {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels},
            "values": [68.0] * len(times),
            "timestamps": stamps,
        }
        yield {
            "metric": {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **labels},
            "values": [1e9 + (t - start) * BUSY_W * 1000 for t in times],
            "timestamps": stamps,
        }
        yield {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels},
            "values": [97.0] * len(times),
            "timestamps": stamps,
        }
    yield {
        "metric": {
            "__name__": "slurm_job_info",
            "hpc_job": job,
            "user": "alice",
            "account": "physics",
            "instance": "gpu01:9400",
        },
        "values": [1] * len(times),
        "timestamps": stamps,
    }


def test_live_vmalert_records_each_hour_over_exactly_the_hour_before_its_timestamp(
    components: Path, vm_binary: Path, tmp_path: Path
) -> None:
    """The reports join recorded hours to raw series at the same instants (installer/reports/usage.py),
    so a recorded sample at t must cover (t - 1h, t]. Evaluating live (not replaying), vmalert asks for
    the evaluation's whole minute, but VictoriaMetrics moves a query within its latency offset (30 s)
    of now back to now - 30 s unless the group's params say nocache=1: the sample would then end up to
    30 s early, by how late in the minute the group runs. With the role's params it may not.

    And every hourly series a report reads must be its raw expression over that hour, evaluated live:
    vmalert writes a rule's result asynchronously, so a rule reading another rule of its group at the
    same evaluation sees the minute before (or nothing) - an hour ending at t then covered
    (t - 1h - 1m, t - 1m] and a job straddling t lost its last minute before t in a report."""
    vmalert = components / "victoria-metrics" / "bin" / "vmalert"
    assert vmalert.is_file(), f"{vmalert}: the debian bundle ships vmalert with VictoriaMetrics"
    vm = VM(vm_binary, tmp_path / "live")
    proc = None
    try:
        now = int(time.time())
        vm.load(live_lines("7001", now - 40 * 60, now + 200))
        rules = deployed_accounting_rules(tmp_path / "vigil-accounting.yml")
        log = tmp_path / "vmalert.log"
        proc = subprocess.Popen(
            [
                str(vmalert),
                f"-rule={rules}",
                f"-datasource.url={vm.url}",
                f"-remoteWrite.url={vm.url}",
                "-remoteWrite.flushInterval=1s",
                f"-notifier.url=http://127.0.0.1:{free_port()}",  # recording rules only: never called
                f"-httpListenAddr=127.0.0.1:{free_port()}",
                "-loggerLevel=ERROR",
            ],
            stdout=open(log, "wb"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
        )

        def recorded(
            selector: str = 'job:gpu_energy_joules:increase1h{hpc_job="7001"}',
        ) -> list[tuple[int, float]]:
            http(f"{vm.url}/internal/force_flush", timeout=60)
            url = f"{vm.url}/api/v1/export?" + urllib.parse.urlencode({"match[]": selector})
            out = []
            for line in http(url, timeout=60).decode().splitlines():
                doc = json.loads(line)
                out += list(zip(doc["timestamps"], doc["values"], strict=True))
            return sorted(out)

        # the group's first run comes within a minute of start; two runs, so that the second one's
        # rules would find the first one's samples if they read them
        deadline = time.monotonic() + 210
        samples: list[tuple[int, float]] = []
        while len(samples) < 2:
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, f"vmalert recorded {samples}: {log.read_text()[-2000:]}"
            time.sleep(2)
            samples = recorded()

        def at(q: str, t: float) -> float:
            url = f"{vm.url}/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": t, "nocache": 1})
            result = json.loads(http(url, timeout=60))["data"]["result"]
            return sum(float(r["value"][1]) for r in result)

        def raw(t: float) -> float:
            return at('sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{hpc_job="7001"}[1h])) / 1000', t)

        # each series a report reads from the rules beside the raw query the report reads for the
        # same hour (installer/reports/usage.py); the data began 40 minutes ago, so every one of
        # them grows from minute to minute and a sample a minute late differs
        raw_hour = usage.raw_queries(HOUR, "")
        read = {
            "account_user:gpu_hours:sum1h": raw_hour["gpu_hours"],
            "account_user:gpu_energy_joules:increase1h": raw_hour["joules"],
            "account_user:gpu_active_hours:sum1h": raw_hour["active_hours"],
            "cluster:gpu_hours:sum1h": raw_hour["cluster_gpu_hours"],
            "cluster:gpu_energy_joules:increase1h": raw_hour["cluster_joules"],
        }
        for name, query in read.items():
            got = recorded(name)
            assert len(got) >= 2, (name, got)
            for stamp, value in got:
                assert value == pytest.approx(at(query, stamp / 1000), rel=1e-9), (name, stamp, value)

        for stamp, value in samples:
            assert stamp % 60_000 == 0, samples
            t = stamp / 1000
            # the test can fail: the counters grow 700 W, so 30 s earlier is 21 kJ less
            assert raw(t) - raw(t - 30) == pytest.approx(2 * BUSY_W * 30, rel=0.01)
            assert value == pytest.approx(raw(t), rel=1e-9), (stamp, value, raw(t), raw(t - 30))
        # and what nocache=1 is for: without it, a query this recent is answered 30 s earlier
        at = time.time() - 5
        url = f"{vm.url}/api/v1/query?" + urllib.parse.urlencode({"query": "time()", "time": at})
        assert float(json.loads(http(url, timeout=60))["data"]["result"][0]["value"][1]) < at - 20
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        vm.stop()


# --- MIG instances and shared GPUs ------------------------------------------------------------------------

#: 2025-10-08, gpu05 (A100s, no DCGM_FI_DEV_GPU_TEMP in its counters file), 30 s scrapes, 09:00-13:00:
#: GPU 0 in MIG mode, 3g.40gb GI 1 runs job 501 (alice, physics), 3g.40gb GI 2 job 502 (bob,
#: chemistry), 1g.10gb GI 7 idle; GPU 1 in MIG mode, job 503 (carol, chemistry) on both its 3g.40gb
#: instances; GPU 2 whole, shared by jobs 504 and 505 (dave, erin, physics: Slurm sharding). The jobs
#: run 10:00-12:00; a GPU draws 350 W while any of its instances has a job, 60 W otherwise, and
#: dcgm-exporter repeats the whole GPU's counter on every instance and every job's series.
MIG_START, MIG_END = ts("2025-10-08T09:00:00"), ts("2025-10-08T13:00:00")
MIG_BUSY = (ts("2025-10-08T10:00:00"), ts("2025-10-08T12:00:00"))
#: (gpu, profile or "", GPU instance id or "", jobs): one entity each
MIG_ENTITIES = (
    (0, "3g.40gb", "1", ("501",)),
    (0, "3g.40gb", "2", ("502",)),
    (0, "1g.10gb", "7", ()),
    (1, "3g.40gb", "1", ("503",)),
    (1, "3g.40gb", "2", ("503",)),
    (2, "", "", ("504", "505")),
)
MIG_JOBS = {
    "501": ("physics", "alice"),
    "502": ("chemistry", "bob"),
    "503": ("chemistry", "carol"),
    "504": ("physics", "dave"),
    "505": ("physics", "erin"),
}


def mig_lines() -> Iterator[dict[str, Any]]:
    times = list(range(MIG_START, MIG_END, STEP))
    busy = [MIG_BUSY[0] <= t < MIG_BUSY[1] for t in times]
    energy: dict[int, list[float]] = {}
    for gpu in (0, 1, 2):
        mj, out = 4e9 + gpu * 1e8, []
        for b in busy:
            out.append(mj)
            mj += (BUSY_W if b else IDLE_W) * STEP * 1000
        energy[gpu] = out
    for gpu, profile, gi, jobs in MIG_ENTITIES:
        labels = {"gpu": str(gpu), "instance": "gpu05:9400", "modelName": "NVIDIA A100-SXM4-40GB"}
        if profile:
            labels |= {"GPU_I_PROFILE": profile, "GPU_I_ID": gi}
        runs = [(job, [i for i, b in enumerate(busy) if b]) for job in jobs]
        runs.append(("", [i for i, b in enumerate(busy) if not (b and jobs)]))
        for job, idx in runs:
            tagged = labels | ({"hpc_job": job} if job else {})
            stamps = [times[i] * 1000 for i in idx]
            yield {
                "metric": {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **tagged},
                "values": [energy[gpu][i] for i in idx],
                "timestamps": stamps,
            }
            yield {
                "metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", **tagged},
                "values": [BUSY_W if busy[i] and jobs else IDLE_W for i in idx],
                "timestamps": stamps,
            }
    for job, (account, user) in MIG_JOBS.items():
        stamps = [t * 1000 for t, b in zip(times, busy, strict=True) if b]
        yield {
            "metric": {
                "__name__": "slurm_job_info",
                "hpc_job": job,
                "user": user,
                "account": account,
                "instance": "gpu05:9400",
            },
            "values": [1] * len(stamps),
            "timestamps": stamps,
        }


#: (account, user) -> (GPU-hours, kWh, jobs): a 3g slice is 3/7 of its GPU's 2 busy hours and 0.7 kWh
MIG_EXPECTED = {
    ("physics", "alice"): (2 * 3 / 7, 0.7 * 3 / 7, 1),
    ("chemistry", "bob"): (2 * 3 / 7, 0.7 * 3 / 7, 1),
    ("chemistry", "carol"): (2 * 6 / 7, 0.7 * 6 / 7, 1),
    ("physics", "dave"): (1.0, 0.35, 1),
    ("physics", "erin"): (1.0, 0.35, 1),
}


@pytest.fixture(scope="module")
def mig_vm(vm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VM]:
    vm = VM(vm_binary, tmp_path_factory.mktemp("vm") / "mig")
    try:
        vm.load(mig_lines())
        yield vm
    finally:
        vm.stop()


def test_mig_slices_and_shared_gpus_are_charged_their_share_and_add_up(mig_vm: VM, home: Path) -> None:
    doc, _ = report(home, "usage", "--from", "2025-10-08", "--to", "2025-10-08", "--vm", mig_vm.url)
    # GPU-hours without DCGM_FI_DEV_GPU_TEMP: from the fields that are there
    assert_close(rows(doc), MIG_EXPECTED, 0.02)
    c = doc["cluster"]
    # the GPUs' counters: 3 GPUs, 2 h at 350 W and 2 h at 60 W each (the first 30 s have no base)
    assert c["measured_gpu_energy_kwh"] == pytest.approx(3 * (0.7 + 0.12), rel=0.01)
    assert c["charged_gpu_energy_kwh"] == doc["totals"]["gpu_energy_kwh"]
    assert doc["totals"]["gpu_energy_kwh"] == pytest.approx(0.7 * (6 / 7 + 6 / 7 + 1), rel=0.02)
    # no one's: each GPU's idle hours, GPU 0's idle 1g slice and GPU 1's unconfigured seventh
    assert c["unallocated_gpu_energy_kwh"] == pytest.approx(3 * 0.12 + 2 * 0.1, rel=0.05)
    assert c["measured_gpu_hours"] == pytest.approx(12.0, rel=0.01)
    assert c["unallocated_gpu_hours"] == pytest.approx(12.0 - 2 * (6 / 7 + 6 / 7 + 1), rel=0.02)
    assert c["conservation"]["holds"] is True, c
    for kind in ("gpu_energy_kwh", "gpu_hours"):
        assert c[f"charged_{kind}"] + c[f"unallocated_{kind}"] == pytest.approx(
            c[f"measured_{kind}"], rel=0.005
        )
    # an account's report still checks the whole cluster (the other accounts' charges included)
    one, _ = report(
        home,
        "usage",
        "--from",
        "2025-10-08",
        "--to",
        "2025-10-08",
        "--account",
        "physics",
        "--vm",
        mig_vm.url,
    )
    assert one["cluster"] == c and one["totals"]["gpu_energy_kwh"] < c["charged_gpu_energy_kwh"]


def test_recorded_mig_hours_give_the_raw_figures(
    components: Path, vm_binary: Path, tmp_path: Path, home: Path
) -> None:
    """The shipped rules, replayed by the real vmalert over the MIG data, record what the raw path reads."""
    vmalert = components / "victoria-metrics" / "bin" / "vmalert"
    if not vmalert.is_file():
        pytest.skip("this bundle's victoria-metrics has no vmalert")
    vm = VM(vm_binary, tmp_path / "mig-replayed")
    try:
        vm.load(mig_lines())
        replay(vmalert, vm, tmp_path, "2025-10-08T09:00:00Z", "2025-10-08T13:00:00Z")
        doc, _ = report(home, "usage", "--from", "2025-10-08", "--to", "2025-10-08", "--vm", vm.url)
        assert doc["source"]["recorded_hours"] >= 3, doc["source"]
        assert_close(rows(doc), MIG_EXPECTED, 0.02)
        assert doc["cluster"]["conservation"]["holds"] is True, doc["cluster"]
    finally:
        vm.stop()


# --- scraped, not imported: a job's series ends mid-minute ----------------------------------------------


class _Exporter(BaseHTTPRequestHandler):
    """One whole GPU as dcgm-exporter shows it: its counter at 350 W; while a job runs, the same
    series carries ``hpc_job`` (so the unlabelled series goes stale and a new one starts), and
    slurm_job_info says whose job it is. ``jobs``: (start, end, id, account, user), one at a time."""

    t0 = 0.0
    jobs: tuple[tuple[float, float, str, str, str], ...] = ()

    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        now = time.time()
        gpu = 'gpu="0",UUID="GPU-0",modelName="NVIDIA H100 80GB HBM3"'
        running = [j for j in self.jobs if j[0] <= now < j[1]]
        labels = gpu + "".join(f',hpc_job="{j[2]}"' for j in running)
        lines = [
            f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {5e9 + (now - self.t0) * BUSY_W * 1000:.0f}",
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {BUSY_W}",
        ]
        for _, _, job, account, user in running:
            lines.append(
                f'slurm_job_info{{hpc_job="{job}",user="{user}",account="{account}",partition="gpu"}} 1'
            )
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_scraped_jobs_ending_and_starting_mid_minute_are_each_charged_their_own_energy(
    vm_binary: Path, tmp_path: Path
) -> None:
    """Imported data has no staleness: when VictoriaMetrics scrapes, a job's series is gone (a
    staleness mark) within seconds of the job's end. Two short jobs run one after the other on one
    GPU within one minute, and no job is on it at the minute's end (a third starts just after).
    Each must be charged all its own series counted: a share read at the minute's end charged them
    nothing; a share counting every job of the minute split the GPU between the two and charged each
    half of its own (seen in the lab: -12 % and -4.5 % on a 150 s job among short ones). And charged +
    unallocated must still be what the GPU's counter measured."""
    from vigil.installer.reports import usage
    from vigil.installer.reports.period import Period
    from vigil.installer.reports.vm import VictoriaMetrics

    now = time.time()
    # the jobs start after the GPU's first minute (the measured figure reads each minute from the
    # sample before it, which the GPU's very first minute has not got)
    first = (now // 60 + 1) * 60
    _Exporter.t0 = now
    _Exporter.jobs = (
        (first + 3, first + 30, "9001", "physics", "alice"),
        (first + 35, first + 55, "9002", "chemistry", "bob"),
        (first + 61, first + 600, "9003", "biology", "carol"),
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "scrape.yml"
    config.write_text(
        "scrape_configs:\n- job_name: dcgm\n  scrape_interval: 2s\n  static_configs:\n"
        f"  - targets: ['127.0.0.1:{server.server_address[1]}']\n    labels: {{instance: 'gpu01:9400'}}\n"
    )
    vm = VM(vm_binary, tmp_path / "scraped", f"-promscrape.config={config}", "-search.latencyOffset=1s")
    try:
        end = int(first) + 60  # the end of the minute both jobs were in
        time.sleep(max(0.0, end + 4 - time.time()))
        http(f"{vm.url}/internal/force_flush", timeout=60)
        start = int(now // 60) * 60
        got = usage.collect(
            VictoriaMetrics(vm.url), Period("scraped", start, end, complete=False), jobs=False
        )
        client = VictoriaMetrics(vm.url)
        w = f"{end - start}s"
        for job, who, least_s in (("9001", ("physics", "alice"), 20), ("9002", ("chemistry", "bob"), 12)):
            sel = f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{hpc_job="{job}"}}'
            spread = f"max_over_time({sel}[{w}]) - min_over_time({sel}[{w}])"
            counted = sum(v for _, v in client.query(spread, end)) / 1000
            assert counted > BUSY_W * least_s, f"job {job}'s series counted only {counted:.0f} J"
            assert got.joules[who] == pytest.approx(counted, rel=0.01), (job, got.joules[who], counted)
        assert got.charged_joules == pytest.approx(sum(got.joules.values()), rel=1e-9)
        assert got.charged_joules + got.unallocated_joules == pytest.approx(got.cluster_joules, rel=0.005)
        # the GPU's counter from the first minute with a sample before it to the end
        assert got.cluster_joules == pytest.approx(BUSY_W * (end - first), rel=0.05)
    finally:
        server.shutdown()
        vm.stop()


# --- what the meters say of each job, for the reconciliation with Slurm ----------------------------------

#: 2025-10-10, 30 s scrapes 09:00-13:00, each job 10:00-11:00 on whole GPUs of its own node: gpu11 job 701
#: on 2 GPUs, every scrape answered; gpu12 job 702 on 1 GPU, its GPU exporter down 10:20-10:40 (its
#: node_exporter answering); gpu13 job 703 on 1 GPU, both exporters down 10:30-10:45 (the node down)
REC_START, REC_END = ts("2025-10-10T09:00:00"), ts("2025-10-10T13:00:00")
REC_JOB = (ts("2025-10-10T10:00:00"), ts("2025-10-10T11:00:00"))
REC_NODES = {
    "gpu11": ("701", 2, None, None),
    "gpu12": ("702", 1, (ts("2025-10-10T10:20:00"), ts("2025-10-10T10:40:00")), None),
    "gpu13": ("703", 1, None, (ts("2025-10-10T10:30:00"), ts("2025-10-10T10:45:00"))),
}

REC_WHO = {"701": ("physics", "alice"), "702": ("chemistry", "bob"), "703": ("physics", "carol")}


def reconcile_lines() -> Iterator[dict[str, Any]]:
    times = list(range(REC_START, REC_END, STEP))

    def down(t: int, window: tuple[int, int] | None) -> bool:
        return window is not None and window[0] <= t < window[1]

    for node, (job, gpus, gpu_down, node_down) in REC_NODES.items():
        for scrape_job, windows in (
            ("dcgm_exporter", (gpu_down, node_down)),
            ("node_exporter", (node_down,)),
        ):
            yield {
                "metric": {"__name__": "up", "job": scrape_job, "instance": node},
                "values": [0 if any(down(t, w) for w in windows) else 1 for t in times],
                "timestamps": [t * 1000 for t in times],
            }
        answered = [t for t in times if not down(t, gpu_down) and not down(t, node_down)]
        for gpu in range(gpus):
            for tag, stamps in (
                ({"hpc_job": job}, [t for t in answered if REC_JOB[0] <= t < REC_JOB[1]]),
                ({}, [t for t in answered if not REC_JOB[0] <= t < REC_JOB[1]]),
            ):
                labels = {"instance": node, "gpu": str(gpu), "modelName": "NVIDIA H100 80GB HBM3", **tag}
                yield {
                    "metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", **labels},
                    "values": [BUSY_W] * len(stamps),
                    "timestamps": [t * 1000 for t in stamps],
                }
                yield {
                    "metric": {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **labels},
                    "values": [1e9 + (t - REC_START) * BUSY_W * 1000 for t in stamps],
                    "timestamps": [t * 1000 for t in stamps],
                }
        if job:
            stamps = [t * 1000 for t in answered if REC_JOB[0] <= t < REC_JOB[1]]
            yield {
                "metric": {
                    "__name__": "slurm_job_info",
                    "hpc_job": job,
                    "user": REC_WHO[job][1],
                    "account": REC_WHO[job][0],
                    "partition": "gpu",
                    "instance": node,
                },
                "values": [1] * len(stamps),
                "timestamps": stamps,
            }


def test_device_hours_per_job_and_why_a_job_was_not_metered(vm_binary: Path, tmp_path: Path) -> None:
    from vigil.installer.reports import metered
    from vigil.installer.reports.period import Period
    from vigil.installer.reports.vm import VictoriaMetrics

    vm = VM(vm_binary, tmp_path / "reconcile")
    try:
        vm.load(reconcile_lines())
        client = VictoriaMetrics(vm.url)
        hours = metered.job_device_hours(
            client, Period("2025-10-10", REC_START - 9 * HOUR, REC_END + 11 * HOUR)
        )
        # each minute a job's series are there counts one device-minute per GPU
        assert hours == pytest.approx({"701": 2.0, "702": 40 / 60, "703": 45 / 60}, abs=2 / 60)
        a, b = REC_JOB
        assert metered.why(client, ["gpu11"], a, b) is None
        assert metered.why(client, ["gpu12"], a, b) == "gpu12: GPU exporter down 20 of the job's 60 min"
        assert metered.why(client, ["gpu13"], a, b) == (
            "gpu13: node down (no exporter answered) 15 of the job's 60 min"
        )
        assert metered.why(client, ["gpu99"], a, b) == (
            "gpu99: not scraped at all in the job's 60 min (monitoring down?)"
        )
        # a node outside the job's nodes, or a job shorter than a minute, explains nothing
        assert metered.why(client, ["gpu12"], REC_START, a) is None
        assert metered.why(client, ["gpu12"], a, a + 30) is None
    finally:
        vm.stop()


def test_usage_report_reconciles_with_slurms_accounting(vm_binary: Path, tmp_path: Path, home: Path) -> None:
    """sacct's view of the jobs beside the meters': the job whose every scrape answered agrees, the two
    whose exporters were down differ and say why, a job Slurm still runs is named as such."""
    vm = VM(vm_binary, tmp_path / "reconcile-report")
    try:
        vm.load(reconcile_lines())
        a, b = REC_JOB
        late = ts("2025-10-10T11:30:00")
        sacct = tmp_path / "sacct.txt"
        sacct.write_text(
            f"701|physics|alice|gpu|billing=2,cpu=2,gres/gpu=2,mem=8G,node=1|{a}|{b}|COMPLETED|gpu11\n"
            f"702|chemistry|bob|gpu|billing=1,cpu=1,gres/gpu=1,node=1|{a}|{b}|COMPLETED|gpu12\n"
            f"703|physics|carol|gpu|cpu=1,gres/gpu:h100=1,node=1|{a}|{b}|CANCELLED by 0|gpu13\n"
            f"704|chemistry|erin|gpu|cpu=1,gres/gpu=1,node=1|{late}|Unknown|RUNNING|gpu1[1-3]\n"
            "705|physics|dave|gpu||Unknown|Unknown|PENDING|None assigned\n"
        )
        doc, _ = report(
            home, "usage", "--from", "2025-10-10", "--to", "2025-10-10", "--vm", vm.url, "--sacct", str(sacct)
        )
        rec = doc["reconciliation"]
        assert rec["source"]["sacct_sha256"] == hashlib.sha256(sacct.read_bytes()).hexdigest()
        assert rec["source"]["jobs_in_file"] == 5
        got = {x["account"]: x for x in rec["accounts"]}
        assert got["physics"]["slurm_gpu_hours"] == pytest.approx(3.0)
        # the meters count a minute whose mark sees a sample: a minute or two more at each edge of a
        # job and of a gap (the floor of the comparison, 2 minutes per GPU, is there for this)
        assert got["physics"]["metered_gpu_hours"] == pytest.approx(2.75, abs=0.1)
        # 704 runs from 11:30 to the day's end as far as Slurm knows, on no GPU the meters saw
        assert got["chemistry"]["slurm_gpu_hours"] == pytest.approx(1.0 + 12.5)
        assert got["chemistry"]["metered_gpu_hours"] == pytest.approx(40 / 60, abs=0.07)
        reasons = {j["job"]: (j["state"], j["reason"]) for j in rec["jobs"]}
        assert reasons == {
            "702": ("COMPLETED", "gpu12: GPU exporter down 20 of the job's 60 min"),
            "703": ("CANCELLED", "gpu13: node down (no exporter answered) 15 of the job's 60 min"),
            "704": ("RUNNING", "job still running"),
        }
        assert rec["totals"]["jobs"] == 4 and rec["totals"]["jobs_differing"] == 3
        # one account's report reconciles that account only
        one, _ = report(
            home,
            "usage",
            "--from",
            "2025-10-10",
            "--to",
            "2025-10-10",
            "--account",
            "physics",
            "--vm",
            vm.url,
            "--sacct",
            str(sacct),
        )
        assert [x["account"] for x in one["reconciliation"]["accounts"]] == ["physics"]
        assert [j["job"] for j in one["reconciliation"]["jobs"]] == ["703"]
        # a hostile file is refused in one line and nothing is stored
        sacct.write_text(f"701|physics|alice|gpu|gres/gpu=2|{a}|{b}|COMPLETED\n")
        before = sorted((home / "reports").rglob("*.json"))
        res = vigil(
            home,
            "report",
            "usage",
            "--from",
            "2025-10-10",
            "--to",
            "2025-10-10",
            "--vm",
            vm.url,
            "--sacct",
            str(sacct),
        )
        assert res.returncode != 0 and "line 1" in res.stderr and len(res.stderr.strip().splitlines()) == 1
        assert sorted((home / "reports").rglob("*.json")) == before
    finally:
        vm.stop()


# --- energy ------------------------------------------------------------------------------------------------

SITE = """\
name: HPC Centre North
owner: Example University
owner_contact: facilities@example.org
operator: Example University Computing Centre
operator_contact: dc-operations@example.org
contact: dc-report@example.org
location: Espoo, Finland
lau_code: FI_049
type: enterprise
structure: structure
start_of_operation: 2019-03-01
redundancy_electrical_high_voltage: N
redundancy_electrical_low_voltage: 2N
redundancy_electrical_rack: 2N
redundancy_cooling_room: N+1
redundancy_cooling_rack: N
it_power_metric: installed
e_it_measurement_point: ups
e_dc_measurement_point: main incomers A and B before the transfer switchgear, and the generator set
wue_category: category-2
grid_functions: none
refrigerants: R-1234ze
installed_it_power_kw: 800
meters:
  it_energy:
    - selector: 'site_pdu_energy_joules_total{circuit="it"}'
      unit: J
  total_energy:
    - selector: 'site_facility_energy_kwh_total'
      unit: kWh
declared:
  backup_generator_energy_kwh: 412
  battery_capacity_to_grid_kw: 0
  water_input_m3: 5000
  potable_water_input_m3: 1200
  waste_heat_reused_kwh: 131400
  waste_heat_temperature_c: 31.5
  intake_air_setpoint_c: 24
  cooling_degree_days: 35
  renewable_guarantees_of_origin_kwh: 600000
  renewable_ppa_kwh: 50000
  renewable_on_site_kwh: 7000
  server_capacity: 185000
  storage_capacity_pb: 42
  incoming_bandwidth_gbps: 50
  outgoing_bandwidth_gbps: 50
"""


def test_energy_report_counts_meter_resets_and_names_what_is_missing(
    mixed_vm: VM, home: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    doc, path = report(home, "energy", "--year", "2025", "--site", str(site), "--vm", mixed_vm.url)
    kpis, ind = doc["kpis"], doc["indicators"]
    # one hour of the replaced meter's energy is unknowable (its last reading before the swap)
    assert kpis["it_energy_kwh"]["value"] == pytest.approx(IT_KW * 8760, rel=0.001)
    assert kpis["total_energy_kwh"]["value"] == pytest.approx(DC_KW * 8760, rel=1e-6)
    assert kpis["it_energy_kwh"]["source"] == "measured" and kpis["water_input_m3"]["source"] == "declared"
    assert kpis["backup_generator_energy_kwh"] == {
        "value": 412.0,
        "unit": "kWh",
        "source": "declared",
        "reference": "Delegated Regulation (EU) 2024/1364 Annex II, point 1(d)",
    }
    assert kpis["renewable_energy_kwh"]["value"] == 657000
    assert kpis["renewable_energy_kwh"]["source"].startswith("declared: sum of renewable_guarantees")
    assert kpis["intake_air_setpoint_c"]["value"] == 24 and kpis["intake_air_setpoint_c"]["unit"] == "°C"
    assert all(k["reference"] for k in kpis.values())
    assert doc["meters"]["it_energy"][0]["resets"] == 1
    assert ind["pue"]["value"] == pytest.approx(1.3, rel=0.002)
    assert ind["wue"]["value"] == pytest.approx(5000 * 1000 / (IT_KW * 8760), rel=0.002)
    assert ind["erf"]["value"] == pytest.approx(131400 / (DC_KW * 8760), rel=0.002)
    assert ind["ref"]["value"] == pytest.approx(657000 / (DC_KW * 8760), rel=0.002)
    assert {m["field"] for m in doc["missing"]} == {
        "total_floor_area_m2",
        "computer_room_floor_area_m2",
        "incoming_traffic_tb",
        "outgoing_traffic_tb",
        "data_stored_tb",
    }
    assert len(doc["operator"]["monthly"]) == 12
    gpu = {a["account"]: a["gpu_energy_kwh"] for a in doc["operator"]["gpu"]["gpu_energy_kwh_by_account"]}
    assert gpu["physics"] == pytest.approx(4.9, rel=0.02)
    # the PDF beside it: the year's indicators and both monthly plots, read back by poppler
    text = subprocess.run(
        ["pdftotext", "-layout", str(path.parent / "report.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Energy per month (kWh)" in text and "GPU energy per month (kWh)" in text and "2025-12" in text
    assert f"{ind['pue']['value']:,.3f}" in text and "total_floor_area_m2" in text
    # --strict: refused, nothing more stored
    before = sorted((home / "reports" / "objects").iterdir())
    res = vigil(
        home, "report", "energy", "--year", "2025", "--site", str(site), "--vm", mixed_vm.url, "--strict"
    )
    assert res.returncode == 1 and "--strict: mandatory fields missing: total_floor_area_m2" in res.stderr
    assert sorted((home / "reports" / "objects").iterdir()) == before
    # a meter that matches nothing is refused, not a zero
    site.write_text(SITE.replace("site_facility_energy_kwh_total", "no_such_meter_total"))
    res = vigil(home, "report", "energy", "--year", "2025", "--site", str(site), "--vm", mixed_vm.url)
    assert res.returncode == 1
    assert (
        res.stderr.strip()
        .splitlines()[-1]
        .startswith(f"FAIL: {site}: meters.total_energy[0]: no_such_meter_total")
    )


# --- monthly closings: the year survives retention ---------------------------------------------------------

#: where the store's retention cut the samples in the closing test: January to early October are gone
CUT = ts("2025-10-10T00:00:00")


def cut(lines: Iterator[dict[str, Any]], at: int) -> Iterator[dict[str, Any]]:
    """The lines' samples at or after ``at`` only: what a store with retention would still hold."""
    for line in lines:
        keep = [i for i, t in enumerate(line["timestamps"]) if t >= at * 1000]
        if keep:
            yield {
                "metric": line["metric"],
                "values": [line["values"][i] for i in keep],
                "timestamps": [line["timestamps"][i] for i in keep],
            }


def months_2025() -> list[str]:
    return [f"--month=2025-{m:02d}" for m in range(1, 13)]


def year_figures(doc: dict[str, Any]) -> dict[str, float]:
    out = {k: v["value"] for k, v in doc["kpis"].items() if v["source"] == "measured"}
    for row in doc["operator"]["monthly"]:
        for key, value in row.items():
            if key != "month":
                out[f"{row['month']} {key}"] = value
    for a in doc["operator"]["gpu"]["gpu_energy_kwh_by_account"]:
        out[f"gpu {a['account']}"] = a["gpu_energy_kwh"]
    return out


@pytest.fixture
def retention_vm(vm_binary: Path, tmp_path: Path) -> Iterator[VM]:
    vm = VM(vm_binary, tmp_path / "retention")
    try:
        vm.load(raw_lines())
        vm.load(meter_lines())
        yield vm
    finally:
        vm.stop()


def test_the_year_built_from_closings_after_retention_equals_the_year_from_samples(
    retention_vm: VM, home: Path, tmp_path: Path
) -> None:
    vm = retention_vm
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    res = vigil(home, "report", "close", "--site", str(site), "--vm", vm.url, *months_2025())
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("OK: closing 2025-") == 12
    closing = json.loads(Path(res.stdout.strip().splitlines()[-1]).read_bytes())
    assert closing["kind"] == "closing" and closing["period"]["label"] == "2025-12"
    assert closing["meters"]["total_energy"][0]["kwh"] == pytest.approx(DC_KW * 31 * 24, rel=1e-6)
    # a second appliance closed every month but February
    other = tmp_path / "home2"
    months = [m for m in months_2025() if m != "--month=2025-02"]
    assert vigil(other, "report", "close", "--site", str(site), "--vm", vm.url, *months).returncode == 0
    # the year from the samples, each month checked against its closing
    before, _ = report(home, "energy", "--year", "2025", "--site", str(site), "--vm", vm.url)
    assert [m["source"] for m in before["months"]["sources"]] == ["samples"] * 12
    assert {m["check"] for m in before["months"]["sources"]} == {"agrees"}
    assert before["months"]["missing"] == [] and before["months"]["differences"] == []

    # retention: every sample before CUT is gone (the series deleted and loaded again from CUT on)
    http(
        f"{vm.url}/api/v1/admin/tsdb/delete_series?match[]="
        + urllib.parse.quote('{__name__=~"site_.*|DCGM_.*|slurm_job_info"}'),
        data=b"",
        timeout=60,
    )
    vm.load(cut(raw_lines(), CUT))
    vm.load(cut(meter_lines(), CUT))
    after, path = report(home, "energy", "--year", "2025", "--site", str(site), "--vm", vm.url)
    sources = {m["month"]: m["source"] for m in after["months"]["sources"]}
    assert [sources[f"2025-{m:02d}"] for m in range(1, 11)] == ["closing"] * 10  # October: cut inside it
    assert sources["2025-11"] == sources["2025-12"] == "samples"
    figures_before, figures_after = year_figures(before), year_figures(after)
    assert figures_after.keys() == figures_before.keys()
    for key, value in figures_before.items():  # closings keep kWh to 1 Wh: 12 roundings at most
        assert figures_after[key] == pytest.approx(value, abs=0.02), key
    assert (
        subprocess.run(
            ["minisign", "-Vm", str(path), "-p", str(home / "reports/key/report.pub")],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )

    # a month without samples or a closing is named, and --strict fails on it
    doc, _ = report(other, "energy", "--year", "2025", "--site", str(site), "--vm", vm.url)
    assert doc["months"]["missing"] == ["2025-02"]
    assert doc["kpis"]["total_energy_kwh"]["value"] == pytest.approx(DC_KW * (8760 - 28 * 24), rel=1e-4)
    res = vigil(other, "report", "energy", "--year", "2025", "--site", str(site), "--vm", vm.url, "--strict")
    assert res.returncode == 1
    assert "months without samples or a closing: 2025-02" in res.stderr.strip().splitlines()[-1]


def test_closings_of_other_meters_are_not_used_and_a_tampered_one_is_refused(
    retention_vm: VM, home: Path, tmp_path: Path
) -> None:
    vm = retention_vm
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    res = vigil(home, "report", "close", "--site", str(site), "--vm", vm.url, "--month=2025-12")
    assert res.returncode == 0, res.stderr
    december = Path(res.stdout.strip().splitlines()[-1]).parent.name
    # a month not over yet is not closed
    res = vigil(home, "report", "close", "--site", str(site), "--vm", vm.url, "--month=2099-01")
    assert res.returncode == 1 and "--month 2099-01: is not over yet" in res.stderr
    # another site.yaml (other meters): the closing is not theirs
    other_site = tmp_path / "other.yaml"
    other_site.write_text(SITE.replace("unit: kWh", "unit: Wh"))
    doc, _ = report(home, "energy", "--year", "2025", "--site", str(other_site), "--vm", vm.url)
    assert december not in {m["closing"] for m in doc["months"]["sources"]}
    assert doc["months"]["differences"] == []
    # samples that disagree with the closing are listed (a second IT meter appeared in December)
    vm.load(
        cut(
            (
                {**line, "metric": {**line["metric"], "instance": "pdu2"}}
                for line in meter_lines()
                if line["metric"].get("circuit") == "it"
            ),
            ts("2025-12-01T00:00:00") - HOUR,
        )
    )
    doc, _ = report(home, "energy", "--year", "2025", "--site", str(site), "--vm", vm.url)
    assert [(d["month"], d["what"]) for d in doc["months"]["differences"]] == [
        ("2025-12", "meters.it_energy[0]")
    ]
    # a closing changed in the store: the report refuses it in one line naming the file
    entry = next(
        e
        for e in map(json.loads, (home / "reports/index.jsonl").read_text().splitlines())
        if e["kind"] == "closing"
    )
    stored = home / "reports/objects" / entry["sha256"] / "report.json"
    stored.chmod(0o644)
    stored.write_bytes(stored.read_bytes().replace(b'"resets":0', b'"resets":7', 1))
    res = vigil(home, "report", "energy", "--year", "2025", "--site", str(site), "--vm", vm.url)
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"FAIL: {stored}:") and "signature" in last
