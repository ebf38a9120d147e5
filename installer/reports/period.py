"""Report periods: a month ``YYYY-MM``, a quarter ``YYYY-Qn``, a year ``YYYY``, or ``--from/--to`` days.

Every period is a half-open interval ``[start, end)`` of seconds since the epoch whose ends fall on
whole UTC hours, so that it is tiled exactly by the hourly recording-rule samples: the sample at
``t`` covers ``(t - 1h, t]``, and the period's samples are those at ``start + 1h … end``. A period
that has not ended yet ends at :func:`in_progress_end` instead (the last whole minute that
VictoriaMetrics has surely seen), and says so (``complete: false``).

Months, quarters, years and days begin at midnight in the site's time zone (UTC unless one is
named): ``2026-10`` in Europe/Berlin is ``[2026-09-30T22:00Z, 2026-10-31T23:00Z)``, 745 hours, as
the clocks went back on the 25th. A zone whose midnight is not a whole UTC hour (Asia/Kolkata,
+05:30) is refused for the dates it would cut: the hourly series cannot be split there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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
#: an IANA zone name as the tz database spells them (Europe/Berlin, America/Argentina/Buenos_Aires)
_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]{0,31}(/[A-Za-z0-9_+-]{1,32}){0,2}")


@dataclass(frozen=True)
class Period:
    """``[start, end)`` in UTC seconds since the epoch; ``label`` as the operator wrote it."""

    label: str
    start: int
    end: int
    #: False when the period has not ended yet and ``end`` was moved back to just before now
    complete: bool = True
    #: the IANA time zone whose midnights bound the period and its months
    timezone: str = "UTC"

    @property
    def hours(self) -> int:
        """Whole hours in the period (an in-progress period's partial last hour is not counted)."""
        return (self.end - self.start) // HOUR

    @property
    def whole_hours_end(self) -> int:
        return self.start + self.hours * HOUR

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "label": self.label,
            "start": iso(self.start),
            "end": iso(self.end),
            "timezone": self.timezone,
            "complete": self.complete,
        }
        if self.timezone != "UTC":  # the same instants as the site's clocks showed them
            zone = zone_info(self.timezone)
            doc["start_local"] = datetime.fromtimestamp(self.start, zone).isoformat()
            doc["end_local"] = datetime.fromtimestamp(self.end, zone).isoformat()
        return doc

    def months(self) -> list[Period]:
        """The calendar months (or parts of them) the period covers, in order, in its time zone."""
        zone = zone_info(self.timezone)
        out: list[Period] = []
        t = self.start
        while t < self.end:
            d = datetime.fromtimestamp(t, zone)
            nxt = _first_of_month(d.year + (d.month == 12), d.month % 12 + 1, self.timezone)
            end = min(nxt, self.end)
            label = f"{d.year:04d}-{d.month:02d}"
            out.append(Period(label, t, end, self.complete or end < self.end, self.timezone))
            t = end
        return out


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def zone_info(name: str) -> tzinfo:
    """The IANA time zone ``name`` from the host's tz database; an unknown one is refused."""
    if name == "UTC":
        return UTC
    where = f"time zone {name!r}"
    if not _ZONE.fullmatch(name) or ".." in name:
        raise ReportInputError(
            where, "not a time zone name (give an IANA name such as Europe/Berlin, or UTC)"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ReportInputError(where, "unknown to this host's time zone database (tzdata)") from None


def _midnight(day: date, timezone: str) -> int:
    """Midnight at the start of ``day`` in ``timezone``, in seconds since the epoch; refused when it is
    not a whole UTC hour (the hourly series cannot be split there)."""
    local = datetime(day.year, day.month, day.day, tzinfo=zone_info(timezone))
    ts = local.timestamp()
    if ts % HOUR:
        offset = local.strftime("%z")
        raise ReportInputError(
            f"time zone {timezone}",
            f"midnight of {day.isoformat()} is at UTC{offset[:3]}:{offset[3:]}, not a whole hour from UTC; "
            "usage is kept per UTC hour and cannot be split there (report in UTC or a whole-hour zone)",
        )
    return int(ts)


def _first_of_month(year: int, month: int, timezone: str = "UTC") -> int:
    return _midnight(date(year, month, 1), timezone)


def _year(text: str, where: str) -> int:
    year = int(text)
    if not MIN_YEAR <= year <= MAX_YEAR - 1:
        raise ReportInputError(where, f"year {year} is out of range ({MIN_YEAR}-{MAX_YEAR - 1})")
    return year


def parse_period(text: str, timezone: str = "UTC") -> Period:
    """``2026-10``, ``2026-Q4`` or ``2026``, from midnight in ``timezone``; anything else is refused
    with the forms that are accepted."""
    where = f"--period {text}"
    tz = timezone
    if m := _MONTH.fullmatch(text):
        year, month = _year(m[1], where), int(m[2])
        if not 1 <= month <= 12:
            raise ReportInputError(where, f"month {m[2]} is not 01-12")
        end = _first_of_month(year + (month == 12), month % 12 + 1, tz)
        return Period(f"{year:04d}-{month:02d}", _first_of_month(year, month, tz), end, timezone=tz)
    if m := _QUARTER.fullmatch(text):
        year, q = _year(m[1], where), int(m[2])
        first = 3 * (q - 1) + 1
        end = _first_of_month(year + (q == 4), (first + 2) % 12 + 1, tz)
        return Period(f"{year:04d}-Q{q}", _first_of_month(year, first, tz), end, timezone=tz)
    if m := _YEAR.fullmatch(text):
        year = _year(m[1], where)
        return Period(
            f"{year:04d}", _first_of_month(year, 1, tz), _first_of_month(year + 1, 1, tz), timezone=tz
        )
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


def parse_range(first: str, last: str, timezone: str = "UTC") -> Period:
    """``--from FIRST --to LAST``: whole days in ``timezone``, both included (``--to 2026-10-31`` ends
    at 11-01 00:00 there)."""
    a = _day(first, f"--from {first}")
    b = _day(last, f"--to {last}")
    if b < a:
        raise ReportInputError(f"--to {last}", f"is before --from {first}")
    start = _midnight(a, timezone)
    end = _midnight(b + timedelta(days=1), timezone)
    return Period(f"{a.isoformat()}..{b.isoformat()}", start, end, timezone=timezone)


def year_period(year: int | str, timezone: str = "UTC") -> Period:
    text = f"{int(year):04d}" if str(year).isdigit() else str(year)
    return parse_period(text, timezone)


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
    return Period(period.label, period.start, end, complete=False, timezone=period.timezone)


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
