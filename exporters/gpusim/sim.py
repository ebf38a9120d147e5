"""The simulated GPUs: state advanced at each scrape, energy integrated exactly.

Time model. Every scrape happens at a monotonic instant ``t``. The simulator

1. reads the job map dir (a file it listed but cannot read fails the scrape, as in dcgm-exporter:
   nothing below happens then, and the next scrape integrates the whole interval) and the fault
   state file again;
2. integrates the interval since the previous scrape with the state that held during it: energy
   (power x seconds, in mJ), ECC and NVLink error rates, NVLink traffic;
3. derives the state for the interval that starts now (allocated or idle, power with its noise
   drawn once for the interval, utilisation, memory, clocks, temperature, fault effects);
4. renders that state.

So power is piecewise constant between scrapes, each value shown is the one the next interval is
integrated with, and the energy a job's GPU used between two scrapes is exactly the sum of
``power_i * (t_{i+1} - t_i)`` over the powers shown in between — computable in tests with a fake
clock. The counters never go down while the simulator runs.

Energy since boot. ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` counts mJ since the driver loaded, so
a real GPU's first sample is large. The simulator starts each GPU's counter at
``idle power x uptime x k``, with the host's uptime (``/proc/uptime``, at least an hour) and ``k`` in
[1, 1.25) fixed per host name and GPU index (the work a GPU did before the simulator started).
Per-job energy joins and ``increase()`` then see what they see on a real node: a large first
sample, never a counter starting near 0 (which VictoriaMetrics' ``increase()`` would count whole
for a job's new series). A restart of the simulator starts again from that estimate.
"""

from __future__ import annotations

import hashlib
import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Callable

from vigil.exporters._expo import Family, render
from vigil.exporters._http import ScrapeError
from vigil.exporters.gpusim import faults as _faults
from vigil.exporters.gpusim.fields import (
    DRIVER_LABEL,
    FIELDS,
    HOST_LABEL,
    JOB_LABEL,
    NOT_ON_MIG,
    THROTTLE_GPU_IDLE,
    THROTTLE_HW_SLOWDOWN,
    THROTTLE_HW_THERMAL,
    THROTTLE_SW_THERMAL,
    UNKNOWN_XID,
    XID_MESSAGES,
)
from vigil.exporters.gpusim.jobmap import JobMapError, read_jobmap
from vigil.exporters.gpusim.mig import SLICES, MigInstance

log = logging.getLogger("vigil.exporters.gpusim")

DEFAULT_JOBMAP_DIR = "/run/vigil/jobmap"
_UUID_NS = uuid.UUID("6b1d7f5e-3c0a-4f39-9a54-2f0c1e7d9b10")

#: thermal fault: degrees per second of ramp, ceiling, and where throttling starts
THERMAL_RAMP_C_PER_S = 1.0
THERMAL_MAX_C = 97
THERMAL_THROTTLE_C = 85

#: the since-boot energy estimate: uptime at least this, or this when /proc/uptime is unreadable
MIN_UPTIME_S = 3600.0
FALLBACK_UPTIME_S = 86400.0

#: a MIG instance that several jobs share: its memory interface saturated, its engines waiting
CONTENDED_DRAM_ACTIVE = 0.92
CONTENDED_ENGINE_SHARE = 0.35

Labels = tuple[tuple[str, str], ...]


def host_uptime() -> float:
    """Seconds since the host booted (``/proc/uptime``), at least MIN_UPTIME_S."""
    try:
        with open("/proc/uptime") as f:
            return max(MIN_UPTIME_S, float(f.read().split()[0]))
    except (OSError, ValueError, IndexError):
        return FALLBACK_UPTIME_S


