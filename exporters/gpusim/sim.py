"""The simulated GPUs: state advanced at each scrape, energy integrated exactly.

Time model. Every scrape happens at a monotonic instant ``t``. The simulator

1. integrates the interval since the previous scrape with the state that held during it: energy
   (power x seconds, in mJ), ECC and NVLink error rates, NVLink traffic;
2. reads the job map dir and the fault state file again;
3. derives the state for the interval that starts now (allocated or idle, power with its noise
   drawn once for the interval, utilisation, memory, clocks, temperature, fault effects);
4. renders that state.

So power is piecewise constant between scrapes, each value shown is the one the next interval is
integrated with, and the energy a job's GPU used between two scrapes is exactly the sum of
``power_i * (t_{i+1} - t_i)`` over the powers shown in between — computable in tests with a fake
clock. The counters never go down while the simulator runs (a restart starts them at 0 again, as a
driver reload does).
"""

from __future__ import annotations

import random
import socket
import threading
import time
import uuid
from typing import Callable

from vigil.exporters._expo import Family, render
from vigil.exporters.gpusim import faults as _faults
from vigil.exporters.gpusim.fields import (
    DRIVER_LABEL,
    FIELDS,
    JOB_LABEL,
    THROTTLE_GPU_IDLE,
    THROTTLE_HW_SLOWDOWN,
    THROTTLE_HW_THERMAL,
    THROTTLE_SW_THERMAL,
)
from vigil.exporters.gpusim.jobmap import read_jobmap

DEFAULT_JOBMAP_DIR = "/run/vigil/jobmap"
_UUID_NS = uuid.UUID("6b1d7f5e-3c0a-4f39-9a54-2f0c1e7d9b10")

#: thermal fault: degrees per second of ramp, ceiling, and where throttling starts
THERMAL_RAMP_C_PER_S = 1.0
THERMAL_MAX_C = 97
THERMAL_THROTTLE_C = 85


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
    ) -> None:
        if gpus < 1:
            raise ValueError("gpus must be at least 1")
        if power_noise_w < 0 or busy_power_w < 0 or idle_power_w < 0:
            raise ValueError("powers and noise must not be negative")
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


