"""Factories for the exporters' tests: a fake clock and a simulator on a tmp job map dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.exporters.expo_helpers import FakeClock
from vigil.exporters.gpusim import GpuSimulator, SimConfig


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_sim(tmp_path: Path, clock: FakeClock) -> Callable[..., GpuSimulator]:
    def make(**kw: object) -> GpuSimulator:
        kw.setdefault("hostname", "gpu01")
        kw.setdefault("jobmap_dir", str(tmp_path / "jobmap"))
        kw.setdefault("faults_file", str(tmp_path / "faults.json"))
        kw.setdefault("power_noise_w", 0.0)
        kw.setdefault("seed", 7)
        kw.setdefault("uptime_s", 86400.0)
        return GpuSimulator(SimConfig(**kw), clock=clock)  # type: ignore[arg-type]

    (tmp_path / "jobmap").mkdir()
    return make
