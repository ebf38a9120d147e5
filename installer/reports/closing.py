"""Monthly meter closings: the figures of a month, signed and stored while its samples still exist.

The yearly energy report for year Y is due by 15 May of Y+1, but VictoriaMetrics keeps 400 days
(``victoriametrics_retention_period``): by then January to early April of Y are gone. So each month,
once over, is *closed*: every meter's counter increase over the month (across resets), the seconds
it covered, its resets and series, and the GPUs' energy and GPU-hours per account, written as a
canonical JSON document of kind ``closing``, signed with the report key and stored content-addressed
like the reports (``vigil report list`` shows them).

``vigil report energy --year Y`` then takes each month from the samples while they cover it as well
as its closing did (and checks them against the closing), and from the closing once they do not.
A month with neither is named in the report; ``--strict`` fails on it.

A closing belongs to one set of meters: the SHA-256 of the site's meter list (name, index, selector,
unit) and the time zone are inside it, and a closing made for other meters is not used.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from vigil.basics.canonical import canonical_json
from vigil.installer.reports.documents import FORMAT, J_PER_KWH, generator
from vigil.installer.reports.energy import MeterMonth, MeterReading, read_meter_month
from vigil.installer.reports.errors import ReportError, ReportInputError
from vigil.installer.reports.numbers import fixed
from vigil.installer.reports.period import Period, in_progress_end, iso, year_period, zone_info
from vigil.installer.reports.site import UNITS, Meter, Site
from vigil.installer.reports.usage import Usage, collect
from vigil.installer.reports.vm import VictoriaMetrics

KIND = "closing"
#: samples and closing agree when they differ by at most this share (or by at most 1 Wh)
AGREE_REL = 0.005
AGREE_ABS_KWH = 0.001
#: how far back the automatic closing looks: VictoriaMetrics' retention (400 days) and a margin
RETENTION_DAYS = 400
#: a closing covers a meter "as well" as the samples when their covered seconds differ by less
COVERAGE_SLACK_S = 60


def meters_spec(meters: dict[str, list[Meter]]) -> list[dict[str, Any]]:
    return [
        {"meter": name, "index": i, "selector": m.selector, "unit": m.unit}
        for name, ms in sorted(meters.items())
        for i, m in enumerate(ms)
    ]


def meters_sha256(meters: dict[str, list[Meter]]) -> str:
    return hashlib.sha256(canonical_json(meters_spec(meters))).hexdigest()


#: a closing's `gpu.cluster` keys: the Usage figure, its scale and its number kind
_CLUSTER = {
    "measured_gpu_energy_kwh": ("cluster_joules", J_PER_KWH, "kwh"),
    "charged_gpu_energy_kwh": ("charged_joules", J_PER_KWH, "kwh"),
    "unallocated_gpu_energy_kwh": ("unallocated_joules", J_PER_KWH, "kwh"),
    "measured_gpu_hours": ("cluster_gpu_hours", 1.0, "gpu_hours"),
    "charged_gpu_hours": ("charged_gpu_hours", 1.0, "gpu_hours"),
    "unallocated_gpu_hours": ("unallocated_gpu_hours", 1.0, "gpu_hours"),
}


@dataclass
class Closing:
    """A stored closing, read back and checked."""

    sha256: str
    label: str
    #: meter name -> one MeterMonth per meter, in site.yaml's order
    meters: dict[str, list[MeterMonth]]
    #: the month's GPU figures, or None when the month had no GPU data
    gpu: Usage | None
    complete: bool
    hours_s: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def closing_document(
    *,
    site: Site,
    month: Period,
    meters: dict[str, list[MeterMonth]],
    gpu: Usage | None,
    vm_url: str,
) -> dict[str, Any]:
    span = max(month.end - month.start, 1)
    doc_meters = {
        name: [
            {
                "selector": m.selector,
                "unit": m.unit,
                "kwh": fixed(got.kwh, "kwh"),
                "resets": got.resets,
                "series": got.series,
                "covered_s": int(round(got.covered_s)),
                "coverage": fixed(min(got.covered_s / span, 1.0), "ratio"),
            }
            for m, got in zip(site.meters[name], meters[name], strict=True)
        ]
        for name in sorted(site.meters)
    }
    gpu_doc: dict[str, Any] | None = None
    if gpu is not None:
        gpu_doc = {
            "by_account_user": [
                {
                    "account": acct,
                    "user": user,
                    "gpu_hours": fixed(gpu.gpu_hours.get((acct, user), 0.0), "gpu_hours"),
                    "gpu_energy_kwh": fixed(gpu.joules.get((acct, user), 0.0) / J_PER_KWH, "kwh"),
                }
                for acct, user in gpu.pairs()
            ],
            "cluster": {
                key: fixed(getattr(gpu, attr) / scale, kind) for key, (attr, scale, kind) in _CLUSTER.items()
            },
            "recorded_hours": gpu.recorded_hours,
            "raw_hours": gpu.raw_hours,
            "hours_without_data": gpu.hours_without_data,
        }
    return {
        "format": FORMAT,
        "kind": KIND,
        "generator": generator(),
        "period": month.to_json(),
        "source": {"victoriametrics": vm_url},
        "meters_sha256": meters_sha256(site.meters),
        "meters": doc_meters,
        "gpu": gpu_doc,
    }


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportError(where, f"must be a count, not {value!r:.40}")
    return value


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value == value:
        raise ReportError(where, f"must be a number, not {value!r:.40}")
    return float(value)


def parse_closing(doc: Any, sha256: str, site: Site, timezone: str, where: str) -> Closing | None:
    """The closing in ``doc`` if it belongs to these meters and time zone; None when it belongs to
    others; :class:`ReportError` when it is not a closing vigil writes."""
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not isinstance(doc.get("period"), dict):
        raise ReportError(where, "not a meter closing")
    if doc.get("meters_sha256") != meters_sha256(site.meters) or doc["period"].get("timezone") != timezone:
        return None
    meters: dict[str, list[MeterMonth]] = {}
    got = doc.get("meters")
    if not isinstance(got, dict) or sorted(got) != sorted(site.meters):
        raise ReportError(where, "its meters do not match its meters_sha256")
    for name, rows in got.items():
        if not isinstance(rows, list) or len(rows) != len(site.meters[name]):
            raise ReportError(where, f"meters.{name}: does not match its meters_sha256")
        meters[name] = []
        for i, row in enumerate(rows):
            at = f"{where}: meters.{name}[{i}]"
            if not isinstance(row, dict):
                raise ReportError(at, "not a mapping")
            meters[name].append(
                MeterMonth(
                    kwh=_num(row.get("kwh"), f"{at}.kwh"),
                    resets=_int(row.get("resets"), f"{at}.resets"),
                    covered_s=float(_int(row.get("covered_s"), f"{at}.covered_s")),
                    series=_int(row.get("series"), f"{at}.series"),
                )
            )
    gpu: Usage | None = None
    g = doc.get("gpu")
    if g is not None:
        if not isinstance(g, dict) or not isinstance(g.get("by_account_user"), list):
            raise ReportError(f"{where}: gpu", "not a closing's GPU figures")
        gpu = Usage(Period(str(doc["period"].get("label")), 0, 0, timezone=timezone))
        for row in g["by_account_user"]:
            if not isinstance(row, dict):
                raise ReportError(f"{where}: gpu.by_account_user", "not a list of mappings")
            pair = (str(row.get("account", "")), str(row.get("user", "")))
            gpu.gpu_hours[pair] += _num(row.get("gpu_hours"), f"{where}: gpu.gpu_hours")
            gpu.joules[pair] += _num(row.get("gpu_energy_kwh"), f"{where}: gpu.gpu_energy_kwh") * J_PER_KWH
        cluster = g.get("cluster")
        if not isinstance(cluster, dict):
            raise ReportError(f"{where}: gpu.cluster", "not a closing's cluster figures")
        for key, (attr, scale, _kind) in _CLUSTER.items():
            setattr(gpu, attr, _num(cluster.get(key), f"{where}: gpu.cluster.{key}") * scale)
        gpu.recorded_hours = _int(g.get("recorded_hours"), f"{where}: gpu.recorded_hours")
        gpu.raw_hours = _int(g.get("raw_hours"), f"{where}: gpu.raw_hours")
        gpu.hours_without_data = _int(g.get("hours_without_data"), f"{where}: gpu.hours_without_data")
    return Closing(sha256, str(doc["period"].get("label")), meters, gpu, bool(doc["period"].get("complete")))


def ended_months(timezone: str, now: float, *, back_days: int = RETENTION_DAYS) -> list[Period]:
    """The whole months, in ``timezone``, that ended before now and began at most ``back_days``
    before it (older ones' samples are gone: nothing left to close)."""
    zone = zone_info(timezone)
    end = in_progress_end(now)
    first = datetime.fromtimestamp(now - back_days * 86400, zone).year
    last = datetime.fromtimestamp(now, zone).year
    out: list[Period] = []
    for year in range(first, last + 1):
        for month in year_period(year, timezone).months():
            if month.end <= end and month.start >= now - back_days * 86400:
                out.append(month)
    return out


def read_month(
    vm: VictoriaMetrics, site: Site, month: Period, *, progress: Callable[[str], None] | None = None
) -> tuple[dict[str, list[MeterMonth]], Usage | None]:
    """Every meter of ``site`` and the GPUs over ``month``, from the samples."""
    meters: dict[str, list[MeterMonth]] = {}
    for name, ms in sorted(site.meters.items()):
        meters[name] = []
        for i, meter in enumerate(ms):
            if progress is not None:
                progress(f"{site.path}: meters.{name}[{i}]: {month.label}")
            meters[name].append(read_meter_month(vm, meter, month, where=f"{site.path}: meters.{name}[{i}]"))
    try:
        gpu: Usage | None = collect(vm, month, jobs=False)
    except ReportInputError:
        gpu = None
    return meters, gpu


def has_samples(meters: dict[str, list[MeterMonth]]) -> bool:
    return any(m.covered_s > 0 for ms in meters.values() for m in ms)


def agrees(a: float, b: float) -> bool:
    return abs(a - b) <= max(AGREE_ABS_KWH, AGREE_REL * max(abs(a), abs(b)))


def remembered_site_path(reports_dir: Path) -> Path:
    return reports_dir / "closing-site.json"


def remember_site(reports_dir: Path, site: Site) -> None:
    """Keep the meters and time zone of the last site.yaml a report or closing was made with, so
    that later `vigil report` commands can close the months that ended since (staged, renamed)."""
    path = remembered_site_path(reports_dir)
    data = canonical_json(
        {"meters": meters_spec(site.meters), "timezone": site.timezone, "path": str(site.path)}
    )
    if os.path.isfile(path) and not os.path.islink(path) and path.read_bytes() == data:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def remembered_site(reports_dir: Path) -> Site | None:
    """The site remembered by :func:`remember_site` (its meters and time zone only), or None."""
    path = remembered_site_path(reports_dir)
    if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > 1 << 20:
        return None
    try:
        doc = json.loads(path.read_bytes())
        meters: dict[str, list[Meter]] = {}
        for row in doc["meters"]:
            if row["unit"] not in UNITS or not isinstance(row["selector"], str):
                return None
            meters.setdefault(str(row["meter"]), []).append(Meter(row["selector"], row["unit"]))
        zone = str(doc["timezone"])
        zone_info(zone)
        return Site(Path(str(doc.get("path", "site.yaml"))), meters=meters, timezone=zone)
    except (ValueError, KeyError, TypeError, ReportInputError):
        return None


@dataclass
class Year:
    """A period's meter readings and GPU figures, month by month from samples or closings."""

    readings: dict[str, list[MeterReading]]
    gpu: Usage | None
    gpu_monthly_joules: dict[str, float]
    #: per month: where its figures came from and whether samples and closing agree
    months: list[dict[str, Any]]
    #: months with neither samples nor a closing
    missing: list[str]
    #: (month, what, samples kWh, closing kWh) where both exist and differ
    differences: list[dict[str, Any]]


def assemble(
    vm: VictoriaMetrics,
    site: Site,
    period: Period,
    closings: dict[str, Closing],
    *,
    progress: Callable[[str], None] | None = None,
) -> Year:
    """Each month of ``period`` from its samples while they cover it as well as its closing did
    (checked against the closing), else from the closing; a month with neither is missing."""
    readings = {name: [MeterReading(m) for m in ms] for name, ms in sorted(site.meters.items())}
    gpu_total: Usage | None = None
    monthly: dict[str, float] = {}
    months: list[dict[str, Any]] = []
    missing: list[str] = []
    differences: list[dict[str, Any]] = []
    no_gpu_hours = 0
    for month in period.months():
        sampled, sampled_gpu = read_month(vm, site, month, progress=progress)
        closing = closings.get(month.label)
        use_closing = closing is not None and any(
            c.covered_s > s.covered_s + COVERAGE_SLACK_S
            for name in sampled
            for s, c in zip(sampled[name], closing.meters[name], strict=True)
        )
        row: dict[str, Any] = {"month": month.label, "closing": closing.sha256 if closing else None}
        if closing is not None and use_closing:
            chosen, gpu = closing.meters, closing.gpu if closing.gpu is not None else sampled_gpu
            row["source"] = "closing"
            row["check"] = "samples gone"
        elif has_samples(sampled) or sampled_gpu is not None:
            chosen, gpu = (
                sampled,
                sampled_gpu if sampled_gpu is not None else (closing.gpu if closing else None),
            )
            row["source"] = "samples"
            row["check"] = None
            if closing is not None:
                row["check"] = "agrees"
                pairs = [
                    (f"meters.{name}[{i}]", s.kwh, c.kwh)
                    for name in sampled
                    for i, (s, c) in enumerate(zip(sampled[name], closing.meters[name], strict=True))
                ]
                if sampled_gpu is not None and closing.gpu is not None:
                    pairs.append(
                        (
                            "gpu",
                            sampled_gpu.cluster_joules / J_PER_KWH,
                            closing.gpu.cluster_joules / J_PER_KWH,
                        )
                    )
                for what, s_kwh, c_kwh in pairs:
                    if not agrees(s_kwh, c_kwh):
                        row["check"] = "differs"
                        differences.append(
                            {
                                "month": month.label,
                                "what": what,
                                "samples_kwh": fixed(s_kwh, "kwh"),
                                "closing_kwh": fixed(c_kwh, "kwh"),
                            }
                        )
        else:
            chosen, gpu = sampled, None
            row["source"] = "none"
            row["check"] = None
            missing.append(month.label)
        months.append(row)
        for name, got in chosen.items():
            for reading, m in zip(readings[name], got, strict=True):
                reading.monthly_kwh[month.label] = m.kwh
                reading.resets += m.resets
                reading.covered_s += m.covered_s
                reading.series = max(reading.series, m.series)
        if gpu is None:
            no_gpu_hours += month.hours
            continue
        monthly[month.label] = gpu.cluster_joules
        if gpu_total is None:
            gpu_total = Usage(period)
        gpu_total.merge(gpu)
    if gpu_total is not None:
        gpu_total.hours_without_data += no_gpu_hours
    for name, year_readings in readings.items():
        for i, reading in enumerate(year_readings):
            if reading.covered_s <= 0:
                raise ReportInputError(
                    f"{site.path}: meters.{name}[{i}]",
                    f"{reading.meter.selector} has no samples in {vm.name} between "
                    f"{iso(period.start)} and {iso(period.end)}, and no closing of it",
                )
    return Year(readings, gpu_total, monthly, months, missing, differences)
