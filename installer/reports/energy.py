"""The meters' energy over a period: each counter's increase, across resets, month by month."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vigil.installer.reports.counters import counter_increase
from vigil.installer.reports.errors import ReportError, ReportInputError
from vigil.installer.reports.period import Period, iso
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


def read_meter(
    vm: VictoriaMetrics,
    meter: Meter,
    period: Period,
    *,
    where: str,
    progress: Callable[[str], None] | None = None,
) -> MeterReading:
    """The meter's kWh in each month of ``period`` (every series the selector matches, summed).

    A selector VictoriaMetrics refuses, or one that matches no sample in the period, is refused
    naming ``where`` (``site.yaml: meters.it_energy[0]``): a meter without data is not a zero.
    """
    reading = MeterReading(meter)
    names: set[str] = set()
    for month in period.months():
        if progress is not None:
            progress(f"{where}: {month.label}")
        try:
            found = vm.export(meter.selector, month.start - LOOKBACK_S, month.end)
        except ReportError as exc:
            if "HTTP 4" in exc.reason:
                raise ReportInputError(f"{where}.selector", f"{vm.name} refused it: {exc.reason}") from None
            raise
        kwh = 0.0
        covered = 0.0
        for labels, samples in found:
            inc = counter_increase(samples, month.start, month.end)
            if inc.covered_s > 0:
                names.add(repr(sorted(labels.items())))
            kwh += inc.value * meter.kwh_per_unit
            reading.resets += inc.resets
            covered = max(covered, inc.covered_s)
        reading.covered_s += covered
        reading.monthly_kwh[month.label] = kwh
        del found  # one month's samples in memory at a time, not two while the next is read
    reading.series = len(names)
    if not names:
        raise ReportInputError(
            where,
            f"{meter.selector} has no samples in {vm.name} between {iso(period.start)} and {iso(period.end)}",
        )
    return reading
