"""The report documents: plain JSON values, the exact content that is made canonical and signed.

No generation time is inside (it is in the store's index and the audit record): the same period,
data and inputs give the same document, byte for byte, whenever it is generated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from vigil.basics.bounded import MAX_BYTES, load_yaml, read_bounded, shown
from vigil.installer import __version__
from vigil.installer.reports.energy import MeterReading
from vigil.installer.reports.errors import ReportInputError
from vigil.installer.reports.fields import FieldList
from vigil.installer.reports.numbers import fixed
from vigil.installer.reports.period import Period
from vigil.installer.reports.site import MAX_NUMBER, Site
from vigil.installer.reports.usage import ACTIVE_FALLBACK, ACTIVE_FIELD, ACTIVE_THRESHOLD, Cell, Usage

K = TypeVar("K")

#: 2: the usage report's `cluster` (measured, charged, unallocated and the check) and
#: `source.raw_partial_hour_s` said in the table; GPUs shared by MIG or by several jobs charged a share.
#: 3: the usage report's `active_gpu_hours` (with `active`, its definition), each account's
#: `partitions`, and `gpu_models`
FORMAT = 3
J_PER_KWH = 3.6e6
#: charged + unallocated must equal measured within this share of measured (or one rounding unit)
CONSERVATION_TOLERANCE = 0.005


def _off(measured: float, charged: float, unallocated: float, unit: float) -> tuple[float | None, bool]:
    """(charged + unallocated - measured) / measured, and whether it is within the tolerance."""
    off = charged + unallocated - measured
    ok = abs(off) <= CONSERVATION_TOLERANCE * abs(measured) + unit
    return (off / measured if measured else None), ok


def cluster_figures(usage: Usage) -> dict[str, Any]:
    """The cluster's GPU figures and the conservation check: what the accounts were charged plus
    what no one was charged equals what the GPUs measured, in energy and in GPU-hours."""
    e_off, e_ok = _off(usage.cluster_joules, usage.charged_joules, usage.unallocated_joules, J_PER_KWH / 1000)
    h_off, h_ok = _off(usage.cluster_gpu_hours, usage.charged_gpu_hours, usage.unallocated_gpu_hours, 1e-4)
    return {
        "measured_gpu_energy_kwh": fixed(usage.cluster_joules / J_PER_KWH, "kwh"),
        "charged_gpu_energy_kwh": fixed(usage.charged_joules / J_PER_KWH, "kwh"),
        "unallocated_gpu_energy_kwh": fixed(usage.unallocated_joules / J_PER_KWH, "kwh"),
        "measured_gpu_hours": fixed(usage.cluster_gpu_hours, "gpu_hours"),
        "charged_gpu_hours": fixed(usage.charged_gpu_hours, "gpu_hours"),
        "unallocated_gpu_hours": fixed(usage.unallocated_gpu_hours, "gpu_hours"),
        "conservation": {
            "tolerance": CONSERVATION_TOLERANCE,
            "gpu_energy_off": None if e_off is None else fixed(e_off, "ratio"),
            "gpu_hours_off": None if h_off is None else fixed(h_off, "ratio"),
            "holds": e_ok and h_ok,
        },
    }


def imbalance(doc: dict[str, Any]) -> str | None:
    """What does not add up in a usage document's ``cluster`` figures, in one line; None if it does."""
    c = doc.get("cluster")
    if not c or c["conservation"]["holds"]:
        return None
    parts = []
    for what, unit, key in (("GPU energy", "kWh", "gpu_energy_kwh"), ("GPU-hours", "GPU-hours", "gpu_hours")):
        off = c["conservation"]["gpu_energy_off" if key == "gpu_energy_kwh" else "gpu_hours_off"]
        parts.append(
            f"{what}: charged {c['charged_' + key]} + unallocated {c['unallocated_' + key]} vs measured "
            f"{c['measured_' + key]} {unit}" + ("" if off is None else f" ({off * 100:+.2f} %)")
        )
    return "; ".join(parts)


