"""``site.yaml``: the data centre's declared information and values, and its energy meters.

Shape (docs/reports.md lists every key)::

    name: HPC Centre North            # and the other information fields (fields.information)
    installed_it_power_kw: 800
    meters:
      it_energy:                      # E_IT
        - selector: 'site_pdu_energy_joules_total{circuit="it"}'
          unit: J                     # J, mJ, Wh or kWh
      total_energy:                   # E_DC
        - selector: site_facility_energy_kwh_total
          unit: kWh
    declared:
      water_input_m3: 5000

Everything is checked before a query is made; the first problem is refused naming its key
(``site.yaml: declared.water_input_m3: must be a number, not 'lots'``). Numbers must be finite, not
negative and at most 1e15; unknown keys are refused (a misspelt key would otherwise silently become
a missing field).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from vigil.basics.bounded import load_yaml, read_bounded, shown
from vigil.installer.reports.errors import ReportInputError
from vigil.installer.reports.fields import FieldList, field_list
from vigil.installer.reports.period import zone_info

#: kWh per unit of a meter counter
UNITS = {"J": 1 / 3.6e6, "mJ": 1 / 3.6e9, "Wh": 1 / 1e3, "kWh": 1.0}
MAX_BYTES = 1 << 20
MAX_NUMBER = 1e15
MAX_TEXT = 512
MAX_METERS = 64
_SELECTOR = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(\{[^{}\n]*\})?|\{[^{}\n]+\}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Loader(yaml.SafeLoader):
    """Safe YAML with dates left as text, so that a bad date is refused naming its key."""


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):  # the timestamp resolver matches scalars only
        raise yaml.constructor.ConstructorError(None, None, "a date that is not a scalar", node.start_mark)
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


@dataclass(frozen=True)
class Meter:
    selector: str
    unit: str

    @property
    def kwh_per_unit(self) -> float:
        return UNITS[self.unit]


@dataclass
class Site:
    path: Path
    information: dict[str, str] = field(default_factory=dict)
    #: declared KPI values by KPI key
    declared: dict[str, float] = field(default_factory=dict)
    meters: dict[str, list[Meter]] = field(default_factory=dict)
    #: the IANA time zone whose midnights bound the year and its months ("UTC" when not named)
    timezone: str = "UTC"


def load_site(path: Path, fields: FieldList | None = None) -> Site:
    fields = fields or field_list()
    where = str(path)
    if not path.is_file():
        raise ReportInputError(where, "not a file")
    # bounded: a 430-byte file of nested aliases once made the first error message (its repr) >4 GB
    data = read_bounded(path, max_bytes=MAX_BYTES, error=ReportInputError)
    try:
        doc = load_yaml(data.decode("utf-8"), where, loader=_Loader, error=ReportInputError)
    except UnicodeDecodeError:
        raise ReportInputError(where, "not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        raise ReportInputError(where, f"not YAML: {at}{getattr(exc, 'problem', None) or exc}") from None
    return parse_site(doc, path, fields)


def parse_site(doc: Any, path: Path, fields: FieldList) -> Site:
    where = str(path)

    def bad(key: str, reason: str) -> ReportInputError:
        return ReportInputError(f"{where}: {key}", reason)

    if not isinstance(doc, dict):
        raise ReportInputError(where, f"must be a mapping of keys, not {_kind(doc)}")
    site = Site(path)
    info = {f.key: f for f in fields.information}
    top_kpis = {k.site_key: k for k in fields.kpis if k.site_key}
    known = set(info) | set(top_kpis) | {"meters", "declared", "timezone"}
    for key in doc:
        if not isinstance(key, str) or key not in known:
            raise bad(str(key), f"unknown key (known: {', '.join(sorted(known))})")
    if doc.get("timezone") is not None:
        zone = doc["timezone"]
        if not isinstance(zone, str):
            raise bad("timezone", f"must be an IANA time zone name, not {_kind(zone)}")
        try:
            zone_info(zone)
        except ReportInputError as exc:
            raise bad("timezone", exc.reason) from None
        site.timezone = zone
    for key, spec in info.items():
        if key not in doc or doc[key] is None:
            continue
        value = doc[key]
        if spec.type == "date":
            if isinstance(value, date):
                value = value.isoformat()
            if not isinstance(value, str) or not _DATE.fullmatch(value):
                raise bad(key, f"must be a date YYYY-MM-DD, not {_show(value)}")
            try:
                date.fromisoformat(value)
            except ValueError as exc:
                raise bad(key, f"not a date: {exc}") from None
        elif not isinstance(value, str):
            raise bad(key, f"must be text, not {_kind(value)}")
        elif not value.strip() or len(value) > MAX_TEXT or not value.isprintable():
            raise bad(key, f"must be one line of 1 to {MAX_TEXT} printable characters")
        if spec.choices and value not in spec.choices:
            raise bad(key, f"must be one of {', '.join(spec.choices)}, not {_show(value)}")
        site.information[key] = value
    for site_key, kpi in top_kpis.items():
        if doc.get(site_key) is not None:
            site.declared[kpi.key] = _number(doc[site_key], site_key, bad)
    declared = doc.get("declared")
    if declared is not None:
        if not isinstance(declared, dict):
            raise bad("declared", f"must be a mapping, not {_kind(declared)}")
        allowed = fields.declared_keys
        for key, value in declared.items():
            if key not in allowed:
                raise bad(f"declared.{key}", f"unknown declared value (known: {', '.join(allowed)})")
            if value is not None:
                site.declared[key] = _number(value, f"declared.{key}", bad)
    for kpi in fields.kpis:
        if kpi.parts and kpi.key in site.declared and all(p in site.declared for p in kpi.parts):
            total = sum(site.declared[p] for p in kpi.parts)
            if abs(site.declared[kpi.key] - total) > 1e-9 * max(1.0, total):
                raise bad(
                    f"declared.{kpi.key}",
                    f"{site.declared[kpi.key]:.6g} is not the sum of {' + '.join(kpi.parts)} ({total:.6g})",
                )
    meters = doc.get("meters")
    if meters is not None:
        if not isinstance(meters, dict):
            raise bad("meters", f"must be a mapping, not {_kind(meters)}")
        for name, entries in meters.items():
            if name not in fields.meters:
                raise bad(f"meters.{name}", f"unknown meter (known: {', '.join(fields.meters)})")
            if not isinstance(entries, list) or not entries:
                raise bad(f"meters.{name}", "must be a non-empty list of {selector, unit}")
            if len(entries) > MAX_METERS:
                raise bad(f"meters.{name}", f"more than {MAX_METERS} meters")
            site.meters[name] = [_meter(e, f"meters.{name}[{i}]", bad) for i, e in enumerate(entries)]
    for kpi in fields.kpis:
        if kpi.declarable and kpi.meter in site.meters and kpi.key in site.declared:
            raise bad(f"declared.{kpi.key}", f"give meters.{kpi.meter} or declared.{kpi.key}, not both")
    return site


def _meter(entry: Any, key: str, bad: Any) -> Meter:
    if not isinstance(entry, dict):
        raise bad(key, f"must be a mapping with selector and unit, not {_kind(entry)}")
    for k in entry:
        if k not in ("selector", "unit"):
            raise bad(f"{key}.{k}", "unknown key (known: selector, unit)")
    selector, unit = entry.get("selector"), entry.get("unit")
    if not isinstance(selector, str) or len(selector) > 1024 or not _SELECTOR.fullmatch(selector.strip()):
        raise bad(f"{key}.selector", f"must be a PromQL series selector, not {_show(selector)}")
    if not isinstance(unit, str) or unit not in UNITS:
        raise bad(f"{key}.unit", f"unknown unit {_show(unit)} (known: {', '.join(UNITS)})")
    return Meter(selector.strip(), unit)


def _number(value: Any, key: str, bad: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(key, f"must be a number, not {_show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise bad(key, f"must be a finite number, not {value}")
    if abs(value) > MAX_NUMBER:
        shown = f"{value:.6g}" if isinstance(value, float) or len(str(abs(value))) < 300 else "a number"
        raise bad(key, f"{shown} is larger than {MAX_NUMBER:.0e}")
    if value < 0:
        raise bad(key, f"must not be negative ({value})")
    return float(value)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    return shown(value, 60)
