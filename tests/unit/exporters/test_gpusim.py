"""The GPU simulator: dcgm-exporter's names, types, labels, job map semantics, energy, faults."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.unit.exporters.expo_helpers import DCGM_LINT, FakeClock, parse_exposition, promtool_check
from vigil.exporters._http import make_server
from vigil.exporters.gpusim import faults as faults_mod
from vigil.exporters.gpusim.fields import FIELDS
from vigil.exporters.gpusim.jobmap import read_jobmap
from vigil.exporters.gpusim.sim import MIN_UPTIME_S, SimConfig, boot_energy_mj

#: names and types as dcgm-exporter's counters CSV declares them (etc/default-counters.csv, 4.x)
DCGM_TYPES = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
    "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "counter",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "counter",
    "DCGM_FI_DEV_RETIRED_SBE": "counter",
    "DCGM_FI_DEV_RETIRED_DBE": "counter",
    "DCGM_FI_DEV_RETIRED_PENDING": "counter",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "counter",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",
}


def _series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return parse_exposition(text)[name]


def _by_gpu(text: str, name: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for labels, v in _series(text, name):
        out.setdefault(labels["gpu"], []).append((labels, v))
    return out


def _write(jobmap: Path, name: str, text: str) -> None:
    (jobmap / name).write_text(text)


def test_names_types_labels_as_dcgm_exporter(make_sim, clock):
    text = make_sim().scrape()
    promtool_check(text, allow=DCGM_LINT)
    fams = parse_exposition(text)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    for name, typ in DCGM_TYPES.items():
        assert types.get(name) == typ, name
        assert len(fams[name]) == 4
    labels, _ = fams["DCGM_FI_DEV_GPU_TEMP"][0]
    assert list(labels) == [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
    ]
    assert labels["device"] == "nvidia0" and labels["Hostname"] == "gpu01"
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", labels["UUID"])
    # dcgm prints doubles with %f and integers with %d
    assert re.search(r"^DCGM_FI_DEV_POWER_USAGE\{.*\} 60\.000000$", text, re.MULTILINE)
    assert re.search(r'^DCGM_FI_DEV_GPU_TEMP\{gpu="0",.*\} 34$', text, re.MULTILINE)


def test_uuids_deterministic_per_host(make_sim, tmp_path):
    a = [g.uuid for g in make_sim().gpus]
    b = [g.uuid for g in make_sim().gpus]
    c = [g.uuid for g in make_sim(hostname="gpu02").gpus]
    assert a == b and len(set(a)) == 4 and not set(a) & set(c)


def test_job_map_shared_gpu_gives_a_series_per_job(make_sim, tmp_path):
    jm = tmp_path / "jobmap"
    _write(jm, "0", "101\n102\n")
    _write(jm, "1", "103")  # no final newline: still one job
    text = make_sim().scrape()
    promtool_check(text, allow=DCGM_LINT)
    by_gpu = _by_gpu(text, "DCGM_FI_DEV_POWER_USAGE")
    assert sorted(lbl["hpc_job"] for lbl, _ in by_gpu["0"]) == ["101", "102"]
    assert [lbl["hpc_job"] for lbl, _ in by_gpu["1"]] == ["103"]
    assert [("hpc_job" in lbl) for lbl, _ in by_gpu["2"]] == [False]
    assert list(by_gpu["0"][0][0])[-1] == "hpc_job"  # after every other label, as dcgm-exporter
    # every family carries the job, not just one
    for name in DCGM_TYPES:
        assert len(_by_gpu(text, name)["0"]) == 2, name


def test_job_map_files_appear_and_disappear_between_scrapes(make_sim, tmp_path, clock):
    jm = tmp_path / "jobmap"
    sim = make_sim()
    assert all("hpc_job" not in lbl for lbl, _ in _series(sim.scrape(), "DCGM_FI_DEV_GPU_UTIL"))
    _write(jm, "2", "555\n")
    clock.advance(1)
    jobs = [lbl.get("hpc_job") for lbl, _ in _series(sim.scrape(), "DCGM_FI_DEV_GPU_UTIL")]
    assert jobs == [None, None, "555", None]
    (jm / "2").unlink()
    clock.advance(1)
    assert all("hpc_job" not in lbl for lbl, _ in _series(sim.scrape(), "DCGM_FI_DEV_GPU_UTIL"))
    jm.rmdir()  # a missing dir is "no jobs", not an error
    clock.advance(1)
    assert len(_series(sim.scrape(), "DCGM_FI_DEV_GPU_UTIL")) == 4


def test_job_map_names_and_lines_as_dcgm_exporter(tmp_path):
    jm = tmp_path / "jm"
    jm.mkdir()
    (jm / "0").write_text("7\r\n8\n")
    (jm / "1.2").write_text("9\n")  # MIG instance 2 of GPU 1
    (jm / "3").write_text("")  # empty: no jobs
    (jm / "notes").write_text("x\n")  # not a GPU name: ignored
    (jm / "0.tmp").write_text("x\n")
    (jm / "5").mkdir()  # a directory: ignored
    assert read_jobmap(str(jm)) == {"0": ["7", "8"], "1.2": ["9"], "3": []}
    assert read_jobmap(str(tmp_path / "absent")) == {}


def test_mig_file_on_a_whole_gpu_changes_nothing(make_sim, tmp_path):
    _write(tmp_path / "jobmap", "1.0", "77\n")  # GPU 1 is not in MIG mode: no instance 1.0 to tag
    text = make_sim().scrape()
    g1 = _by_gpu(text, "DCGM_FI_DEV_POWER_USAGE")["1"]
    assert len(g1) == 1 and "hpc_job" not in g1[0][0] and g1[0][1] == 60.0


def test_energy_starts_at_a_since_boot_value(make_sim, clock):
    """DCGM's counter is mJ since the driver loaded: a large first sample, fixed per host and GPU."""
    sim = make_sim(idle_power_w=60.0, uptime_s=86400.0)
    first = {g: v for g, [(_, v)] in _by_gpu(sim.scrape(), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").items()}
    assert first == {str(g.index): int(boot_energy_mj(sim.cfg, g.index)) for g in sim.gpus}
    # idle power x uptime, and up to a quarter more for the work done before
    assert all(60 * 86400 * 1000 <= v < 1.25 * 60 * 86400 * 1000 for v in first.values())
    assert len(set(first.values())) == 4  # not one value for every GPU
    again = make_sim(idle_power_w=60.0, uptime_s=86400.0).scrape()
    assert _series(again, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == _series(
        sim.scrape(), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    )
    other = make_sim(hostname="gpu02", idle_power_w=60.0, uptime_s=86400.0).scrape()
    assert {v for _, v in _series(other, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")}.isdisjoint(first.values())
    # VictoriaMetrics' increase() takes a new series' first sample as its base only when it is at
    # least 10x the next delta: a job series' first sample here is far beyond a busy interval's
    busy_15s_mj = 360 * 15 * 1000
    assert min(first.values()) > 10 * (busy_15s_mj + 1)
    # the uptime comes from the host when not given, at least an hour
    assert SimConfig(hostname="h").uptime_s >= MIN_UPTIME_S


def test_energy_integrates_power_exactly(make_sim, tmp_path, clock):
    jm = tmp_path / "jobmap"
    sim = make_sim(busy_power_w=350.0, idle_power_w=60.0)
    boot = {g.index: int(boot_energy_mj(sim.cfg, g.index)) for g in sim.gpus}

    def energy(gpu: str) -> float:
        return _by_gpu(sim.scrape(), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[gpu][0][1] - boot[int(gpu)]

    assert energy("0") == 0
    clock.advance(10.0)  # idle: 60 W
    _write(jm, "0", "42\n")
    assert energy("0") == 600_000  # mJ
    clock.advance(7.25)  # allocated: 350 W
    (jm / "0").write_text("")  # emptied by the epilog: no job
    assert energy("0") == 600_000 + 350 * 7.25 * 1000
    clock.advance(2.5)
    assert energy("0") == 600_000 + 2_537_500 + 150_000
    assert abs(energy("1") - 60 * 19.75 * 1000) <= 1


def test_energy_with_noise_is_the_sum_of_shown_powers(make_sim, tmp_path, clock):
    _write(tmp_path / "jobmap", "3", "1\n")
    sim = make_sim(power_noise_w=25.0, seed=3)
    expected = boot_energy_mj(sim.cfg, 3)
    powers = set()
    for dt in (1.0, 2.5, 0.75, 4.0, 3.3):
        text = sim.scrape()
        p = _by_gpu(text, "DCGM_FI_DEV_POWER_USAGE")["3"][0][1]
        e = _by_gpu(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")["3"][0][1]
        assert abs(e - int(expected)) <= 1  # mJ resolution, counter printed as an integer
        assert 325.0 <= p <= 375.0
        powers.add(p)
        expected += round(p, 6) * dt * 1000
        clock.advance(dt)
    assert len(powers) > 1
    # seeded: the same run again gives the same powers
    sim2 = make_sim(power_noise_w=25.0, seed=3)
    assert _by_gpu(sim2.scrape(), "DCGM_FI_DEV_POWER_USAGE")["3"][0][1] in powers


def _fault(tmp_path: Path, kind: str, gpu: str, clear: bool = False, **params: float) -> None:
    faults_mod.edit(str(tmp_path / "faults.json"), kind, gpu, clear=clear, params=params or None)


def _val(text: str, name: str, gpu: str) -> float:
    return _by_gpu(text, name)[gpu][0][1]


def test_fault_ecc_dbe_and_clear(make_sim, tmp_path, clock):
    sim = make_sim()
    sim.scrape()
    _fault(tmp_path, "ecc-dbe", "1")
    clock.advance(1)
    t = sim.scrape()
    assert (
        _val(t, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1"),
        _val(t, "DCGM_FI_DEV_RETIRED_DBE", "1"),
        _val(t, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "1"),
    ) == (1, 1, 1)
    assert _val(t, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0") == 0
    clock.advance(5)
    assert _val(sim.scrape(), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1") == 1  # once, not per scrape
    _fault(tmp_path, "ecc-dbe", "1", clear=True)
    clock.advance(1)
    t = sim.scrape()
    assert _val(t, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "1") == 0
    assert _val(t, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1") == 1  # counters never go down


def test_fault_rates_sbe_storm_and_nvlink_crc(make_sim, tmp_path, clock):
    sim = make_sim()
    _fault(tmp_path, "ecc-sbe-storm", "2", rate=100)
    _fault(tmp_path, "nvlink-crc", "0")
    sim.scrape()
    clock.advance(3)
    t = sim.scrape()
    assert _val(t, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "2") == 300
    assert _val(t, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "0") == 60
    assert _val(t, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "0") == 0


def test_a_ramped_sbe_storm_grows_to_its_rate_exactly_whatever_the_scrapes(make_sim, tmp_path, clock):
    """--ramp 60 --rate 10: 10 t^2 / 120 errors t s after the onset for t <= 60 (300 at 60 s), then
    10 more a second; the count is the integral of the rate, the same at any scrape interval."""
    sim = make_sim()
    _fault(tmp_path, "ecc-sbe-storm", "3", rate=10, ramp=60)
    sim.scrape()  # the onset
    seen = []
    for step in (7, 13, 10, 30, 20):  # uneven scrapes: at 7, 20, 30, 60 and 80 s
        clock.advance(step)
        seen.append(_val(sim.scrape(), "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "3"))
    expect = [int(10 * t * t / 120) for t in (7, 20, 30, 60)] + [300 + 10 * 20]
    assert seen == expect
    assert seen[1] - seen[0] < seen[3] - seen[2]  # the rate rose: the trend `vigil explain` reads
    assert _val(sim.scrape(), "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "0") == 0


def test_ramped_integrates_the_clamped_rate() -> None:
    from vigil.exporters.gpusim.sim import ramped

    assert ramped(10, 60, 0, 60) == pytest.approx(300)
    assert ramped(10, 60, 60, 70) == pytest.approx(100)
    assert ramped(10, 60, 50, 70) == pytest.approx(ramped(10, 60, 50, 60) + 100)
    assert ramped(10, 60, -5, 0) == 0  # before the onset nothing


def test_fault_xid_thermal_throttle_fb_full(make_sim, tmp_path, clock):
    sim = make_sim()
    _fault(tmp_path, "xid", "0", code=48)
    _fault(tmp_path, "thermal", "1")
    _fault(tmp_path, "throttle", "2")
    _fault(tmp_path, "fb-full", "3")
    t = sim.scrape()
    assert _val(t, "DCGM_FI_DEV_XID_ERRORS", "0") == 48
    assert _val(t, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "2") == 0x8
    assert _val(t, "DCGM_FI_DEV_FB_FREE", "3") < 5
    temps = []
    for _ in range(4):
        clock.advance(20)
        temps.append(_val(sim.scrape(), "DCGM_FI_DEV_GPU_TEMP", "1"))
    assert temps == sorted(temps) and temps[-1] == 97
    assert int(_val(sim.scrape(), "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "1")) & 0x40
    _fault(tmp_path, "xid", "0", clear=True)
    _fault(tmp_path, "thermal", "1", clear=True)
    clock.advance(1)
    t = sim.scrape()
    assert _val(t, "DCGM_FI_DEV_XID_ERRORS", "0") == 0 and _val(t, "DCGM_FI_DEV_GPU_TEMP", "1") == 34


def test_fault_stuck_idle_allocated_but_idle(make_sim, tmp_path, clock):
    _write(tmp_path / "jobmap", "0", "9\n")
    _write(tmp_path / "jobmap", "1", "9\n")
    _fault(tmp_path, "stuck-idle", "0")
    t = make_sim().scrape()
    g0 = _by_gpu(t, "DCGM_FI_DEV_GPU_UTIL")["0"][0]
    assert g0 == (g0[0], 0.0) and g0[0]["hpc_job"] == "9"
    assert _val(t, "DCGM_FI_DEV_POWER_USAGE", "0") == 60 and _val(t, "DCGM_FI_DEV_POWER_USAGE", "1") == 350
    assert _val(t, "DCGM_FI_DEV_GPU_UTIL", "1") >= 88


def test_fault_file_errors(tmp_path, make_sim, clock):
    path = tmp_path / "faults.json"
    with pytest.raises(faults_mod.FaultError, match="unknown fault 'melt'"):
        faults_mod.edit(str(path), "melt", "0", clear=False)
    with pytest.raises(faults_mod.FaultError, match="takes no parameter 'rate'"):
        faults_mod.edit(str(path), "xid", "0", clear=False, params={"rate": 1})
    assert not path.exists()  # nothing written after a refusal
    _fault(tmp_path, "xid", "0")
    sim = make_sim()
    assert _val(sim.scrape(), "DCGM_FI_DEV_XID_ERRORS", "0") == 79
    path.write_text("{garbage")  # a torn or foreign file keeps the last good state
    clock.advance(1)
    assert _val(sim.scrape(), "DCGM_FI_DEV_XID_ERRORS", "0") == 79 and sim.fault_errors == 1
    assert faults_mod.main(["set", "xid", "x1", "--state", str(tmp_path / "f2.json")]) == 1


def test_fault_editor_runs_as_a_script_on_stdin(tmp_path):
    """`vigil lab fault` feeds faults.py to `python3 -` on the host: it must need nothing else."""
    import subprocess
    import sys

    src = Path(faults_mod.__file__).read_text()
    state = tmp_path / "f.json"
    cp = subprocess.run(
        [sys.executable, "-I", "-", "set", "thermal", "2", "--state", str(state)],
        input=src,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert cp.returncode == 0, cp.stderr
    assert json.loads(state.read_text())["gpus"] == {"2": {"thermal": {}}}


def test_http_server_serves_metrics(make_sim):
    sim = make_sim()
    server = make_server(("127.0.0.1", 0), sim.scrape, title="t")
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = r.read().decode()
        assert "DCGM_FI_DEV_GPU_TEMP" in body
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=5)
    finally:
        server.shutdown()
        server.server_close()


def test_every_field_is_rendered(make_sim):
    names = set(parse_exposition(make_sim().scrape()))
    assert names == {f.name for f in FIELDS}


def test_fake_clock_is_the_only_time_source(make_sim, clock: FakeClock):
    sim = make_sim()
    a = sim.scrape()
    b = sim.scrape()  # no time passed: identical snapshot
    assert a == b
