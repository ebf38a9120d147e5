"""The GPU simulator against what dcgm-exporter 4.8.2 does (internal/pkg/transformation/hpc.go,
rendermetrics, the GPU collector, pkg/cmd/app.go): a job map file that vanishes between listing and
reading fails the scrape (HTTP 500), an empty file labels nothing, MIG series carry GPU_I_PROFILE and
GPU_I_ID and take their job from ``<gpu>.<GPU instance id>``, XID series carry err_code and err_msg,
and the flags are the real ones.
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.exporters.expo_helpers import DCGM_LINT, parse_exposition, promtool_check
from vigil.exporters._http import ScrapeError, make_server
from vigil.exporters.gpusim import __main__ as cli
from vigil.exporters.gpusim import faults as faults_mod
from vigil.exporters.gpusim import jobmap as jobmap_mod
from vigil.exporters.gpusim.fields import NOT_ON_MIG
from vigil.exporters.gpusim.mig import MigInstance, parse_mig
from vigil.exporters.gpusim.sim import boot_energy_mj

LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName"]
TAIL = ["Hostname", "DCGM_FI_DRIVER_VERSION"]


def _series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return parse_exposition(text)[name]


def _serve(render) -> Iterator[str]:
    srv = make_server(("127.0.0.1", 0), render, title="t")
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    finally:
        srv.shutdown()
        srv.server_close()


def _get(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


# 1 the job map read as hpcMapper reads it


def _vanish_after_listing(monkeypatch: pytest.MonkeyPatch, victim: Path) -> None:
    """Remove VICTIM right after the reader has lstat'ed every entry (before it opens any)."""
    real = os.lstat
    names = sorted(os.listdir(victim.parent))

    def lstat(path, *a, **kw):  # type: ignore[no-untyped-def]
        st = real(path, *a, **kw)
        if os.path.basename(path) == names[-1] and victim.exists():
            victim.unlink()
        return st

    monkeypatch.setattr(jobmap_mod.os, "lstat", lstat)


