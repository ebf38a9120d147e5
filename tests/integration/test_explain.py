"""`vigil explain job` against a real VictoriaMetrics (the debian bundle's) holding a known incident.

The 02:42 question, as the course this project grew from asks it: job 4242 (alice, physics) runs on
GPUs 0-3 of gpu01 from 02:10 on 2026-11-20; GPU 3's single-bit ECC errors start rising at 02:32 and
grow each minute, then at 02:42:10 it counts a double-bit error and reports XID 48, and the job's
series end 20 s later. GPU 1 is slowed by a hardware slowdown for ten minutes; GPU 0 is healthy.
Two days before, job 4100 (bob, chemistry) on GPU 3 saw XID 13 (its own program's fault), which the
GPU kept as its last XID. vmalert's ALERTS series say GpuEccDoubleBitError and GpuXidHardwareError
fired on GPU 3. The samples come every 15 s, as dcgm-exporter's would, through /api/v1/import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run_vigil, vigil_env
from tests.integration.test_reports import VM
from vigil.installer.reports import VictoriaMetrics
from vigil.installer.reports.explain import ExplainError, explain_gpu, explain_job

pytestmark = pytest.mark.integration


STEP = 15


def ts(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


START, FAULT, END = ts("2026-11-20T02:10:00"), ts("2026-11-20T02:42:10"), ts("2026-11-20T02:42:30")
RISE = ts("2026-11-20T02:31:00")
EARLIER = (ts("2026-11-18T10:00:00"), ts("2026-11-18T11:00:00"))
EARLIER_XID = ts("2026-11-18T10:30:00")
THROTTLED = (ts("2026-11-20T02:20:00"), ts("2026-11-20T02:30:00"))
NOW = ts("2026-11-20T04:00:00")
#: the hostile account of job 4100, as a Slurm user may type it where associations are not enforced
HOSTILE = "chem\x1b[2J\u202eistry"


def sbe(t: int) -> float:
    """GPU 3's single-bit counter: 0 until 02:32, then growing by 4 more each minute."""
    if t < RISE:
        return 0.0
    m = (t - RISE) // 60
    return float(m * (m + 1) // 2 * 4)


def gpu_lines() -> Iterator[dict[str, Any]]:
    """Every GPU of gpu01 from 2026-11-12 to 02:45 on the 20th, each sample in the series of the job
    on it then (no hpc_job between jobs)."""
    spans = [  # (from, to, job or "")
        (ts("2026-11-12T00:00:00"), EARLIER[0], ""),
        (EARLIER[0], EARLIER[1], "4100"),
        (EARLIER[1], START, ""),
        (START, END + 1, "4242"),
    ]
    for gpu in range(4):
        base = {
            "instance": "gpu01",
            "job": "dcgm_exporter",
            "gpu": str(gpu),
            "UUID": f"GPU-0000000{gpu}",
            "modelName": "NVIDIA H100 80GB HBM3",
        }
        for lo, hi, job in spans:
            if job == "4100" and gpu != 3:
                job = ""
            step = STEP if job else 300  # idle hours at 5 min: the test stays small
            times = list(range(lo, hi, step))
            labels = {**base, **({"hpc_job": job} if job else {})}

            def series(
                name: str, values: list[float], labels: dict[str, str] = labels, times: list[int] = times
            ) -> dict[str, Any]:
                return {
                    "metric": {"__name__": name, **labels},
                    "values": values,
                    "timestamps": [t * 1000 for t in times],
                }

            yield series("DCGM_FI_DEV_GPU_TEMP", [83.0 if gpu == 3 and t >= FAULT else 65.0 for t in times])
            yield series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", [1e9 + (t - lo) * 300_000.0 for t in times])
            yield series("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", [sbe(t) if gpu == 3 else 0.0 for t in times])
            yield series(
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", [1.0 if gpu == 3 and t >= FAULT else 0.0 for t in times]
            )
            xid = [
                48.0 if gpu == 3 and t >= FAULT else 13.0 if gpu == 3 and t >= EARLIER_XID else 0.0
                for t in times
            ]
            yield series("DCGM_FI_DEV_XID_ERRORS", xid)
            throttle = [8.0 if gpu == 1 and THROTTLED[0] <= t < THROTTLED[1] else 0.0 for t in times]
            yield series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", throttle)
            yield series("DCGM_FI_DEV_ROW_REMAP_FAILURE", [0.0 for _ in times])


def other_lines() -> Iterator[dict[str, Any]]:
    for job, user, account, (lo, hi) in (
        ("4242", "alice", "physics", (START, END + 1)),
        ("4100", "bob", HOSTILE, EARLIER),
    ):
        times = list(range(lo, hi, STEP))
        yield {
            "metric": {
                "__name__": "slurm_job_info",
                "instance": "gpu01",
                "job": "node_exporter",
                "hpc_job": job,
                "user": user,
                "account": account,
                "partition": "gpu",
                "node": "gpu01",
            },
            "values": [1.0] * len(times),
            "timestamps": [t * 1000 for t in times],
        }
    for alert, severity in (("GpuEccDoubleBitError", "P1"), ("GpuXidHardwareError", "P1")):
        times = list(range(FAULT + 40, FAULT + 1800, 10))
        yield {
            "metric": {
                "__name__": "ALERTS",
                "alertname": alert,
                "alertstate": "firing",
                "severity": severity,
                "instance": "gpu01",
                "gpu": "3",
                "UUID": "GPU-00000003",
            },
            "values": [1.0] * len(times),
            "timestamps": [t * 1000 for t in times],
        }


@pytest.fixture(scope="module")
def vm(components: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    server = VM(
        components / "victoria-metrics" / "bin" / "victoria-metrics", tmp_path_factory.mktemp("vm") / "x"
    )
    try:
        server.load(gpu_lines())
        server.load(other_lines())
        yield VictoriaMetrics(server.url)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def doc(vm: VictoriaMetrics) -> dict[str, Any]:
    return explain_job(vm, "4242", now=NOW)


def test_the_job_its_team_its_gpus_and_the_gpu_hours_lost(doc: dict[str, Any]) -> None:
    assert (doc["user"], doc["account"], doc["partition"], doc["nodes"]) == (
        ["alice"],
        ["physics"],
        ["gpu"],
        ["gpu01"],
    )
    assert [g["gpu"] for g in doc["gpus"]] == ["0", "1", "2", "3"]
    assert {g["model"] for g in doc["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert (doc["first_sample"], doc["last_sample"]) == ("2026-11-20T02:10:00Z", "2026-11-20T02:42:30Z")
    # 4 GPUs from 02:10:00 to 02:42:30: 4 x 32.5 min. A fault is dated by the first 15 s point that
    # shows it (02:42:15 for 02:42:10)
    assert doc["device_hours"] == pytest.approx(4 * 32.5 / 60, abs=1e-3)
    assert doc["failed"] is True and doc["gpu_hours_lost"] == doc["device_hours"]
    assert doc["failed_because"] == "its GPUs' series ended 15 s after the first GPU fault on them"
    # 300 W each for 32.5 min, 4 GPUs
    assert doc["gpu_energy_kwh"] == pytest.approx(4 * 0.3 * 32.5 / 60, rel=0.01)


def test_the_failed_gpu_during_the_job_and_before_it(doc: dict[str, Any]) -> None:
    g3 = doc["gpus"][3]
    assert g3["ecc_double_bit"] == 1 and g3["ecc_double_bit_first"] == "2026-11-20T02:42:15Z"
    assert [(x["code"], x["at"], x["kind"]) for x in g3["xids"]] == [(48, "2026-11-20T02:42:15Z", "hardware")]
    assert g3["xids"][0]["source"].startswith("https://docs.nvidia.com/")
    assert g3["ecc_single_bit"] == sbe(END) and g3["peak_temperature_c"] == 83
    assert [(a["alert"], a["severity"]) for a in g3["alerts"]] == [
        ("GpuEccDoubleBitError", "P1"),
        ("GpuXidHardwareError", "P1"),
    ]
    before = g3["before"]
    assert before["ecc_single_bit"] == 0 and before["ecc_single_bit_by_day"] == [0] * 7
    assert before["ecc_single_bit_since"] == "2026-11-20T02:32:00Z" and before["ecc_single_bit_growing"]
    assert [(x["code"], x["kind"]) for x in before["xids"]] == [(13, "program")]
    assert before["earlier_jobs_hit_by_gpu_errors"] == ["4100"]
    verdict = next(v for v in doc["verdicts"] if v.startswith("GPU 3 on gpu01"))
    for said in (
        "1 uncorrectable (double-bit) ECC error",
        "XID 48 at 2026-11-20 02:42:15 UTC",
        "single-bit ECC errors rising since 2026-11-20 02:32:00 UTC",
        "1 earlier job hit by GPU errors",
    ):
        assert said in verdict, verdict
    assert any(
        r.startswith("GPU 3 on gpu01: drain gpu01") and "nvidia-smi -r -i 3" in r for r in doc["runbooks"]
    )
    assert any(r.startswith("GPU 1 on gpu01: check gpu01") for r in doc["runbooks"]), doc["runbooks"]


def test_a_throttled_gpu_and_a_healthy_one(doc: dict[str, Any]) -> None:
    g0, g1 = doc["gpus"][0], doc["gpus"][1]
    assert g1["throttle_reasons"] == ["hardware slowdown"]
    assert any(v.startswith("GPU 1 on gpu01: clocks cut by hardware slowdown") for v in doc["verdicts"])
    assert (g0["verdict"], g0["xids"], g0["ecc_double_bit"], g0["throttle_reasons"]) == (None, [], 0, [])
    # GPU 0 kept no XID from before: no earlier job, no XID
    assert g0["before"]["earlier_jobs_hit_by_gpu_errors"] == [] and g0["before"]["xids"] == []


def test_a_job_the_store_never_saw_and_a_bad_id_are_refused(vm: VictoriaMetrics) -> None:
    with pytest.raises(ExplainError, match="job 9999: no GPU sample carries it in the last 30 days"):
        explain_job(vm, "9999", now=NOW)
    for bad in ('4242"} or vector(1) #', "", "x" * 65, "42\n42"):
        with pytest.raises(ExplainError, match="not a Slurm job id"):
            explain_job(vm, bad, now=NOW)


def test_the_cli_shows_a_hostile_account_as_text(vm: VictoriaMetrics, tmp_path: Path) -> None:
    """Job 4100's account holds an escape sequence and a bidi override: the CLI prints them escaped."""
    env = vigil_env(tmp_path / "home")
    args = ("explain", "job", "4100", "--vm", vm.url, "--days", "400")
    res = run_vigil(*args, env=env, timeout=120)
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout
    assert "account chem\\x1b[2J\\u202eistry" in res.stdout, res.stdout
    assert json.loads(run_vigil(*args, "--json", env=env, timeout=120).stdout)["account"] == [HOSTILE]


def test_a_gpus_history_its_jobs_errors_alerts_and_verdict(vm: VictoriaMetrics) -> None:
    """`vigil explain gpu gpu01:3` over the 8 days before the incident's end: jobs 4100 and 4242 with
    their teams, XID 13 then 48, the double-bit error, the single-bit rise, the two alerts."""
    doc = explain_gpu(vm, "gpu01:3", now=END + 600, days=8)
    assert [(j["job"], j["user"], j["account"]) for j in doc["jobs"]] == [
        ("4242", "alice", "physics"),
        ("4100", "bob", HOSTILE),
    ]
    (g,) = doc["entities"]
    assert [x["code"] for x in g["xids"]] == [13, 48]
    assert g["ecc_double_bit"] == 1 and g["ecc_single_bit"] == sbe(END)
    assert {a["alert"] for a in g["alerts"]} == {"GpuEccDoubleBitError", "GpuXidHardwareError"}
    assert g["before"]["earlier_jobs_hit_by_gpu_errors"] == ["4100", "4242"]
    (verdict,) = doc["verdicts"]
    assert verdict.startswith("GPU 3 on gpu01: 1 uncorrectable (double-bit) ECC error"), verdict
    assert (
        f"({int(sbe(END))} in the last 8 days)" in verdict
        and "2 jobs hit by GPU errors on it in the last 8 days" in verdict
    )
    healthy = explain_gpu(vm, "gpu01:0", now=END + 600, days=8)
    assert healthy["verdicts"] == [] and [j["job"] for j in healthy["jobs"]] == ["4242"]
    with pytest.raises(ExplainError, match="no sample of it in the last 8 days"):
        explain_gpu(vm, "gpu01:7", now=END + 600, days=8)
    for bad in ("gpu01", 'gpu01:3"} or vector(1)', ":3", "gpu01:"):
        with pytest.raises(ExplainError):
            explain_gpu(vm, bad, now=END + 600)


# --- the failure scraped after the job: its program died before the next scrape ---------------------

#: job 5151 (carol, physics) on GPUs 0-1 of gpu02 from 05:00 to 05:20:00 (its last sample). GPU 1's
#: uncorrectable error killed its program at 05:20:05: the epilog removed the job map, so the scrape
#: at 05:20:15 that first shows the double-bit error, the row it could not remap and XID 48 carries no
#: job. Job 5152 takes GPU 1 at 05:21:00, and its own program's XID 13 at 05:22 is not 5151's.
J0, J1 = ts("2026-11-21T05:00:00"), ts("2026-11-21T05:20:00")
NEXT = ts("2026-11-21T05:21:00")
NEXT_XID = ts("2026-11-21T05:22:00")


def after_lines() -> Iterator[dict[str, Any]]:
    for gpu in (0, 1):
        base = {"instance": "gpu02", "job": "dcgm_exporter", "gpu": str(gpu), "UUID": f"GPU-1000000{gpu}"}
        spans = [(J0, J1 + 1, "5151"), (J1 + 15, NEXT, ""), (NEXT, NEXT + 1800, "5152" if gpu == 1 else "")]
        for lo, hi, job in spans:
            times = list(range(lo, hi, STEP))
            labels = {**base, **({"hpc_job": job} if job else {})}
            failed = gpu == 1 and lo > J1
            xid = [13.0 if gpu == 1 and t >= NEXT_XID else 48.0 if failed else 0.0 for t in times]
            for name, values in (
                ("DCGM_FI_DEV_GPU_TEMP", [60.0] * len(times)),
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", [1.0 if failed else 0.0] * len(times)),
                ("DCGM_FI_DEV_ROW_REMAP_FAILURE", [1.0 if failed else 0.0] * len(times)),
                ("DCGM_FI_DEV_XID_ERRORS", xid),
            ):
                yield {
                    "metric": {"__name__": name, **labels},
                    "values": values,
                    "timestamps": [t * 1000 for t in times],
                }
    times = list(range(J0, J1 + 1, STEP))
    yield {
        "metric": {
            "__name__": "slurm_job_info",
            "instance": "gpu02",
            "hpc_job": "5151",
            "user": "carol",
            "account": "physics",
            "partition": "gpu",
            "node": "gpu02",
        },
        "values": [1.0] * len(times),
        "timestamps": [t * 1000 for t in times],
    }


def test_the_failure_that_ended_the_job_is_the_jobs_though_scraped_after_it(
    components: Path, tmp_path: Path
) -> None:
    """The scrape that shows a GPU failure often comes after the job it killed, on series without the
    job: those count for 5 minutes after the job's last sample (AFTER_END_S), or until another job
    takes the GPU. Seen on the lab's staged incident: without it, `vigil explain` found the job
    failed but none of the errors that failed it."""
    server = VM(components / "victoria-metrics" / "bin" / "victoria-metrics", tmp_path / "after")
    try:
        server.load(after_lines())
        doc = explain_job(VictoriaMetrics(server.url), "5151", now=NEXT + 3600)
    finally:
        server.stop()
    g0, g1 = doc["gpus"]
    assert (g1["ecc_double_bit"], g1["row_remap_failure"]) == (1, True), g1
    assert [(x["code"], x["at"]) for x in g1["xids"]] == [(48, "2026-11-21T05:20:15Z")], g1["xids"]
    assert g1["ecc_double_bit_first"] == "2026-11-21T05:20:15Z"
    assert (g0["ecc_double_bit"], g0["row_remap_failure"], g0["xids"], g0["verdict"]) == (0, False, [], None)
    assert doc["failed"] is True, doc["failed_because"]
    assert doc["verdicts"] == [g1["verdict"]] and "XID 48 at 2026-11-21 05:20:15 UTC" in g1["verdict"]