class _Gpu:
    """One GPU's state: counters (integrated) and the values for the current interval."""

    def __init__(self, index: int, cfg: SimConfig) -> None:
        self.index = index
        self.uuid = "GPU-" + str(uuid.uuid5(_UUID_NS, f"{cfg.hostname}/{index}"))
        self.pci_bus_id = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        self.device = f"nvidia{index}"
        seed = f"{cfg.seed}/{cfg.hostname}/{index}" if cfg.seed is not None else None
        self.rng = random.Random(seed)  # noqa: S311 - simulated noise, not a secret
        # counters
        self.energy_mj = 0.0
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

    def integrate(self, dt: float) -> None:
        """Step 1: the interval that just ended, with the state that held during it."""
        if dt <= 0:
            return
        self.energy_mj += self.power_w * dt * 1000.0
        storm = self.faults.get("ecc-sbe-storm")
        if storm:
            self.sbe += storm["rate"] * dt
        crc = self.faults.get("nvlink-crc")
        if crc:
            self.nvlink_crc_flit += crc["rate"] * dt
            self.nvlink_crc_data += crc["rate"] * dt / 4.0
        self.nvlink_bw += self.nvlink_bw_rate * dt

    def advance(
        self, t: float, jobs: list[str], mig_busy: bool, active: dict[str, dict[str, float]], cfg: SimConfig
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
        self.allocated = bool(jobs) or mig_busy
        stuck = "stuck-idle" in active
        busy = self.allocated and not stuck
        if busy:
            noise = self.rng.uniform(-cfg.power_noise_w, cfg.power_noise_w) if cfg.power_noise_w else 0.0
            self.power_w = cfg.busy_power_w + noise
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
        if "fb-full" in active:
            self.fb_used = usable - 3
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


class GpuSimulator:
    """The node's simulated GPUs. ``scrape()`` advances them to now and returns the exposition text."""

    def __init__(self, cfg: SimConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._clock = clock
        self._lock = threading.Lock()
        self._gpus = [_Gpu(i, cfg) for i in range(cfg.gpus)]
        self._jobs: dict[str, list[str]] = {}
        self._last: float | None = None
        self.fault_errors = 0

    @property
    def gpus(self) -> list[_Gpu]:
        return self._gpus

    def update(self) -> float:
        """Steps 1–3 at the clock's now; returns that instant."""
        with self._lock:
            return self._update_locked()

    def _update_locked(self) -> float:
        t = self._clock()
        if self._last is not None:
            dt = t - self._last
            for g in self._gpus:
                g.integrate(dt)
        jobs = read_jobmap(self.cfg.jobmap_dir)
        try:
            active = _faults.load(self.cfg.faults_file)
        except (ValueError, OSError, _faults.FaultError):
            self.fault_errors += 1
            active = {str(g.index): g.faults for g in self._gpus}  # keep the last good state
        for g in self._gpus:
            key = str(g.index)
            mig_busy = any(k.startswith(key + ".") and v for k, v in jobs.items())
            g.advance(t, jobs.get(key, []), mig_busy, active.get(key, {}), self.cfg)
        self._jobs = jobs
        self._last = t
        return t

    def scrape(self) -> str:
        """Advance to now and render, as one consistent snapshot."""
        with self._lock:
            self._update_locked()
            return render(self._families())

    def _families(self) -> list[Family]:
        cfg = self.cfg
        per_gpu: list[tuple[_Gpu, list[tuple[tuple[str, str], ...]]]] = []
        for g in self._gpus:
            base = (
                ("gpu", str(g.index)),
                ("UUID", g.uuid),
                ("pci_bus_id", g.pci_bus_id),
                ("device", g.device),
                ("modelName", cfg.model),
                ("Hostname", cfg.hostname),
                (DRIVER_LABEL, cfg.driver_version),
            )
            lines = self._jobs.get(str(g.index), [])
            label_sets: list[tuple[tuple[str, str], ...]] = (
                [(*base, (JOB_LABEL, job)) for job in lines] if lines else [base]
            )
            per_gpu.append((g, label_sets))
        usable = cfg.fb_total_mib - cfg.fb_reserved_mib
        values: dict[str, Callable[[_Gpu], float]] = {
            "DCGM_FI_DEV_SM_CLOCK": lambda g: g.sm_clock,
            "DCGM_FI_DEV_MEM_CLOCK": lambda g: g.mem_clock,
            "DCGM_FI_DEV_MEMORY_TEMP": lambda g: g.mem_temp,
            "DCGM_FI_DEV_GPU_TEMP": lambda g: g.temp,
            "DCGM_FI_DEV_POWER_USAGE": lambda g: g.power_w,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda g: int(g.energy_mj),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": lambda g: g.pcie_replay,
            "DCGM_FI_DEV_GPU_UTIL": lambda g: g.util,
            "DCGM_FI_DEV_MEM_COPY_UTIL": lambda g: g.mem_util,
            "DCGM_FI_DEV_XID_ERRORS": lambda g: g.xid,
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": lambda g: g.throttle,
            "DCGM_FI_DEV_FB_TOTAL": lambda g: cfg.fb_total_mib,
            "DCGM_FI_DEV_FB_FREE": lambda g: usable - g.fb_used,
            "DCGM_FI_DEV_FB_USED": lambda g: g.fb_used,
            "DCGM_FI_DEV_FB_RESERVED": lambda g: cfg.fb_reserved_mib,
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": lambda g: int(g.sbe),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": lambda g: g.dbe,
            "DCGM_FI_DEV_RETIRED_SBE": lambda g: g.retired_sbe,
            "DCGM_FI_DEV_RETIRED_DBE": lambda g: g.retired_dbe,
            "DCGM_FI_DEV_RETIRED_PENDING": lambda g: g.retired_pending,
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": lambda g: int(g.nvlink_crc_flit),
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": lambda g: int(g.nvlink_crc_data),
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": lambda g: int(g.nvlink_bw),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": lambda g: g.uncorrectable_rows,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": lambda g: g.correctable_rows,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": lambda g: g.row_remap_failure,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": lambda g: g.util / 100.0,
        }
        out: list[Family] = []
        for f in FIELDS:
            fam = Family(f.name, f.type, f.help)
            get = values[f.name]
            for g, label_sets in per_gpu:
                v = get(g)
                text = f"{v:f}" if f.is_double else str(int(v))
                for labels in label_sets:
                    fam.add_raw(labels, text)
            out.append(fam)
        return out
