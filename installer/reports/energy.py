"""The meters' energy over a period: each counter's increase, across resets, month by month."""

from __future__ import annotations

from dataclasses import dataclass, field

from vigil.installer.reports.counters import counter_increase
from vigil.installer.reports.errors import ReportError, ReportInputError
from vigil.installer.reports.period import Period
from vigil.installer.reports.site import Meter
from vigil.installer.reports.vm import VictoriaMetrics

#: how far before a month the sample that a boundary is interpolated from is looked for
LOOKBACK_S = 24 * 3600


@dataclass
class MeterReading:
    meter: Meter
    #: kWh per month label, in order
    monthly_kwh: dict[str, float] = field(default_factory=dict)
    series: int = 0
    resets: int = 0
    #: seconds of the period between two samples of the meter's best-covered series
    covered_s: float = 0.0

    @property
    def kwh(self) -> float:
        return sum(self.monthly_kwh.values())


@dataclass
class MeterMonth:
    """One meter over one month, read from its samples (or taken from a meter closing)."""

    kwh: float = 0.0
    resets: int = 0
    covered_s: float = 0.0
    series: int = 0


def read_meter_month(vm: VictoriaMetrics, meter: Meter, month: Period, *, where: str) -> MeterMonth:
    """The meter's kWh over ``month`` from its samples (every series the selector matches, summed);
    a month without samples gives zero coverage, never an error. A selector VictoriaMetrics refuses
    is refused naming ``where`` (``site.yaml: meters.it_energy[0]``)."""
    try:
        found = vm.export(meter.selector, month.start - LOOKBACK_S, month.end)
    except ReportError as exc:
        if "HTTP 4" in exc.reason:
            raise ReportInputError(f"{where}.selector", f"{vm.name} refused it: {exc.reason}") from None
        raise
    out = MeterMonth()
    for _labels, samples in found:
        inc = counter_increase(samples, month.start, month.end)
        if inc.covered_s > 0:
            out.series += 1
        out.kwh += inc.value * meter.kwh_per_unit
        out.resets += inc.resets
        out.covered_s = max(out.covered_s, inc.covered_s)
    return out