class SimConfig:
    """What the simulated node looks like. Keyword-only; every knob has a default."""

    def __init__(
        self,
        *,
        hostname: str | None = None,
        gpus: int = 4,
        model: str = "NVIDIA H100 80GB HBM3",
        driver_version: str = "550.90.07",
        fb_total_mib: int = 81559,
        fb_reserved_mib: int = 329,
        busy_power_w: float = 350.0,
        idle_power_w: float = 60.0,
        power_noise_w: float = 10.0,
        seed: int | None = None,
        jobmap_dir: str = DEFAULT_JOBMAP_DIR,
        faults_file: str = _faults.DEFAULT_STATE,
        mig: Mapping[int, Sequence[MigInstance]] | None = None,
        uptime_s: float | None = None,
    ) -> None:
        if gpus < 1:
            raise ValueError("gpus must be at least 1")
        if power_noise_w < 0 or busy_power_w < 0 or idle_power_w < 0:
            raise ValueError("powers and noise must not be negative")
        mig = dict(mig or {})
        for gpu in mig:
            if not 0 <= gpu < gpus:
                raise ValueError(f"--mig: GPU {gpu} does not exist (the simulator has GPUs 0..{gpus - 1})")
        if uptime_s is not None and uptime_s < 0:
            raise ValueError("uptime must not be negative")
        self.hostname = hostname or socket.gethostname()
        self.gpus = gpus
        self.model = model
        self.driver_version = driver_version
        self.fb_total_mib = fb_total_mib
        self.fb_reserved_mib = fb_reserved_mib
        self.busy_power_w = busy_power_w
        self.idle_power_w = idle_power_w
        self.power_noise_w = power_noise_w
        self.seed = seed
        self.jobmap_dir = jobmap_dir
        self.faults_file = faults_file
        self.mig: dict[int, list[MigInstance]] = {gpu: list(insts) for gpu, insts in mig.items() if insts}
        self.uptime_s = host_uptime() if uptime_s is None else uptime_s


def boot_energy_mj(cfg: SimConfig, index: int) -> float:
    """The since-boot energy a GPU's counter starts at: idle power x uptime x k(host, GPU)."""
    digest = hashlib.sha256(f"{cfg.hostname}/{index}".encode()).digest()
    k = 1.0 + 0.25 * int.from_bytes(digest[:4], "big") / 2**32
    return cfg.idle_power_w * cfg.uptime_s * 1000.0 * k


class _Instance:
    """One MIG GPU instance: its jobs and the values of its own series for the current interval."""

    def __init__(self, mig: MigInstance) -> None:
        self.mig = mig
        self.jobs: list[str] = []
        self.engine_active = 0.0
        self.dram_active = 0.0
        self.fb_used = 0


def ramped(rate: float, ramp: float, a: float, b: float) -> float:
    """Errors between A and B seconds after a storm's onset whose rate grows linearly from 0 to RATE
    over its first RAMP seconds and stays there: the integral of the rate, exact whatever the scrape
    interval."""

    def since_onset(u: float) -> float:
        u = max(u, 0.0)
        return rate * u * u / (2 * ramp) if u <= ramp else rate * (ramp / 2 + u - ramp)

    return since_onset(b) - since_onset(a)