def test_a_file_gone_between_listing_and_reading_fails_the_scrape(make_sim, tmp_path, clock, monkeypatch):
    jm = tmp_path / "jobmap"
    (jm / "0").write_text("41\n")
    (jm / "1").write_text("42\n")
    sim = make_sim()
    before = sim.scrape()
    with monkeypatch.context() as m:
        _vanish_after_listing(m, jm / "0")
        clock.advance(10)
        with pytest.raises(ScrapeError, match=rf"^job map file {jm}/0: No such file or directory$"):
            sim.scrape()
    assert sim.scrape_errors == 1
    # nothing advanced: the next scrape integrates the whole 20 s with the power shown before
    clock.advance(10)
    after = sim.scrape()
    e0 = {lbl["gpu"]: v for lbl, v in _series(before, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")}
    e1 = {lbl["gpu"]: v for lbl, v in _series(after, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")}
    assert e1["0"] - e0["0"] == 350 * 20 * 1000 and e1["2"] - e0["2"] == 60 * 20 * 1000
    assert [lbl.get("hpc_job") for lbl, _ in _series(after, "DCGM_FI_DEV_GPU_UTIL")] == [
        None,
        "42",
        None,
        None,
    ]


def test_the_failed_scrape_is_http_500_and_one_log_line(make_sim, tmp_path, monkeypatch, caplog):
    jm = tmp_path / "jobmap"
    (jm / "3").write_text("7\n")
    sim = make_sim()
    for url in _serve(sim.scrape):
        assert _get(url) == 200
        with monkeypatch.context() as m:
            _vanish_after_listing(m, jm / "3")
            assert _get(url) == 500
        assert _get(url) == 200
    failed = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in failed] == [
        f"scrape failed: job map file {jm}/3: No such file or directory"
    ]
    assert failed[0].exc_info is None  # one line, no traceback


def test_a_file_gone_before_its_stat_is_skipped_and_empty_files_label_nothing(
    make_sim, tmp_path, monkeypatch
):
    jm = tmp_path / "jobmap"
    (jm / "0").write_text("")  # emptied by an epilog
    (jm / "1").write_text("5\n")
    real = os.listdir
    monkeypatch.setattr(jobmap_mod.os, "listdir", lambda d: [*real(d), "2"])  # listed, gone by its stat
    text = make_sim().scrape()
    assert [lbl.get("hpc_job") for lbl, _ in _series(text, "DCGM_FI_DEV_POWER_USAGE")] == [
        None,
        "5",
        None,
        None,
    ]
    assert jobmap_mod.read_jobmap(str(jm)) == {"0": [], "1": ["5"]}


def test_unreadable_map_fails_missing_dir_does_not(tmp_path):
    jm = tmp_path / "jm"
    jm.mkdir()
    (jm / "0").mkdir()  # a dir under a GPU name: skipped
    (jm / "1").symlink_to(tmp_path)  # a link to a dir is no dir to lstat: opened, and that fails
    with pytest.raises(jobmap_mod.JobMapError, match=r"^job map file .*/1: Is a directory$"):
        jobmap_mod.read_jobmap(str(jm))
    (jm / "1").unlink()
    (jm / "1").write_text("9" * 70000 + "\n")  # Go's line scanner refuses a line this long
    with pytest.raises(jobmap_mod.JobMapError, match="a line of 64 KiB or more"):
        jobmap_mod.read_jobmap(str(jm))
    assert jobmap_mod.read_jobmap(str(tmp_path / "absent")) == {}


# 2 MIG

MIG = {2: parse_mig("2:3g.40gb,3g.40gb")[1], 3: parse_mig("3:1g.10gb,1g.10gb,2g.20gb@5")[1]}


def test_mig_specs() -> None:
    assert parse_mig("2:3g.40gb,3g.40gb") == (
        2,
        [MigInstance("3g.40gb", 1, 3, 40960), MigInstance("3g.40gb", 2, 3, 40960)],
    )
    assert [i.gi for i in parse_mig("0:7g.80gb")[1]] == [0]
    assert [i.gi for i in parse_mig("0:1g.10gb,1g.10gb,2g.20gb,1g.20gb+me")[1]] == [7, 8, 3, 9]
    assert [i.gi for i in parse_mig("1:1g.10gb@12,1g.10gb")[1]] == [12, 7]
    for bad, why in (
        ("2", "expected GPU:PROFILE"),
        ("x:1g.10gb", "expected GPU:PROFILE"),
        ("2:3g", "'3g' is not a MIG profile"),
        ("2:9g.90gb", "is not a MIG profile"),
        ("2:1g.10gb@7,1g.10gb@7", "GPU instance id 7 given twice"),
        ("2:1g.10gb@99", "GPU instance id '99' is not 0..14"),
        ("2:4g.40gb,4g.40gb", "no GPU instance id left for 4g.40gb"),
        ("2:4g.40gb,3g.40gb@2,1g.10gb", "more than the GPU's 7 slices"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_mig(bad)


def test_mig_series_labels_and_jobs_as_dcgm_exporter(make_sim, tmp_path):
    jm = tmp_path / "jobmap"
    (jm / "2.1").write_text("301\n")
    (jm / "2").write_text("399\n")  # a MIG GPU's own index tags none of its series
    (jm / "3.5").write_text("")
    text = make_sim(mig=MIG).scrape()
    promtool_check(text, allow=DCGM_LINT)
    temps = _series(text, "DCGM_FI_DEV_GPU_TEMP")
    assert [
        (lbl["gpu"], lbl.get("GPU_I_ID"), lbl.get("GPU_I_PROFILE"), lbl.get("hpc_job")) for lbl, _ in temps
    ] == [
        ("0", None, None, None),
        ("1", None, None, None),
        ("2", "1", "3g.40gb", "301"),
        ("2", "2", "3g.40gb", None),
        ("3", "7", "1g.10gb", None),
        ("3", "8", "1g.10gb", None),
        ("3", "5", "2g.20gb", None),
    ]
    assert list(temps[2][0]) == [*LABELS, "GPU_I_PROFILE", "GPU_I_ID", *TAIL, "hpc_job"]
    assert temps[2][0]["UUID"] == temps[3][0]["UUID"] == _series(text, "DCGM_FI_DEV_GPU_TEMP")[3][0]["UUID"]
    # NVML has no utilisation of a MIG-enabled GPU: DCGM leaves it blank, dcgm-exporter skips it
    for name in NOT_ON_MIG:
        assert [lbl["gpu"] for lbl, _ in _series(text, name)] == ["0", "1"], name
    # device values are the GPU's, on every instance; power follows the busy slices (3 of 7)
    power = {(lbl["gpu"], lbl.get("GPU_I_ID")): v for lbl, v in _series(text, "DCGM_FI_DEV_POWER_USAGE")}
    assert power[("2", "1")] == power[("2", "2")] == pytest.approx(60 + (350 - 60) * 3 / 7, abs=1e-6)
    assert power[("3", "7")] == 60
    fb = {(lbl["gpu"], lbl.get("GPU_I_ID")): v for lbl, v in _series(text, "DCGM_FI_DEV_FB_TOTAL")}
    assert fb[("2", "1")] == 40960 and fb[("0", None)] == 81559


def test_mig_contention_gives_what_the_alert_reads(make_sim, tmp_path):
    """GpuMigInstanceContention: DRAM_ACTIVE{GPU_I_ID!="",hpc_job!=""} > 0.8 on an instance with more
    than one job series, and GR_ENGINE_ACTIVE < 0.5 for the job; one job alone is not contended."""
    jm = tmp_path / "jobmap"
    (jm / "2.1").write_text("201\n202\n")
    (jm / "2.2").write_text("203\n")
    text = make_sim(mig=MIG).scrape()
    dram = {lbl["hpc_job"]: v for lbl, v in _series(text, "DCGM_FI_PROF_DRAM_ACTIVE") if "hpc_job" in lbl}
    gr = {lbl["hpc_job"]: v for lbl, v in _series(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE") if "hpc_job" in lbl}
    assert dram["201"] == dram["202"] > 0.8 and gr["201"] < 0.5 and gr["202"] < 0.5
    assert dram["203"] <= 0.55 and gr["203"] >= 0.88
    shared = [
        lbl for lbl, _ in _series(text, "DCGM_FI_PROF_DRAM_ACTIVE") if lbl.get("hpc_job") in {"201", "202"}
    ]
    assert {(lbl["gpu"], lbl["GPU_I_ID"], lbl["GPU_I_PROFILE"]) for lbl in shared} == {("2", "1", "3g.40gb")}


def test_mig_energy_is_the_gpus_on_every_instance(make_sim, tmp_path, clock):
    (tmp_path / "jobmap" / "3.7").write_text("9\n")
    sim = make_sim(mig=MIG)
    sim.scrape()
    clock.advance(7)
    e = [v for lbl, v in _series(sim.scrape(), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") if lbl["gpu"] == "3"]
    want = int(boot_energy_mj(sim.cfg, 3) + (60 + (350 - 60) * 1 / 7) * 7 * 1000)
    assert len(e) == 3 and all(abs(v - want) <= 1 for v in e)


# 3 XID attributes


@pytest.mark.parametrize(
    ("code", "msg"),
    [
        (0, "No Error"),
        (48, "Double Bit ECC Error"),
        (63, "ECC page retirement or row remapping recording event"),
        (64, "ECC page retirement or row remapper recording failure"),
        (79, "GPU has fallen off the bus"),
        (94, "Contained ECC error"),
        (95, "Uncontained ECC error"),
        (999, "Unknown Error"),
    ],
)
def test_xid_series_carry_err_code_and_err_msg(make_sim, tmp_path, code, msg):
    (tmp_path / "jobmap" / "1").write_text("5\n")
    if code:
        faults_mod.edit(str(tmp_path / "faults.json"), "xid", "1", clear=False, params={"code": code})
    text = make_sim(mig=MIG).scrape()
    promtool_check(text, allow=DCGM_LINT)
    xid = _series(text, "DCGM_FI_DEV_XID_ERRORS")
    g1 = [lbl for lbl, _ in xid if lbl["gpu"] == "1"]
    assert g1 == [{**g1[0], "err_code": str(code), "err_msg": msg, "hpc_job": "5"}]
    assert list(g1[0]) == [*LABELS, *TAIL, "err_code", "err_msg", "hpc_job"]  # attributes in name order
    assert all(lbl["err_code"] == "0" and lbl["err_msg"] == "No Error" for lbl, _ in xid if lbl["gpu"] != "1")
    assert list(next(lbl for lbl, _ in xid if lbl["gpu"] == "2")) == [
        *LABELS,
        "GPU_I_PROFILE",
        "GPU_I_ID",
        *TAIL,
        "err_code",
        "err_msg",
    ]
    # only the XID series have them
    assert all("err_code" not in lbl for lbl, _ in _series(text, "DCGM_FI_DEV_GPU_TEMP"))


# 4 the flags dcgm-exporter 4.8.2 has (pkg/cmd/app.go)


def test_flags_as_dcgm_exporter(monkeypatch, capsys):
    monkeypatch.delenv("DCGM_EXPORTER_LISTEN", raising=False)
    monkeypatch.delenv("DCGM_HPC_JOB_MAPPING_DIR", raising=False)
    a = cli.parser().parse_args(["-a", ":19400", "--hpc-job-mapping-dir", "/x"])
    assert (a.address, a.hpc_job_mapping_dir) == (":19400", "/x")
    with pytest.raises(SystemExit):  # dcgm-exporter has no short form of --hpc-job-mapping-dir
        cli.parser().parse_args(["-H", "/x"])
    assert "unrecognized arguments: -H /x" in capsys.readouterr().err
    monkeypatch.setenv("DCGM_EXPORTER_LISTEN", "127.0.0.1:9500")
    monkeypatch.setenv("DCGM_HPC_JOB_MAPPING_DIR", "/run/other")
    a = cli.parser().parse_args([])
    assert (a.address, a.hpc_job_mapping_dir) == ("127.0.0.1:9500", "/run/other")
    assert cli.parser().parse_args(["--mig", "2:3g.40gb", "--mig", "3:7g.80gb"]).mig == [
        "2:3g.40gb",
        "3:7g.80gb",
    ]


def test_bad_mig_flags_fail_with_one_line(capsys):
    assert cli.main(["--gpus", "2", "--mig", "2:3g.40gb"]) == 2
    assert capsys.readouterr().err == (
        "FAIL: vigil-gpusim: --mig: GPU 2 does not exist (the simulator has GPUs 0..1)\n"
    )
    assert cli.main(["--mig", "1:3g.40gb", "--mig", "1:1g.10gb"]) == 2
    assert capsys.readouterr().err == "FAIL: vigil-gpusim: --mig '1:1g.10gb': GPU 1 is given twice\n"
    assert cli.main(["--mig", "1:5g.50gb"]) == 2
    assert capsys.readouterr().err == (
        "FAIL: vigil-gpusim: --mig '1:5g.50gb': no GPU instance id left for 5g.50gb; give one with @ID\n"
    )
