"""The energy report's field list, read from ``data/energy_fields.yaml`` (one place, with the legal
reference of each field, so that an amended delegated act is a data change)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class InfoField:
    key: str
    title: str
    type: str
    mandatory: bool
    reference: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kpi:
    key: str
    title: str
    unit: str
    source: str  # "measured" | "declared"
    mandatory: bool
    reference: str
    #: measured: the site.yaml `meters.<meter>` list; declared: the site.yaml key (top level when
    #: set here, else under `declared:`)
    meter: str | None = None
    site_key: str | None = None
    #: measured, but may be declared under `declared:` when site.yaml names no meter for it
    declarable: bool = False
    #: the KPI is the sum of these (declared alone, it is their sum; with them, it must equal it)
    parts: tuple[str, ...] = ()
    #: the unit the act asks for, and the factor from ``unit`` to it (traffic: TB given, EB asked)
    act_unit: str | None = None
    act_factor: float = 1.0


@dataclass(frozen=True)
class Indicator:
    key: str
    title: str
    unit: str
    numerator: str
    denominator: str
    factor: float
    decimals: str
    reference: str


@dataclass(frozen=True)
class FieldList:
    act: str
    information: tuple[InfoField, ...]
    kpis: tuple[Kpi, ...]
    indicators: tuple[Indicator, ...]

    def kpi(self, key: str) -> Kpi:
        return next(k for k in self.kpis if k.key == key)

    @property
    def meters(self) -> tuple[str, ...]:
        return tuple(k.meter for k in self.kpis if k.meter)

    @property
    def declared_keys(self) -> tuple[str, ...]:
        """The keys site.yaml's `declared:` takes."""
        return tuple(
            k.key for k in self.kpis if (k.source == "declared" and k.site_key is None) or k.declarable
        )


@cache
def field_list() -> FieldList:
    text = resources.files("vigil.installer.reports").joinpath("data/energy_fields.yaml").read_text()
    return parse_field_list(yaml.safe_load(text))


def parse_field_list(doc: dict[str, Any]) -> FieldList:
    """The field list from its data file's content (the file is ours: a KeyError here is a defect)."""
    info = tuple(
        InfoField(
            f["key"], f["title"], f["type"], bool(f["mandatory"]), f["reference"], tuple(f.get("choices", ()))
        )
        for f in doc["information"]
    )
    kpis = tuple(
        Kpi(
            f["key"],
            f["title"],
            f["unit"],
            f["source"],
            bool(f["mandatory"]),
            f["reference"],
            meter=f.get("meter"),
            site_key=f.get("site_key"),
            declarable=bool(f.get("declarable", False)),
            parts=tuple(f.get("parts", ())),
            act_unit=f.get("act_unit"),
            act_factor=float(f.get("act_factor", 1.0)),
        )
        for f in doc["kpis"]
    )
    indicators = tuple(
        Indicator(
            f["key"],
            f["title"],
            str(f["unit"]),
            f["numerator"],
            f["denominator"],
            float(f["factor"]),
            f["decimals"],
            f["reference"],
        )
        for f in doc["indicators"]
    )
    keys = {k.key for k in kpis}
    for k in kpis:
        if any(part not in keys or part == k.key for part in k.parts):
            raise ValueError(f"KPI {k.key}: a part is not another KPI")
    for ind in indicators:
        if ind.numerator not in keys or ind.denominator not in keys:
            raise ValueError(f"indicator {ind.key}: numerator or denominator is not a KPI")
    return FieldList(doc["act"], info, kpis, indicators)