class _Gpu:
    """One GPU's state: counters (integrated) and the values for the current interval."""

    def __init__(self, index: int, cfg: SimConfig) -> None:
        self.index = index
        self.uuid = "GPU-" + str(uuid.uuid5(_UUID_NS, f"{cfg.hostname}/{index}"))
        self.pci_bus_id = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        self.device = f"nvidia{index}"
        seed = f"{cfg.seed}/{cfg.hostname}/{index}" if cfg.seed is not None else None
        self.rng = random.Random(seed)  # noqa: S311 - simulated noise, not a secret
        self.instances = [_Instance(m) for m in cfg.mig.get(index, [])]
        # counters
        self.energy_mj = boot_energy_mj(cfg, index)
        self.sbe = 0.0
        self.dbe = 0
        self.retired_sbe = 0
        self.retired_dbe = 0
        self.retired_pending = 0
        self.uncorrectable_rows = 0
        self.correctable_rows = 0
        self.nvlink_crc_flit = 0.0
        self.nvlink_crc_data = 0.0
        self.nvlink_bw = 0.0
        self.pcie_replay = 0
        # the current interval
        self.allocated = False
        self.faults: dict[str, dict[str, float]] = {}
        self.onset: dict[str, float] = {}
        self.power_w = cfg.idle_power_w
        self.util = 0
        self.mem_util = 0
        self.fb_used = 0
        self.sm_clock = 345
        self.mem_clock = 2619
        self.temp = 34
        self.mem_temp = 32
        self.throttle = THROTTLE_GPU_IDLE
        self.xid = 0
        self.row_remap_failure = 0
        self.nvlink_bw_rate = 0.0

    def integrate(self, dt: float, t: float | None = None) -> None:
        """Step 2: the interval (T - DT, T] that just ended, with the state that held during it."""
        if dt <= 0:
            return
        self.energy_mj += self.power_w * dt * 1000.0
        storm = self.faults.get("ecc-sbe-storm")
        if storm:
            onset = self.onset.get("ecc-sbe-storm")
            if t is None or onset is None or storm.get("ramp", 0.0) <= 0:
                self.sbe += storm["rate"] * dt
            else:
                self.sbe += ramped(storm["rate"], storm["ramp"], t - dt - onset, t - onset)
        crc = self.faults.get("nvlink-crc")
        if crc:
            self.nvlink_crc_flit += crc["rate"] * dt
            self.nvlink_crc_data += crc["rate"] * dt / 4.0
        self.nvlink_bw += self.nvlink_bw_rate * dt

    def advance(
        self, t: float, jobmap: Mapping[str, list[str]], active: dict[str, dict[str, float]], cfg: SimConfig
    ) -> None:
        """Step 3: the state for the interval starting at T."""
        for kind in list(self.onset):
            if kind not in active:
                del self.onset[kind]
                if kind == "ecc-dbe":
                    self.row_remap_failure = 0
        for kind in active:
            if kind not in self.onset:
                self.onset[kind] = t
                if kind == "ecc-dbe":
                    self.dbe += 1
                    self.retired_dbe += 1
                    self.uncorrectable_rows += 1
                    self.row_remap_failure = 1
        self.faults = active
        # a whole GPU is allocated by its own file; a MIG GPU by its instances' files, in proportion
        # to the slices they take (its own file tags none of its series)
        if self.instances:
            for inst in self.instances:
                inst.jobs = jobmap.get(f"{self.index}.{inst.mig.gi}", [])
            share = sum(i.mig.slices for i in self.instances if i.jobs) / SLICES
        else:
            share = 1.0 if jobmap.get(str(self.index)) else 0.0
        self.allocated = share > 0
        stuck = "stuck-idle" in active
        busy = self.allocated and not stuck
        if busy:
            noise = self.rng.uniform(-cfg.power_noise_w, cfg.power_noise_w) if cfg.power_noise_w else 0.0
            self.power_w = cfg.idle_power_w + (cfg.busy_power_w + noise - cfg.idle_power_w) * share
            self.util = self.rng.randint(88, 100)
            self.mem_util = self.rng.randint(35, 55)
            self.sm_clock = 1980
            self.temp = 68
            self.mem_temp = 74
            self.throttle = 0
            self.nvlink_bw_rate = 2.0e6
        else:
            self.power_w = cfg.idle_power_w
            self.util = 0
            self.mem_util = 0
            self.sm_clock = 345
            self.temp = 34
            self.mem_temp = 32
            self.throttle = THROTTLE_GPU_IDLE
            self.nvlink_bw_rate = 0.0
        usable = cfg.fb_total_mib - cfg.fb_reserved_mib
        self.fb_used = int(usable * 0.62) if self.allocated else 0
        for inst in self.instances:
            self._advance_instance(inst, busy)
        if "fb-full" in active:
            self.fb_used = usable - 3
            for inst in self.instances:
                inst.fb_used = inst.mig.fb_mib - 3
        if "throttle" in active:
            self.throttle = (self.throttle & ~THROTTLE_GPU_IDLE) | THROTTLE_HW_SLOWDOWN
            self.sm_clock = self.sm_clock // 2
        if "thermal" in active:
            ramp = (t - self.onset["thermal"]) * THERMAL_RAMP_C_PER_S
            self.temp = int(min(THERMAL_MAX_C, self.temp + ramp))
            self.mem_temp = max(self.mem_temp, self.temp + 4)
            if self.temp >= THERMAL_THROTTLE_C:
                self.throttle = (
                    (self.throttle & ~THROTTLE_GPU_IDLE) | THROTTLE_SW_THERMAL | THROTTLE_HW_THERMAL
                )
                self.sm_clock = min(self.sm_clock, 1200)
        xid = active.get("xid")
        self.xid = int(xid["code"]) if xid else 0

    def _advance_instance(self, inst: _Instance, gpu_busy: bool) -> None:
        """A MIG instance's own values: its engines and memory interface, its share of memory.

        One job: engines 88-100 % busy, memory interface 35-55 %. Several jobs (compute instances
        of one GPU instance share its memory): the memory interface saturates and each job's
        engines wait for it — the case the GpuMigInstanceContention alert looks for.
        """
        inst.fb_used = int(inst.mig.fb_mib * 0.62) if inst.jobs else 0
        if not (gpu_busy and inst.jobs):
            inst.engine_active = inst.dram_active = 0.0
            return
        engines = self.rng.randint(88, 100) / 100.0
        memory = self.rng.randint(35, 55) / 100.0
        if len(inst.jobs) > 1:
            engines *= CONTENDED_ENGINE_SHARE
            memory = CONTENDED_DRAM_ACTIVE
        inst.engine_active, inst.dram_active = engines, memory


