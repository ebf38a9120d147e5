"""Renderings of a report document for people: CSV (a pure function of the signed JSON)."""

from __future__ import annotations

import csv
import io
from typing import Any

#: a cell starting with one of these is a formula to a spreadsheet (CSV injection); it is written
#: with a leading apostrophe, which spreadsheets show as text
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(_FORMULA) else value
    return repr(value) if isinstance(value, float) else str(value)


def _csv(rows: list[list[Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return out.getvalue().encode()


def usage_csv(doc: dict[str, Any]) -> bytes:
    """One row per account (``user`` and ``partition`` empty), one per partition it used (``partition``
    set) and one per user under it; then, after an empty row, one per GPU model. The columns of format 2
    come first, in their order; ``partition`` and ``active_gpu_hours`` follow them."""
    alloc = "allocations" in doc
    head = ["period", "account", "user", "gpu_hours", "gpu_energy_kwh", "jobs"]
    if alloc:
        head += ["awarded_gpu_hours", "balance_gpu_hours"]
    billed = "billing" in doc
    rows: list[list[Any]] = [
        head + ["partition", "active_gpu_hours"] + (["billing_weight", "billed_gpu_hours"] if billed else [])
    ]
    label = doc["period"]["label"]
    blank = ["", ""] if alloc else []
    for acct in doc["accounts"]:
        row = [label, acct["account"], "", acct["gpu_hours"], acct["gpu_energy_kwh"], acct["jobs"]]
        extra = [acct["awarded_gpu_hours"], acct["balance_gpu_hours"]] if alloc else []
        bill = ["", acct["billed_gpu_hours"]] if billed else []
        rows.append(row + extra + ["", acct["active_gpu_hours"]] + bill)
        for part in acct["partitions"]:
            row = [label, acct["account"], "", part["gpu_hours"], part["gpu_energy_kwh"], part["jobs"]]
            bill = [part["billing_weight"], part["billed_gpu_hours"]] if billed else []
            rows.append(row + blank + [part["partition"], part["active_gpu_hours"]] + bill)
        for user in acct["users"]:
            row = [
                label,
                acct["account"],
                user["user"],
                user["gpu_hours"],
                user["gpu_energy_kwh"],
                user["jobs"],
            ]
            rows.append(row + blank + ["", ""] + (["", ""] if billed else []))
    rows.append([])
    rows.append(["period", "gpu_model", "gpu_hours", "active_gpu_hours", "gpu_energy_kwh"])
    for m in doc["gpu_models"]:
        rows.append([label, m["model"], m["gpu_hours"], m["active_gpu_hours"], m["gpu_energy_kwh"]])
    return _csv(rows)


def energy_csv(doc: dict[str, Any]) -> bytes:
    """``section, field, value, unit, source, reference`` rows: information, KPIs, indicators, missing,
    then the monthly trend."""
    rows: list[list[Any]] = [["section", "field", "value", "unit", "source", "reference"]]
    for key, item in doc["site"].items():
        rows.append(["information", key, item["value"], "", "declared", item["reference"]])
    for key, item in doc["kpis"].items():
        rows.append(["kpi", key, item["value"], item["unit"], item["source"], item["reference"]])
    for key, item in doc["indicators"].items():
        rows.append(["indicator", key, item["value"], item["unit"], "computed", item["reference"]])
    for item in doc["missing"]:
        rows.append(["missing", item["field"], "", "", "", item["reference"]])
    for month in doc["operator"]["monthly"]:
        for key, value in month.items():
            if key != "month":
                rows.append([f"monthly {month['month']}", key, value, "kWh", "measured", ""])
    return _csv(rows)


def closing_csv(doc: dict[str, Any]) -> bytes:
    """A meter closing: one row per meter, then the GPUs' energy and GPU-hours per account and user."""
    label = doc["period"]["label"]
    rows: list[list[Any]] = [["month", "what", "selector", "unit", "kwh", "resets", "covered_s", "coverage"]]
    for name, meters in doc["meters"].items():
        for i, m in enumerate(meters):
            what = f"meters.{name}[{i}]"
            rows.append(
                [label, what, m["selector"], m["unit"], m["kwh"], m["resets"], m["covered_s"], m["coverage"]]
            )
    gpu = doc.get("gpu")
    if gpu is not None:
        rows.append([label, "gpu", "", "", gpu["cluster"]["measured_gpu_energy_kwh"], "", "", ""])
        rows.append([])
        rows.append(["month", "account", "user", "gpu_hours", "gpu_energy_kwh"])
        for r in gpu["by_account_user"]:
            rows.append([label, r["account"], r["user"], r["gpu_hours"], r["gpu_energy_kwh"]])
    return _csv(rows)


def render_csv(doc: dict[str, Any]) -> bytes:
    kind = doc.get("kind")
    if kind == "closing":
        return closing_csv(doc)
    return usage_csv(doc) if kind == "usage" else energy_csv(doc)