def _sums(cells: dict[Cell, float], key: Callable[[Cell], K]) -> dict[K, float]:
    """The cells' values added up by ``key``."""
    out: dict[K, float] = {}
    for cell, value in cells.items():
        out[key(cell)] = out.get(key(cell), 0.0) + value
    return out


def generator() -> str:
    return f"vigil {__version__}"


def load_allocations(path: Path, period: Period) -> tuple[dict[str, float], str]:
    """``--allocations FILE``: awarded GPU-hours per account for the period, and the file's SHA-256.

    ::

        period: 2026-10          # optional; when given it must be the report's period
        accounts:
          physics: 1200          # GPU-hours awarded
    """
    where = str(path)
    data = read_bounded(path, max_bytes=MAX_BYTES, error=ReportInputError)
    try:
        doc = load_yaml(data.decode("utf-8"), where, error=ReportInputError)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ReportInputError(where, f"not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("accounts"), dict):
        raise ReportInputError(where, "must be a mapping with `accounts:` (account: awarded GPU-hours)")
    for key in doc:
        if key not in ("period", "accounts"):
            raise ReportInputError(f"{where}: {key}", "unknown key (known: period, accounts)")
    if "period" in doc and (isinstance(doc["period"], dict | list) or str(doc["period"]) != period.label):
        raise ReportInputError(
            f"{where}: period", f"is {shown(doc['period'])}, not the report's {period.label}"
        )
    awarded: dict[str, float] = {}
    for account, value in doc["accounts"].items():
        key = f"accounts.{account}"
        if not isinstance(account, str) or not account or len(account) > 256:
            raise ReportInputError(f"{where}: {key}", "account names are text of 1 to 256 characters")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_NUMBER:
            raise ReportInputError(
                f"{where}: {key}", f"must be a number of GPU-hours (0 to 1e15), not {shown(value)}"
            )
        if value != value:  # NaN
            raise ReportInputError(f"{where}: {key}", "must be a number, not NaN")
        awarded[account] = float(value)
    return awarded, hashlib.sha256(data).hexdigest()


#: the largest billing weight a partition may have (Slurm's own weights are small factors)
MAX_WEIGHT = 1e6


@dataclass(frozen=True)
class Billing:
    """``--billing FILE``: a weight per partition, the weight of every other partition, the file's SHA-256."""

    weights: dict[str, float]
    default: float
    sha256: str

    def weight(self, partition: str) -> float:
        return self.weights.get(partition, self.default)


def _weight(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportInputError(
            f"{where}: {key}", f"must be a number (a weight, 0 to 1e6), not {shown(value)}"
        )
    if value != value:  # NaN
        raise ReportInputError(f"{where}: {key}", "must be a number, not NaN")
    if not 0 <= value <= MAX_WEIGHT:
        raise ReportInputError(f"{where}: {key}", f"must be a weight from 0 to 1e6, not {shown(value)}")
    return float(value)


def load_billing(path: Path) -> Billing:
    """``--billing FILE``: GPU-hours in a partition are billed at its weight (Slurm's TRESBillingWeights
    idea, for GPU-hours).

    ::

        partitions:
          gpu: 1.0
          gpu-a100: 2.0        # an A100 hour bills as two
        default: 1.0           # optional: the weight of a partition not named (1.0)
    """
    where = str(path)
    data = read_bounded(path, max_bytes=MAX_BYTES, error=ReportInputError)
    try:
        doc = load_yaml(data.decode("utf-8"), where, error=ReportInputError)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ReportInputError(where, f"not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), dict):
        raise ReportInputError(where, "must be a mapping with `partitions:` (partition: billing weight)")
    for key in doc:
        if key not in ("partitions", "default"):
            raise ReportInputError(f"{where}: {shown(key)}", "unknown key (known: partitions, default)")
    weights: dict[str, float] = {}
    for name, value in doc["partitions"].items():
        if not isinstance(name, str) or not name or len(name) > 256:
            raise ReportInputError(
                f"{where}: partitions.{shown(name)}", "partition names are text of 1 to 256 characters"
            )
        weights[name] = _weight(where, f"partitions.{name}", value)
    default = _weight(where, "default", doc["default"]) if "default" in doc else 1.0
    return Billing(weights, default, hashlib.sha256(data).hexdigest())


def usage_document(
    usage: Usage,
    *,
    vm_url: str,
    account: str | None = None,
    allocations: dict[str, float] | None = None,
    allocations_sha256: str | None = None,
    billing: Billing | None = None,
) -> dict[str, Any]:
    by_account: dict[str, list[tuple[str, float, float, int]]] = {}
    for acct, user in usage.pairs():
        by_account.setdefault(acct, []).append(
            (
                user,
                usage.gpu_hours.get((acct, user), 0.0),
                usage.joules.get((acct, user), 0.0),
                len(usage.jobs.get((acct, user), ())),
            )
        )
    if allocations:
        for acct in allocations:
            if account is None or acct == account:
                by_account.setdefault(acct, [])
    if account is not None and account not in by_account:
        raise ReportInputError(
            f"account {account}", f"has no GPU usage in {usage.period.label} (nothing was stored)"
        )
    active = _sums(usage.cell_active_hours, lambda c: c[0])
    in_partition = _sums(usage.cell_hours, lambda c: (c[0], c[2]))
    in_partition_j = _sums(usage.cell_joules, lambda c: (c[0], c[2]))
    in_partition_a = _sums(usage.cell_active_hours, lambda c: (c[0], c[2]))
    accounts = []
    total_h = total_j = total_a = total_billed = 0.0
    total_jobs = 0
    for acct in sorted(by_account):
        users = sorted(by_account[acct])
        hours = sum(u[1] for u in users)
        joules = sum(u[2] for u in users)
        jobs = len({j for (a, _), ids in usage.jobs.items() if a == acct for j in ids})
        total_h, total_j, total_jobs = total_h + hours, total_j + joules, total_jobs + jobs
        total_a += active.get(acct, 0.0)
        names = sorted(
            {p for a, p in in_partition if a == acct} | {p for a, p in usage.partition_jobs if a == acct}
        )
        row: dict[str, Any] = {
            "account": acct,
            "gpu_hours": fixed(hours, "gpu_hours"),
            "active_gpu_hours": fixed(active.get(acct, 0.0), "gpu_hours"),
            "gpu_energy_kwh": fixed(joules / J_PER_KWH, "kwh"),
            "jobs": jobs,
            "partitions": [
                {
                    "partition": name,
                    "gpu_hours": fixed(in_partition.get((acct, name), 0.0), "gpu_hours"),
                    "active_gpu_hours": fixed(in_partition_a.get((acct, name), 0.0), "gpu_hours"),
                    "gpu_energy_kwh": fixed(in_partition_j.get((acct, name), 0.0) / J_PER_KWH, "kwh"),
                    "jobs": len(usage.partition_jobs.get((acct, name), ())),
                }
                for name in names
            ],
            "users": [
                {
                    "user": user,
                    "gpu_hours": fixed(h, "gpu_hours"),
                    "gpu_energy_kwh": fixed(j / J_PER_KWH, "kwh"),
                    "jobs": n,
                }
                for user, h, j, n in users
            ],
        }
        if billing is not None:
            billed = 0.0
            for part in row["partitions"]:
                w = billing.weight(part["partition"])
                part["billing_weight"] = w
                part["billed_gpu_hours"] = fixed(
                    in_partition.get((acct, part["partition"]), 0.0) * w, "gpu_hours"
                )
                billed += in_partition.get((acct, part["partition"]), 0.0) * w
            row["billed_gpu_hours"] = fixed(billed, "gpu_hours")
            total_billed += billed
        if allocations is not None:
            awarded = allocations.get(acct)
            row["awarded_gpu_hours"] = None if awarded is None else fixed(awarded, "gpu_hours")
            row["balance_gpu_hours"] = None if awarded is None else fixed(awarded - hours, "gpu_hours")
        accounts.append(row)
    models: dict[str, list[float]] = {}
    for cells, i in ((usage.cell_hours, 0), (usage.cell_active_hours, 1), (usage.cell_joules, 2)):
        for cell, value in cells.items():
            if account is None or cell[0] == account:
                models.setdefault(cell[3], [0.0, 0.0, 0.0])[i] += value
    doc: dict[str, Any] = {
        "format": FORMAT,
        "kind": "usage",
        "generator": generator(),
        "period": usage.period.to_json(),
        "filter": {"account": account},
        "units": {"gpu_hours": "GPU-hours", "gpu_energy_kwh": "kWh"},
        # GPU-hours on a GPU (or MIG instance) whose engine was busy above the threshold
        "active": {"field": ACTIVE_FIELD, "fallback_field": ACTIVE_FALLBACK, "threshold": ACTIVE_THRESHOLD},
        "source": {
            "victoriametrics": vm_url,
            "hours": usage.period.hours,
            "recorded_hours": usage.recorded_hours,
            "raw_hours": usage.raw_hours,
            "hours_without_data": usage.hours_without_data,
            "raw_partial_hour_s": usage.raw_tail_s,
        },
        "accounts": accounts,
        "gpu_models": [
            {
                "model": model,
                "gpu_hours": fixed(h, "gpu_hours"),
                "active_gpu_hours": fixed(a, "gpu_hours"),
                "gpu_energy_kwh": fixed(j / J_PER_KWH, "kwh"),
            }
            for model, (h, a, j) in sorted(models.items())
        ],
        "totals": {
            "gpu_hours": fixed(total_h, "gpu_hours"),
            "active_gpu_hours": fixed(total_a, "gpu_hours"),
            "gpu_energy_kwh": fixed(total_j / J_PER_KWH, "kwh"),
            "jobs": total_jobs,
        },
    }
    doc["cluster"] = cluster_figures(usage)
    if allocations is not None:
        doc["allocations"] = {"sha256": allocations_sha256}
    if billing is not None:
        doc["totals"]["billed_gpu_hours"] = fixed(total_billed, "gpu_hours")
        doc["billing"] = {"sha256": billing.sha256, "default_weight": billing.default}
    return doc


def energy_document(
    *,
    site: Site,
    fields: FieldList,
    period: Period,
    readings: dict[str, list[MeterReading]],
    gpu: Usage | None,
    gpu_monthly_joules: dict[str, float],
    gpu_note: str | None,
    vm_url: str,
    year: Any = None,
) -> dict[str, Any]:
    """``year``: the months' sources (a :class:`vigil.installer.reports.closing.Year`), if known."""
    missing: list[dict[str, str]] = []
    information = {}
    for f in fields.information:
        if f.key in site.information:
            information[f.key] = {"value": site.information[f.key], "reference": f.reference}
        elif f.mandatory:
            missing.append({"field": f.key, "reference": f.reference})
    point = "e_it_measurement_point"
    if site.information.get(point) == "specified" and f"{point}_description" not in site.information:
        ref = next(f.reference for f in fields.information if f.key == f"{point}_description")
        missing.append({"field": f"{point}_description", "reference": ref})
    values: dict[str, float] = {}
    kpis: dict[str, Any] = {}
    for k in fields.kpis:
        source = k.source
        got = readings.get(k.meter or "") if k.source == "measured" else None
        if got is not None:
            values[k.key] = sum(r.kwh for r in got)
        elif k.key in site.declared and (k.source == "declared" or k.declarable):
            values[k.key] = site.declared[k.key]
            source = "declared"
        elif k.parts and all(p in site.declared for p in k.parts):
            values[k.key] = sum(site.declared[p] for p in k.parts)
            source = "declared: sum of " + " + ".join(k.parts)
        else:
            if k.mandatory:
                if k.source == "measured":
                    where = f"meters.{k.meter}" + (f" or declared.{k.key}" if k.declarable else "")
                else:
                    where = k.site_key or f"declared.{k.key}"
                missing.append({"field": k.key, "reference": k.reference, "site_key": where})
            continue
        kpis[k.key] = {
            "value": fixed(values[k.key], "kwh" if k.unit == "kWh" else "declared"),
            "unit": k.unit,
            "source": source,
            "reference": k.reference,
        }
        if k.act_unit is not None:
            kpis[k.key]["act_value"] = fixed(values[k.key] * k.act_factor, "declared")
            kpis[k.key]["act_unit"] = k.act_unit
    indicators: dict[str, Any] = {}
    for ind in fields.indicators:
        entry: dict[str, Any] = {"unit": ind.unit, "reference": ind.reference, "formula": ind.title}
        num, den = values.get(ind.numerator), values.get(ind.denominator)
        if num is None or den is None:
            entry["value"] = None
            entry["missing"] = [n for n, v in ((ind.numerator, num), (ind.denominator, den)) if v is None]
        elif den == 0:
            entry["value"] = None
            entry["undefined"] = f"{ind.denominator} is 0"
        else:
            entry["value"] = fixed(num * ind.factor / den, ind.decimals)
        indicators[ind.key] = entry
    meters = {
        name: [
            {
                "selector": r.meter.selector,
                "unit": r.meter.unit,
                "series": r.series,
                "resets": r.resets,
                "kwh": fixed(r.kwh, "kwh"),
                "coverage": fixed(min(r.covered_s / max(period.end - period.start, 1), 1.0), "ratio"),
            }
            for r in got
        ]
        for name, got in sorted(readings.items())
    }
    months = [m.label for m in period.months()]
    monthly = []
    for label in months:
        row: dict[str, Any] = {"month": label}
        for k in fields.kpis:
            if k.meter and k.meter in readings:
                row[k.key] = fixed(sum(r.monthly_kwh.get(label, 0.0) for r in readings[k.meter]), "kwh")
        if gpu is not None:
            row["gpu_energy_kwh"] = fixed(gpu_monthly_joules.get(label, 0.0) / J_PER_KWH, "kwh")
        monthly.append(row)
    operator: dict[str, Any] = {"monthly": monthly}
    if gpu is None:
        operator["gpu"] = None
        operator["gpu_note"] = gpu_note
    else:
        per_account: dict[str, float] = {}
        for (acct, _), joules in gpu.joules.items():
            per_account[acct] = per_account.get(acct, 0.0) + joules
        gpu_kwh = gpu.cluster_joules / J_PER_KWH
        it = values.get("it_energy_kwh")
        operator["gpu"] = {
            "gpu_energy_kwh": fixed(gpu_kwh, "kwh"),
            "unallocated_gpu_energy_kwh": fixed(gpu.unallocated_joules / J_PER_KWH, "kwh"),
            "gpu_energy_kwh_by_account": [
                {"account": a, "gpu_energy_kwh": fixed(j / J_PER_KWH, "kwh")}
                for a, j in sorted(per_account.items())
            ],
            "gpu_share_of_it_energy": fixed(gpu_kwh / it, "ratio") if it else None,
            "cluster": cluster_figures(gpu),
            "recorded_hours": gpu.recorded_hours,
            "raw_hours": gpu.raw_hours,
            "hours_without_data": gpu.hours_without_data,
        }
    doc: dict[str, Any] = {
        "format": FORMAT,
        "kind": "energy",
        "generator": generator(),
        "act": fields.act,
        "period": period.to_json(),
        "source": {"victoriametrics": vm_url},
        "site": information,
        "kpis": kpis,
        "indicators": indicators,
        "missing": missing,
        "meters": meters,
        "operator": operator,
    }
    if year is not None:
        doc["months"] = {
            "sources": year.months,
            "missing": year.missing,
            "differences": year.differences,
        }
    return doc
