"""One incident, staged on the lab as it happens on a real cluster, and `vigil explain` on it.

A job of alice's (account physics) holds the 4 GPUs of gpu01. GPU 3 starts correcting single-bit
ECC errors, slowly and then faster (`vigil lab fault ecc-sbe-storm --ramp`); then it counts a
double-bit error with a row it cannot remap, and XID 48, and the job's program dies with it, as a
CUDA program does (`vigil lab fault xid --code 48 --kill-job`: the lab kills the job's program, the
batch script exits 137 and Slurm records the job FAILED). `vigil explain job N`, with Slurm's
accounting from ctl01's slurmdbd, must name GPU 3 on gpu01, alice and physics, the GPU-hours lost,
the single-bit errors rising before the failure, XID 48 and what it means, and the P0 and P1 alerts
that fired on the GPU; and nothing against the job's three healthy GPUs.

About six minutes of lab time, so it runs with the other long loops (`make test-soak`); the
alert module (tests/lab/test_alerts.py) covers the faults and `vigil explain` in `make test`.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.lab.labhttp import am_alerts, query, wait_for
from tests.lab.report_jobs import in_slurm
from tests.lab.test_alerts import _job, _vigil, stack  # noqa: F401 - the module's stack fixture
from tests.lab.test_usage_and_energy_reports import SACCT, sacct_records

pytestmark = [pytest.mark.lab, pytest.mark.soak]

NODE, GPU = "gpu01", "3"
#: the single-bit storm: 0 to 4 errors a second over 90 s (what GpuEccSingleBitRateHigh pages on,
#: 100 an hour, is crossed within seconds; the ramp is what `vigil explain` must see rising)
SBE_RATE, SBE_RAMP = 4.0, 90.0
#: the alerts the failure raises on the GPU, with their severities (roles/vmalert/files/rules)
FAILURE_ALERTS = {"GpuRowRemapFailure": "P0", "GpuEccDoubleBitError": "P1", "GpuXidHardwareError": "P1"}


@pytest.fixture(scope="module")
def incident(lab: Any, stack: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    job = _job(stack, "physics", "alice", 4, 1800, NODE)
    injected: list[tuple[str, ...]] = []
    try:
        sel = f'DCGM_FI_DEV_GPU_TEMP{{instance="{NODE}",gpu="{GPU}",hpc_job="{job}"}}'
        wait_for(f"GPU {GPU} of {NODE} tagged with job {job}", lambda: query(sel), 120)
        time.sleep(30)  # a stretch of the job with no error at all
        fault = ("ecc-sbe-storm", NODE, GPU)
        _vigil(stack, "lab", "fault", *fault, "--rate", str(SBE_RATE), "--ramp", str(SBE_RAMP))
        injected.append(fault)
        time.sleep(SBE_RAMP + 20)
        _vigil(stack, "lab", "fault", "ecc-dbe", NODE, GPU)
        injected.append(("ecc-dbe", NODE, GPU))
        out = json.loads(
            _vigil(stack, "lab", "fault", "xid", NODE, GPU, "--code", "48", "--kill-job", "--json")
        )
        injected.append(("xid", NODE, GPU))
        failed_at = time.monotonic()
        assert out["killed_jobs"] == [job], out
        wait_for(f"job {job} to end in Slurm", lambda: not in_slurm(lab.ssh, [job]), 60, every=2)
        ended_s = time.monotonic() - failed_at

        def fired() -> set[str]:
            return {
                a["labels"]["alertname"]
                for a in am_alerts()
                if a["labels"].get("instance") == NODE and a["labels"].get("gpu") == GPU
            }

        wait_for("the failure's alerts at Alertmanager", lambda: set(FAILURE_ALERTS) <= fired(), 240, every=5)
        alerts_s = time.monotonic() - failed_at
        today = datetime.now(UTC).strftime("%Y-%m-%dT00:00:00")
        sacct = tmp_path_factory.mktemp("sacct") / "sacct.txt"
        sacct.write_text(lab.ssh("ctl01", SACCT.format(start=today)).stdout)
        started = time.monotonic()
        doc = json.loads(_vigil(stack, "explain", "job", job, "--sacct", str(sacct), "--json"))
        explain_s = time.monotonic() - started
        keep = os.environ.get("VIGIL_INCIDENT_JSON")  # the explanation, kept for the README's picture
        if keep:
            Path(keep).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        text = _vigil(stack, "explain", "job", job, "--sacct", str(sacct))
        return {
            "job": job,
            "doc": doc,
            "text": text,
            "sacct": sacct_records(sacct.read_text()).get(job),
            "seconds": {"end": ended_s, "alerts": alerts_s, "explain": explain_s},
        }
    finally:
        for fault in injected:
            _vigil(stack, "lab", "fault", *fault, "--clear")
        lab.ssh("ctl01", f"scancel {job}", check=False)


def test_slurm_records_the_job_failed_by_the_gpu(incident: dict[str, Any]) -> None:
    record = incident["sacct"]
    assert record is not None, "the job is not in Slurm's accounting"
    assert record[7].startswith("FAILED"), record
    assert record[8] == NODE, record


def test_explain_names_the_gpu_the_team_the_hours_lost_and_the_alerts(
    incident: dict[str, Any], measured: Any
) -> None:
    doc = incident["doc"]
    assert (doc["user"], doc["account"], doc["nodes"]) == (["alice"], ["physics"], [NODE]), doc
    assert doc["slurm"]["state"] == "FAILED" and doc["failed"] is True, (doc["slurm"], doc["failed_because"])
    gpus = {g["gpu"]: g for g in doc["gpus"]}
    assert sorted(gpus) == ["0", "1", "2", "3"]
    # the GPU-hours lost are the job's: 4 GPUs from its first sample to its last
    assert doc["gpu_hours_lost"] == doc["device_hours"] > 0
    hours = sum(g["device_hours"] for g in doc["gpus"])
    assert doc["gpu_hours_lost"] == pytest.approx(hours, abs=0.001)
    g3 = gpus[GPU]
    assert g3["ecc_double_bit"] == 1 and g3["row_remap_failure"] is True, g3
    assert [x["code"] for x in g3["xids"]] == [48], g3["xids"]
    assert g3["xids"][0]["meaning"] and g3["xids"][0]["source"], g3["xids"]
    # the single-bit errors before the failure: counted, and rising (the ramp)
    assert g3["ecc_single_bit"] > SBE_RATE * SBE_RAMP / 4, g3
    assert g3["before"]["ecc_single_bit_growing"] is True, g3["before"]
    fired = {a["alert"]: a["severity"] for a in g3["alerts"]}
    assert FAILURE_ALERTS.items() <= fired.items(), g3["alerts"]
    verdict = g3["verdict"]
    for said in (
        "GPU 3 on gpu01: ",
        "1 uncorrectable (double-bit) ECC error",
        "XID 48 at ",
        "single-bit ECC errors rising since",
    ):
        assert said in verdict, verdict
    assert g3["runbook"].startswith("GPU 3 on gpu01: drain gpu01 "), g3["runbook"]
    assert g3["runbook"].endswith(": docs/runbooks/GpuRowRemapFailure.md"), g3["runbook"]
    # the healthy GPUs: nothing said against them
    for g in ("0", "1", "2"):
        assert gpus[g]["verdict"] is None and gpus[g]["ecc_double_bit"] == 0 and not gpus[g]["xids"], gpus[g]
    assert doc["verdicts"] == [verdict]
    # the text the console shows (the same lines): the verdict and the hours lost
    assert f"VERDICT: {verdict}" in incident["text"], incident["text"]
    assert "lost" in incident["text"], incident["text"]
    measured("lab incident: XID 48 to the job ended in Slurm", incident["seconds"]["end"])
    measured("lab incident: XID 48 to its alerts at Alertmanager", incident["seconds"]["alerts"])
    measured("lab incident: vigil explain job (the CLI's whole run)", incident["seconds"]["explain"])
