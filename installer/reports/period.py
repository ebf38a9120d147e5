"""Report periods: a month ``YYYY-MM``, a quarter ``YYYY-Qn``, a year ``YYYY``, or ``--from/--to`` days.

Every period is a half-open interval ``[start, end)`` in UTC whose ends fall on whole hours (whole
days, in fact), so that it is tiled exactly by the hourly recording-rule samples: the sample at
``t`` covers ``(t - 1h, t]``, and the period's samples are those at ``start + 1h … end``. A period
that has not ended yet ends at :func:`in_progress_end` instead (the last whole minute that
VictoriaMetrics has surely seen), and says so (``complete: false``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from vigil.installer.reports.errors import ReportInputError

HOUR = 3600
#: how far behind "now" an in-progress period ends: VictoriaMetrics shows a sample to queries only
#: after its -search.latencyOffset (30 s by default)
LATENCY_S = 60
MIN_YEAR, MAX_YEAR = 1970, 9999

_MONTH = re.compile(r"(\d{4})-(\d{2})")
_QUARTER = re.compile(r"(\d{4})-[Qq]([1-4])")
_YEAR = re.compile(r"(\d{4})")
_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


@dataclass(frozen=True)
class Period:
    """``[start, end)`` in UTC seconds since the epoch; ``label`` as the operator wrote it."""

    label: str
    start: int
    end: int
    #: False when the period has not ended yet and ``end`` was moved back to just before now
    complete: bool = True

    @property
    def hours(self) -> int:
        """Whole hours in the period (an in-progress period's partial last hour is not counted)."""
        return (self.end - self.start) // HOUR

    @property
    def whole_hours_end(self) -> int:
        return self.start + self.hours * HOUR

    def to_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "start": iso(self.start),
            "end": iso(self.end),
            "timezone": "UTC",
            "complete": self.complete,
        }

    def months(self) -> list[Period]:
        """The calendar months (or parts of them) the period covers, in order."""
        out: list[Period] = []
        t = self.start
        while t < self.end:
            d = datetime.fromtimestamp(t, UTC)
            nxt = _first_of_month(d.year + (d.month == 12), d.month % 12 + 1)
            end = min(nxt, self.end)
            out.append(Period(f"{d.year:04d}-{d.month:02d}", t, end, self.complete or end < self.end))
            t = end
        return out


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _first_of_month(year: int, month: int) -> int:
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp())


def _year(text: str, where: str) -> int:
    year = int(text)
    if not MIN_YEAR <= year <= MAX_YEAR - 1:
        raise ReportInputError(where, f"year {year} is out of range ({MIN_YEAR}-{MAX_YEAR - 1})")
    return year


def parse_period(text: str) -> Period:
    """``2026-10``, ``2026-Q4`` or ``2026``; anything else is refused with the forms that are accepted."""
    where = f"--period {text}"
    if m := _MONTH.fullmatch(text):
        year, month = _year(m[1], where), int(m[2])
        if not 1 <= month <= 12:
            raise ReportInputError(where, f"month {m[2]} is not 01-12")
        end = _first_of_month(year + (month == 12), month % 12 + 1)
        return Period(f"{year:04d}-{month:02d}", _first_of_month(year, month), end)
    if m := _QUARTER.fullmatch(text):
        year, q = _year(m[1], where), int(m[2])
        first = 3 * (q - 1) + 1
        end = _first_of_month(year + (q == 4), (first + 2) % 12 + 1)
        return Period(f"{year:04d}-Q{q}", _first_of_month(year, first), end)
    if m := _YEAR.fullmatch(text):
        year = _year(m[1], where)
        return Period(f"{year:04d}", _first_of_month(year, 1), _first_of_month(year + 1, 1))
    raise ReportInputError(where, "not a period: give YYYY-MM, YYYY-Qn or YYYY (or --from/--to YYYY-MM-DD)")


def _day(text: str, where: str) -> date:
    m = _DAY.fullmatch(text)
    if not m:
        raise ReportInputError(where, "not a date: give YYYY-MM-DD")
    _year(m[1], where)
    try:
        return date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError as exc:
        raise ReportInputError(where, f"not a date: {exc}") from None


def parse_range(first: str, last: str) -> Period:
    """``--from FIRST --to LAST``: whole days, both included (``--to 2026-10-31`` ends at 11-01 00:00 UTC)."""
    a = _day(first, f"--from {first}")
    b = _day(last, f"--to {last}")
    if b < a:
        raise ReportInputError(f"--to {last}", f"is before --from {first}")
    start = int(datetime(a.year, a.month, a.day, tzinfo=UTC).timestamp())
    end = int(datetime(b.year, b.month, b.day, tzinfo=UTC).timestamp() + timedelta(days=1).total_seconds())
    return Period(f"{a.isoformat()}..{b.isoformat()}", start, end)


def year_period(year: int | str) -> Period:
    return parse_period(f"{int(year):04d}") if str(year).isdigit() else parse_period(str(year))


def in_progress_end(now: float) -> int:
    """The end of a period that has not ended by ``now``: the last whole minute at least
    :data:`LATENCY_S` before now."""
    return int((now - LATENCY_S) // 60 * 60)


def clip_to_now(period: Period, now: float) -> Period:
    """The period itself when it has ended by ``now``; else up to :func:`in_progress_end`. A period
    that has not begun is refused."""
    if period.end <= now - LATENCY_S:
        return period
    end = in_progress_end(now)
    if end <= period.start:
        raise ReportInputError(f"period {period.label}", f"has not begun yet (it starts {iso(period.start)})")
    return Period(period.label, period.start, end, complete=False)


def hour_runs(hours: list[int], flags: list[str]) -> list[tuple[str, int, int]]:
    """Consecutive hours with the same flag, as ``(flag, start, end)``; ``hours`` are hour-end times."""
    runs: list[tuple[str, int, int]] = []
    for t, flag in zip(hours, flags, strict=True):
        if runs and runs[-1][0] == flag and runs[-1][2] == t - HOUR:
            runs[-1] = (flag, runs[-1][1], t)
        else:
            runs.append((flag, t - HOUR, t))
    return runs


def chunks(start: int, end: int, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into pieces of at most ``size`` seconds."""
    out = []
    while start < end:
        out.append((start, min(end, start + size)))
        start = out[-1][1]
    return out
