"""Prometheus text exposition (format 0.0.4): families written in a fixed order, labels escaped."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = Sequence[tuple[str, str]]


def escape_label(value: str) -> str:
    """A label value as the exposition format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


class Family:
    """One metric family: name, type, help and its samples (labels in the order given)."""

    __slots__ = ("help", "name", "samples", "type")

    def __init__(self, name: str, type_: str, help_: str) -> None:
        self.name = name
        self.type = type_
        self.help = help_
        self.samples: list[tuple[Labels, str]] = []

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append((labels, format_value(value)))

    def add_raw(self, labels: Labels, value: str) -> None:
        """A sample whose value is already formatted (dcgm-exporter prints ints with %d, doubles with %f)."""
        self.samples.append((labels, value))


def render(families: Iterable[Family], *, skip_empty: bool = True) -> str:
    out: list[str] = []
    for fam in families:
        if skip_empty and not fam.samples:
            continue
        out.append(f"# HELP {fam.name} {escape_help(fam.help)}\n")
        out.append(f"# TYPE {fam.name} {fam.type}\n")
        for labels, value in fam.samples:
            if labels:
                inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
                out.append(f"{fam.name}{{{inner}}} {value}\n")
            else:
                out.append(f"{fam.name} {value}\n")
    return "".join(out)


def registry() -> dict[str, Family]:
    """An ordered name -> family map (insertion order is the output order)."""
    return {}


def family(reg: dict[str, Family], name: str, type_: str, help_: str) -> Family:
    fam = reg.get(name)
    if fam is None:
        fam = reg[name] = Family(name, type_, help_)
    return fam


def single(name: str, type_: str, help_: str, value: float, labels: Labels | None = None) -> Family:
    fam = Family(name, type_, help_)
    fam.add(labels or (), value)
    return fam
