"""Reports for auditors: usage (chargeback) and energy (Article 12), signed and stored; list, show,
verify and export them (docs/reports.md)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.basics.errors import UsageError
from vigil.installer.access import SiteAccess, site_access
from vigil.installer.audit import AuditError, AuditLog
from vigil.installer.ops._invocation import Invocation
from vigil.installer.reports import (
    ReportInputError,
    ReportStore,
    Stored,
    Usage,
    Verified,
    VictoriaMetrics,
    clip_to_now,
    collect,
    energy_document,
    export_report,
    field_list,
    load_allocations,
    load_pub,
    load_site,
    parse_period,
    parse_range,
    read_meter,
    report_key,
    usage_document,
    verify_file,
    verify_report,
    year_period,
)
from vigil.installer.reports.period import Period

DEFAULT_VM_PORT = 8428


@dataclass(frozen=True)
class Generated:
    """A report made and stored: where, and its document (for the front end's summary)."""

    stored: Stored
    doc: dict[str, Any]
    key_id: str


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def _generated_at(now: float | None) -> str:
    return datetime.fromtimestamp(_now(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resolve_vm(home: Path, given: str | None, access: SiteAccess | None = None) -> str:
    """The VictoriaMetrics to read: ``--vm``, else the monitoring host of the last successful deploy
    recorded in the audit log (its ``ansible_host`` and ``victoriametrics_port``), over https when
    the site has TLS (ACCESS, else read from HOME)."""
    if given:
        return given
    how = "pass --vm URL (or set VIGIL_VM_URL)"
    inventory: str | None = None
    try:
        for rec in AuditLog(home).records(action="deploy"):
            if rec.get("outcome") == "ok" and not (rec.get("details") or {}).get("check"):
                inventory = str(rec.get("object") or "") or inventory
    except (AuditError, OSError):
        inventory = None
    if not inventory:
        raise ReportInputError("--vm", f"not given, and no successful deploy is recorded here; {how}")
    try:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager

        loader = DataLoader()
        manager = InventoryManager(loader=loader, sources=[inventory])
        hosts = manager.groups["monitoring"].get_hosts() if "monitoring" in manager.groups else []
        if not hosts:
            raise ReportInputError(
                "--vm", f"the deployed inventory {inventory} has no monitoring host; {how}"
            )
        hvars = VariableManager(loader=loader, inventory=manager).get_vars(host=hosts[0])
        address = str(hvars.get("ansible_host") or hosts[0].name)
        port = int(hvars.get("victoriametrics_port", DEFAULT_VM_PORT))
    except ReportInputError:
        raise
    except Exception as exc:  # Ansible's errors are many; any of them means "cannot tell"
        raise ReportInputError(
            "--vm", f"cannot read the deployed inventory {inventory} ({exc}); {how}"
        ) from None
    return (site_access(home) if access is None else access).url(address, port)


def victoriametrics(home: Path, given: str | None) -> VictoriaMetrics:
    """The client of the VictoriaMetrics to read (:func:`resolve_vm`), with the site's CA and API
    login, also for a ``--vm`` given by hand."""
    access = site_access(home)
    return VictoriaMetrics(resolve_vm(home, given, access), access=access)


def _period(
    period: str | None, first: str | None, last: str | None, now: float | None, timezone: str = "UTC"
) -> Period:
    if period and (first or last):
        raise UsageError("vigil report usage", "give --period or --from/--to, not both")
    if period:
        p = parse_period(period, timezone)
    elif first and last:
        p = parse_range(first, last, timezone)
    else:
        raise UsageError("vigil report usage", "give --period P, or both --from and --to")
    return clip_to_now(p, _now(now))


def report_usage(
    inv: Invocation,
    *,
    period: str | None = None,
    first: str | None = None,
    last: str | None = None,
    account: str | None = None,
    allocations: Path | None = None,
    vm: str | None = None,
    now: float | None = None,
    timezone: str = "UTC",
) -> Generated:
    """``report.usage``: GPU-hours, GPU energy and jobs per account and user over a period (its days
    begin at midnight in ``timezone``), signed and stored. Refused, with nothing stored, when
    VictoriaMetrics cannot be read or has no data."""
    p = _period(period, first, last, now, timezone)
    inv.object = f"usage {p.label}"
    if account is not None and (not account or len(account) > 256 or not account.isprintable()):
        raise ReportInputError(f"--account {account!r}", "must be 1 to 256 printable characters")
    awarded, awarded_sha = load_allocations(allocations, p) if allocations else (None, None)
    client = victoriametrics(inv.home, vm)
    inv.details.update(period=p.label, start=p.start, end=p.end, account=account, vm=client.url)
    inv.step(f"reading {client.name} for {p.label}")
    usage = collect(client, p, account=account, progress=inv.step)
    doc = usage_document(
        usage, vm_url=client.url, account=account, allocations=awarded, allocations_sha256=awarded_sha
    )
    return _store(inv, doc, now)


def report_energy(
    inv: Invocation,
    *,
    year: str,
    site: Path,
    vm: str | None = None,
    strict: bool = False,
    now: float | None = None,
    timezone: str | None = None,
) -> Generated:
    """``report.energy``: the data centre's yearly energy report (Directive (EU) 2023/1791 Art. 12,
    Delegated Regulation (EU) 2024/1364): measured E_IT and E_DC from the site's meters, declared
    values from site.yaml, PUE/WUE/ERF/REF, and every mandatory field that is missing, named.
    ``strict``: refuse (nothing stored) when any is missing."""
    if not str(year).isdigit() or len(str(year)) != 4:
        raise ReportInputError(f"--year {year}", "give a year YYYY")
    fields = field_list()
    parsed = load_site(site, fields)
    if timezone is not None and parsed.timezone != "UTC" and timezone != parsed.timezone:
        raise ReportInputError(
            f"--timezone {timezone}", f"{site} names the time zone {parsed.timezone}; give one of them"
        )
    p = clip_to_now(year_period(year, timezone or parsed.timezone), _now(now))
    inv.object = f"energy {p.label}"
    client = victoriametrics(inv.home, vm)
    inv.details.update(period=p.label, site=str(site), vm=client.url, strict=strict)
    readings = {}
    for name, meters in parsed.meters.items():
        readings[name] = [
            read_meter(client, meter, p, where=f"{site}: meters.{name}[{i}]", progress=inv.step)
            for i, meter in enumerate(meters)
        ]
    gpu, monthly, gpu_note = _gpu_by_month(client, p, inv)
    doc = energy_document(
        site=parsed,
        fields=fields,
        period=p,
        readings=readings,
        gpu=gpu,
        gpu_monthly_joules=monthly,
        gpu_note=gpu_note,
        vm_url=client.url,
    )
    inv.details["missing"] = [m["field"] for m in doc["missing"]]
    if strict and doc["missing"]:
        names = ", ".join(m["field"] for m in doc["missing"])
        raise ReportInputError(str(site), f"--strict: mandatory fields missing: {names}; nothing was stored")
    return _store(inv, doc, now)


def _gpu_by_month(
    client: VictoriaMetrics, p: Period, inv: Invocation
) -> tuple[Usage | None, dict[str, float], str | None]:
    """GPU energy per account over the year and every GPU's energy per month; a month without GPU
    data counts as hours without data, a year without any gives None and why."""
    total = Usage(p)
    monthly: dict[str, float] = {}
    seen = False
    for month in p.months():
        inv.step(f"GPU energy {month.label}")
        try:
            part = collect(client, month, jobs=False)
        except ReportInputError:
            total.hours_without_data += month.hours
            continue
        seen = True
        monthly[month.label] = part.cluster_joules
        total.merge(part)
    if not seen:
        return None, {}, f"no GPU data in {client.name} in {p.label}"
    return total, monthly, None


def _store(inv: Invocation, doc: dict[str, Any], now: float | None) -> Generated:
    store = ReportStore(inv.home)
    stored = store.add(doc, generated_at=_generated_at(now))
    key = report_key(store.dir, create=False)
    inv.details.update(
        sha256=stored.sha256, id=stored.id, kind=stored.kind, key_id=key.id_hex, new=stored.new
    )
    inv.object = str(stored.json_path)
    return Generated(stored, doc, key.id_hex)


def report_list(inv: Invocation) -> list[dict[str, Any]]:
    """``report.list``: the index, one entry per generation, in order."""
    store = ReportStore(inv.home)
    inv.object = str(store.index)
    entries = store.entries()
    inv.details["listed"] = len(entries)
    return entries


def report_show(inv: Invocation, ident: str) -> tuple[Stored, bytes]:
    """``report.show``: a stored report's canonical JSON."""
    stored = ReportStore(inv.home).find(ident)
    inv.object = str(stored.json_path)
    inv.details.update(sha256=stored.sha256)
    return stored, stored.json_path.read_bytes()


def report_verify(inv: Invocation, file: Path, *, pub: Path | None = None) -> Verified:
    """``report.verify``: FILE against FILE.minisig and the report public key (this appliance's own,
    or ``pub``): signature, canonical form, and the digest the signature names; then each rendering
    beside it (report.csv, report.pdf): its signature, and that its signed comment names FILE's digest."""
    inv.object = str(file)
    store = ReportStore(inv.home)
    key_path = pub or store.public_key_path
    if pub is None and not os.path.lexists(key_path):
        raise ReportInputError(str(file), f"no report key on this host ({key_path}); pass --pub report.pub")
    verified = verify_report(file, load_pub(key_path))
    inv.details.update(
        sha256=verified.sha256,
        key_id=verified.key_id,
        pub=str(key_path),
        renderings=[p.name for p in verified.renderings],
    )
    return verified


def report_export(inv: Invocation, ident: str, out: Path) -> Path:
    """``report.export``: report.json, report.csv, report.pdf, their signatures, report.pub and a
    README into the new directory OUT; each rendering must be bound to the JSON it leaves beside."""
    store = ReportStore(inv.home)
    stored = store.find(ident)
    key = report_key(store.dir, create=False)
    inv.object = str(out)
    inv.details.update(sha256=stored.sha256, key_id=key.id_hex)
    verify_file(stored.json_path, key.public)  # what leaves the appliance is what it signed
    return export_report(stored, store.public_key_path, key.id_hex, out)