class GpuSimulator:
    """The node's simulated GPUs. ``scrape()`` advances them to now and returns the exposition text."""

    def __init__(
        self,
        cfg: SimConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        jobmap: Callable[[], Mapping[str, list[str]]] | None = None,
        faults: Callable[[], Mapping[str, dict[str, dict[str, float]]]] | None = None,
    ) -> None:
        """JOBMAP and FAULTS, when given, stand in for the job map dir and the fault state file (the
        fleet simulator's schedule); each is called once per scrape, as the files would be read."""
        self.cfg = cfg
        self._clock = clock
        self._read_jobmap = jobmap or (lambda: read_jobmap(cfg.jobmap_dir))
        self._read_faults = faults or (lambda: _faults.load(cfg.faults_file))
        self._lock = threading.Lock()
        self._gpus = [_Gpu(i, cfg) for i in range(cfg.gpus)]
        self._jobs: dict[str, list[str]] = {}
        self._last: float | None = None
        self.fault_errors = 0
        self.scrape_errors = 0

    @property
    def gpus(self) -> list[_Gpu]:
        return self._gpus

    def update(self) -> float:
        """Steps 1–3 at the clock's now; returns that instant. Raises JobMapError as a scrape would fail."""
        with self._lock:
            return self._update_locked()

    def _update_locked(self) -> float:
        t = self._clock()
        jobs = dict(self._read_jobmap())  # first: when it fails, no state has changed
        try:
            active = dict(self._read_faults())
        except (ValueError, OSError, _faults.FaultError):
            self.fault_errors += 1
            active = {str(g.index): g.faults for g in self._gpus}  # keep the last good state
        if self._last is not None:
            dt = t - self._last
            for g in self._gpus:
                g.integrate(dt, t)
        for g in self._gpus:
            g.advance(t, jobs, active.get(str(g.index), {}), self.cfg)
        self._jobs = jobs
        self._last = t
        return t

    def scrape(self) -> str:
        """Advance to now and render, as one consistent snapshot; ScrapeError (HTTP 500) where
        dcgm-exporter fails the scrape: a job map file it listed cannot be read."""
        with self._lock:
            try:
                self._update_locked()
            except JobMapError as e:
                self.scrape_errors += 1
                raise ScrapeError(str(e)) from e
            return render(self._families())

    def _rows(self) -> list[tuple[_Gpu, _Instance | None, Labels, list[str]]]:
        """Each entity a series is emitted for: a whole GPU, or each instance of a MIG GPU."""
        cfg = self.cfg
        rows: list[tuple[_Gpu, _Instance | None, Labels, list[str]]] = []
        for g in self._gpus:
            base: Labels = (
                ("gpu", str(g.index)),
                ("UUID", g.uuid),
                ("pci_bus_id", g.pci_bus_id),
                ("device", g.device),
                ("modelName", cfg.model),
            )
            tail: Labels = ((HOST_LABEL, cfg.hostname), (DRIVER_LABEL, cfg.driver_version))
            if not g.instances:
                rows.append((g, None, base + tail, self._jobs.get(str(g.index), [])))
                continue
            for inst in g.instances:
                mig: Labels = (("GPU_I_PROFILE", inst.mig.profile), ("GPU_I_ID", str(inst.mig.gi)))
                rows.append((g, inst, base + mig + tail, inst.jobs))
        return rows

    def _families(self) -> list[Family]:
        cfg = self.cfg
        usable = cfg.fb_total_mib - cfg.fb_reserved_mib

        def fb_total(g: _Gpu, i: _Instance | None) -> float:
            return i.mig.fb_mib if i else cfg.fb_total_mib

        def fb_free(g: _Gpu, i: _Instance | None) -> float:
            return i.mig.fb_mib - i.fb_used if i else usable - g.fb_used

        values: dict[str, Callable[[_Gpu, _Instance | None], float]] = {
            "DCGM_FI_DEV_SM_CLOCK": lambda g, i: g.sm_clock,
            "DCGM_FI_DEV_MEM_CLOCK": lambda g, i: g.mem_clock,
            "DCGM_FI_DEV_MEMORY_TEMP": lambda g, i: g.mem_temp,
            "DCGM_FI_DEV_GPU_TEMP": lambda g, i: g.temp,
            "DCGM_FI_DEV_POWER_USAGE": lambda g, i: g.power_w,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda g, i: int(g.energy_mj),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": lambda g, i: g.pcie_replay,
            "DCGM_FI_DEV_GPU_UTIL": lambda g, i: g.util,
            "DCGM_FI_DEV_MEM_COPY_UTIL": lambda g, i: g.mem_util,
            "DCGM_FI_DEV_XID_ERRORS": lambda g, i: g.xid,
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": lambda g, i: g.throttle,
            "DCGM_FI_DEV_FB_TOTAL": fb_total,
            "DCGM_FI_DEV_FB_FREE": fb_free,
            "DCGM_FI_DEV_FB_USED": lambda g, i: i.fb_used if i else g.fb_used,
            "DCGM_FI_DEV_FB_RESERVED": lambda g, i: 0 if i else cfg.fb_reserved_mib,
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": lambda g, i: int(g.sbe),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": lambda g, i: g.dbe,
            "DCGM_FI_DEV_RETIRED_SBE": lambda g, i: g.retired_sbe,
            "DCGM_FI_DEV_RETIRED_DBE": lambda g, i: g.retired_dbe,
            "DCGM_FI_DEV_RETIRED_PENDING": lambda g, i: g.retired_pending,
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": lambda g, i: int(g.nvlink_crc_flit),
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": lambda g, i: int(g.nvlink_crc_data),
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": lambda g, i: int(g.nvlink_bw),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": lambda g, i: g.uncorrectable_rows,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": lambda g, i: g.correctable_rows,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": lambda g, i: g.row_remap_failure,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": lambda g, i: i.engine_active if i else g.util / 100.0,
            "DCGM_FI_PROF_DRAM_ACTIVE": lambda g, i: i.dram_active if i else g.mem_util / 100.0,
        }
        rows = self._rows()
        out: list[Family] = []
        for f in FIELDS:
            fam = Family(f.name, f.type, f.help)
            get = values[f.name]
            for g, inst, labels, jobs in rows:
                if inst is not None and f.name in NOT_ON_MIG:
                    continue
                v = get(g, inst)
                text = f"{v:f}" if f.is_double else str(int(v))
                attrs: Labels = ()
                if f.name == "DCGM_FI_DEV_XID_ERRORS":
                    # dcgm-exporter's attributes of the XID series: the code in decimal and its text
                    attrs = (("err_code", str(int(v))), ("err_msg", XID_MESSAGES.get(int(v), UNKNOWN_XID)))
                if jobs:
                    for job in jobs:
                        fam.add_raw((*labels, *attrs, (JOB_LABEL, job)), text)
                else:
                    fam.add_raw((*labels, *attrs), text)
            out.append(fam)
        return out
