"""Periods: the accepted forms, their exact UTC boundaries, months, in-progress ends, runs of hours."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vigil.installer.reports import ReportInputError, clip_to_now, parse_period, parse_range
from vigil.installer.reports.period import chunks, hour_runs, iso


def t(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


@pytest.mark.parametrize(
    ("text", "label", "start", "end"),
    [
        ("2026-10", "2026-10", "2026-10-01", "2026-11-01"),
        ("2026-12", "2026-12", "2026-12-01", "2027-01-01"),
        ("2024-02", "2024-02", "2024-02-01", "2024-03-01"),
        ("2026-Q1", "2026-Q1", "2026-01-01", "2026-04-01"),
        ("2026-q4", "2026-Q4", "2026-10-01", "2027-01-01"),
        ("2026", "2026", "2026-01-01", "2027-01-01"),
    ],
)
def test_periods_have_exact_utc_boundaries(text: str, label: str, start: str, end: str) -> None:
    p = parse_period(text)
    assert (p.label, p.start, p.end) == (label, t(start), t(end))
    assert p.start % 3600 == 0 and p.end % 3600 == 0


def test_a_leap_february_has_696_hours_and_a_year_8760() -> None:
    assert parse_period("2024-02").hours == 29 * 24
    assert parse_period("2025").hours == 8760
    assert parse_period("2024").hours == 8784


def test_from_to_are_whole_days_both_included() -> None:
    p = parse_range("2026-10-01", "2026-10-31")
    assert (p.start, p.end) == (t("2026-10-01"), t("2026-11-01"))
    assert parse_range("2026-10-05", "2026-10-05").hours == 24


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-13", "month 13 is not 01-12"),
        ("2026-00", "month 00 is not 01-12"),
        ("2026-Q5", "not a period"),
        ("26-10", "not a period"),
        ("2026-10-01", "not a period"),
        ("1969", "out of range"),
        ("", "not a period"),
        ("2026-10\n", "not a period"),
    ],
)
def test_bad_periods_are_refused_naming_the_option(text: str, reason: str) -> None:
    with pytest.raises(ReportInputError) as exc:
        parse_period(text)
    assert exc.value.obj.startswith("--period") and reason in exc.value.reason


def test_bad_ranges_are_refused() -> None:
    with pytest.raises(ReportInputError, match="is before --from"):
        parse_range("2026-10-02", "2026-10-01")
    with pytest.raises(ReportInputError, match="not a date"):
        parse_range("2026-02-30", "2026-03-01")
    with pytest.raises(ReportInputError, match="not a date"):
        parse_range("2026-10", "2026-11-01")


def test_months_split_a_quarter_and_a_range_at_month_ends() -> None:
    assert [
        (m.label, iso(m.start), iso(m.end)) for m in parse_range("2026-01-15", "2026-03-10").months()
    ] == [
        ("2026-01", "2026-01-15T00:00:00Z", "2026-02-01T00:00:00Z"),
        ("2026-02", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"),
        ("2026-03", "2026-03-01T00:00:00Z", "2026-03-11T00:00:00Z"),
    ]
    assert len(parse_period("2026").months()) == 12
    assert parse_period("2026-Q4").months()[-1].end == t("2027-01-01")


def test_a_period_in_progress_ends_a_minute_before_now_and_says_so() -> None:
    now = t("2026-10-15") + 12 * 3600 + 7 * 60 + 42  # 12:07:42
    p = clip_to_now(parse_period("2026-10"), now)
    assert not p.complete and iso(p.end) == "2026-10-15T12:06:00Z"
    assert p.hours == 14 * 24 + 12 and p.whole_hours_end == t("2026-10-15") + 12 * 3600
    done = clip_to_now(parse_period("2026-09"), now)
    assert done.complete and done.end == t("2026-10-01")
    with pytest.raises(ReportInputError, match="has not begun"):
        clip_to_now(parse_period("2026-11"), now)


def test_hour_runs_group_consecutive_hours_of_one_source() -> None:
    ends = [3600, 7200, 10800, 14400, 18000]
    assert hour_runs(ends, ["raw", "raw", "recorded", "recorded", "none"]) == [
        ("raw", 0, 7200),
        ("recorded", 7200, 14400),
        ("none", 14400, 18000),
    ]
    assert hour_runs([], []) == []


def test_chunks_cover_the_interval_exactly() -> None:
    assert chunks(0, 100, 30) == [(0, 30), (30, 60), (60, 90), (90, 100)]
    assert chunks(5, 5, 30) == []


# --- time zones -----------------------------------------------------------------------------------


def test_a_month_in_a_site_time_zone_runs_from_midnight_to_midnight_there() -> None:
    p = parse_period("2026-10", "Europe/Berlin")
    assert (iso(p.start), iso(p.end)) == ("2026-09-30T22:00:00Z", "2026-10-31T23:00:00Z")
    assert p.hours == 745  # the clocks went back on 25 October
    doc = p.to_json()
    assert doc["timezone"] == "Europe/Berlin"
    assert (doc["start_local"], doc["end_local"]) == (
        "2026-10-01T00:00:00+02:00",
        "2026-11-01T00:00:00+01:00",
    )
    assert parse_period("2026-03", "Europe/Berlin").hours == 743
    assert "start_local" not in parse_period("2026-10").to_json()


def test_months_of_a_zoned_period_are_the_zones_months() -> None:
    months = parse_period("2026-Q1", "America/New_York").months()
    assert [(m.label, m.hours, m.timezone) for m in months] == [
        ("2026-01", 744, "America/New_York"),
        ("2026-02", 672, "America/New_York"),
        ("2026-03", 743, "America/New_York"),
    ]
    assert iso(months[0].start) == "2026-01-01T05:00:00Z" and iso(months[2].end) == "2026-04-01T04:00:00Z"


def test_zoned_days_and_a_period_in_progress_keep_the_zone() -> None:
    p = parse_range("2026-10-25", "2026-10-25", "Europe/Berlin")
    assert p.hours == 25 and iso(p.start) == "2026-10-24T22:00:00Z"
    now = datetime(2026, 10, 10, 12, 0, tzinfo=UTC).timestamp()
    clipped = clip_to_now(parse_period("2026-10", "Europe/Berlin"), now)
    assert clipped.timezone == "Europe/Berlin" and not clipped.complete


def test_a_zone_whose_midnight_is_not_a_whole_utc_hour_is_refused() -> None:
    with pytest.raises(ReportInputError) as err:
        parse_period("2026-10", "Asia/Kolkata")
    assert "midnight of" in str(err.value) and "UTC+05:30" in str(err.value)
    assert str(err.value).startswith("time zone Asia/Kolkata: ")


@pytest.mark.parametrize(
    "zone",
    [
        "Mars/Olympus_Mons",
        "../../etc/passwd",
        "/etc/localtime",
        "Europe/Berlin\n",
        "Europe//Berlin",
        "x" * 200,
        "",
    ],
)
def test_unknown_or_hostile_zone_names_are_refused_in_one_line(zone: str) -> None:
    with pytest.raises(ReportInputError) as err:
        parse_period("2026-10", zone)
    message = str(err.value)
    assert message.startswith("time zone ") and "\n" not in message
