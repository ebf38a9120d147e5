"""Reports for auditors: usage (chargeback) and energy (Article 12), signed and stored; list, show,
verify and export them (docs/reports.md)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.basics.bounded import load_json
from vigil.basics.errors import UsageError
from vigil.installer.access import SiteAccess, site_access
from vigil.installer.audit import AuditError, AuditLog
from vigil.installer.ops._invocation import Invocation
from vigil.installer.reports import (
    ReportInputError,
    ReportStore,
    Stored,
    Verified,
    VictoriaMetrics,
    clip_to_now,
    collect,
    energy_document,
    export_report,
    field_list,
    imbalance,
    load_allocations,
    load_billing,
    load_pub,
    load_site,
    parse_period,
    parse_range,
    report_key,
    usage_document,
    verify_file,
    verify_report,
    year_period,
)
from vigil.installer.reports.closing import (
    KIND as CLOSING,
)
from vigil.installer.reports.closing import (
    Closing,
    assemble,
    closing_document,
    ended_months,
    has_samples,
    parse_closing,
    read_month,
    remember_site,
    remembered_site,
)
from vigil.installer.reports.errors import ReportError
from vigil.installer.reports.metered import load_sacct, reconciliation
from vigil.installer.reports.period import Period, in_progress_end
from vigil.installer.reports.site import Site
from vigil.installer.reports.store import JSON_NAME
from vigil.installer.stack import split_urls

DEFAULT_VM_PORT = 8428
DEFAULT_ALERTMANAGER_PORT = 9093


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


def last_deployed_inventory(home: Path, *, ok_only: bool = True) -> str | None:
    """The inventory of the last deploy the audit log records (only one that succeeded and was not a
    --check, with ``ok_only``); None when there is none or the log cannot be read."""
    inventory: str | None = None
    try:
        for rec in AuditLog(home).records(action="deploy"):
            if ok_only and (rec.get("outcome") != "ok" or (rec.get("details") or {}).get("check")):
                continue
            inventory = str(rec.get("object") or "") or inventory
    except (AuditError, OSError):
        return None
    return inventory


def resolve_vm(home: Path, given: str | Sequence[str] | None, access: SiteAccess | None = None) -> list[str]:
    """The VictoriaMetrics replicas to read, in the order to try them: ``--vm`` (given more than
    once, or a comma-separated list as ``$VIGIL_VM_URL`` holds), else every host of the
    ``monitoring`` group of the last successful deploy recorded in the audit log, in the
    inventory's order (each its ``ansible_host`` and ``victoriametrics_port``), over https when the
    site has TLS (ACCESS, else read from HOME)."""
    urls = split_urls(given)
    if urls:
        return urls
    how = "pass --vm URL (or set VIGIL_VM_URL)"
    inventory = last_deployed_inventory(home)
    if not inventory:
        raise ReportInputError("--vm", f"not given, and no successful deploy is recorded here; {how}")
    try:
        places = monitoring_places(inventory)
    except UsageError as exc:
        raise ReportInputError("--vm", f"the deployed inventory {inventory}: {exc.reason}; {how}") from None
    access = site_access(home) if access is None else access
    return list(dict.fromkeys(access.url(p.address, p.vm_port) for p in places))


@dataclass(frozen=True)
class MonitoringHost:
    """A host of the inventory's ``monitoring`` group: its address and its services' ports."""

    name: str
    address: str
    vm_port: int
    alertmanager_port: int


def monitoring_places(inventory: str | Path) -> list[MonitoringHost]:
    """The ``monitoring`` group of INVENTORY in its order, as the roles see it (``ansible_host``,
    ``victoriametrics_port``, ``alertmanager_port``). Raises UsageError naming the inventory when
    it cannot be read or has no monitoring host."""
    try:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager

        loader = DataLoader()
        manager = InventoryManager(loader=loader, sources=[str(inventory)])
        hosts = manager.groups["monitoring"].get_hosts() if "monitoring" in manager.groups else []
        variables = VariableManager(loader=loader, inventory=manager)
        places = []
        for host in hosts:
            hvars = variables.get_vars(host=host)
            places.append(
                MonitoringHost(
                    host.name,
                    str(hvars.get("ansible_host") or host.name),
                    int(hvars.get("victoriametrics_port", DEFAULT_VM_PORT)),
                    int(hvars.get("alertmanager_port", DEFAULT_ALERTMANAGER_PORT)),
                )
            )
    except Exception as exc:  # Ansible's errors are many; any of them means "cannot tell"
        raise UsageError(str(inventory), f"cannot read the inventory ({exc})") from None
    if not places:
        raise UsageError(str(inventory), "the inventory has no monitoring host")
    return places


def victoriametrics(home: Path, given: str | Sequence[str] | None) -> VictoriaMetrics:
    """The client of the VictoriaMetrics replicas to read (:func:`resolve_vm`), with the site's CA
    and API login, also for a ``--vm`` given by hand."""
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
    billing: Path | None = None,
    vm: str | Sequence[str] | None = None,
    now: float | None = None,
    timezone: str = "UTC",
    sacct: Path | None = None,
) -> Generated:
    """``report.usage``: GPU-hours, GPU energy and jobs per account and user over a period (its days
    begin at midnight in ``timezone``), signed and stored. Refused, with nothing stored, when
    VictoriaMetrics cannot be read or has no data. ``sacct``: Slurm's accounting for the period
    (docs/reports.md, "Reconciliation with Slurm"), reconciled with the meters in the report."""
    p = _period(period, first, last, now, timezone)
    inv.object = f"usage {p.label}"
    if account is not None and (not account or len(account) > 256 or not account.isprintable()):
        raise ReportInputError(f"--account {account!r}", "must be 1 to 256 printable characters")
    awarded, awarded_sha = load_allocations(allocations, p) if allocations else (None, None)
    weights = load_billing(billing) if billing else None
    slurm = load_sacct(sacct) if sacct else None
    client = victoriametrics(inv.home, vm)
    inv.details.update(period=p.label, start=p.start, end=p.end, account=account, vm=", ".join(client.urls))
    inv.step(f"reading VictoriaMetrics {', '.join(client.urls)} for {p.label}")
    usage = collect(client, p, account=account, progress=inv.step)
    doc = usage_document(
        usage,
        vm_url=client.source,
        account=account,
        allocations=awarded,
        allocations_sha256=awarded_sha,
        billing=weights,
    )
    if slurm is not None:
        inv.step(f"reconciling with Slurm's accounting ({sacct})")
        doc["reconciliation"] = reconciliation(
            client, p, slurm[0], sha256=slurm[1], now=int(_now(now)), account=account, progress=inv.step
        )
        inv.details["jobs_differing"] = doc["reconciliation"]["totals"]["jobs_differing"]
    # stored and signed all the same, with `cluster.conservation.holds: false` in it: the figures
    # are what the series say, and the document says they do not add up (the CLI says it too)
    inv.details["conservation_holds"] = doc["cluster"]["conservation"]["holds"]
    if (off := imbalance(doc)) is not None:
        inv.details["imbalance"] = off
    return _store(inv, doc, now)


def report_energy(
    inv: Invocation,
    *,
    year: str,
    site: Path,
    vm: str | Sequence[str] | None = None,
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
    inv.details.update(period=p.label, site=str(site), vm=", ".join(client.urls), strict=strict)
    store = ReportStore(inv.home)
    if p.timezone == parsed.timezone:
        # close the months that ended since the last report: their samples will not last
        closed = close_months(inv, client, parsed, now=now)
        inv.details["closed"] = [c.label for c in closed]
    closings = stored_closings(store, parsed, p.timezone)
    year_data = assemble(client, parsed, p, closings, progress=inv.step)
    doc = energy_document(
        site=parsed,
        fields=fields,
        period=p,
        readings=year_data.readings,
        gpu=year_data.gpu,
        gpu_monthly_joules=year_data.gpu_monthly_joules,
        gpu_note=None if year_data.gpu is not None else f"no GPU data in {client.name} in {p.label}",
        vm_url=client.source,
        year=year_data,
    )
    inv.details["missing"] = [m["field"] for m in doc["missing"]]
    inv.details["missing_months"] = year_data.missing
    if strict:
        problems = []
        if doc["missing"]:
            problems.append("mandatory fields missing: " + ", ".join(m["field"] for m in doc["missing"]))
        if year_data.missing:
            problems.append("months without samples or a closing: " + ", ".join(year_data.missing))
        if year_data.differences:
            problems.append(
                "samples and closings differ: "
                + ", ".join(f"{d['month']} {d['what']}" for d in year_data.differences)
            )
        if not p.complete:
            problems.append(f"the year {p.label} is not over")
        if problems:
            raise ReportInputError(str(site), f"--strict: {'; '.join(problems)}; nothing was stored")
    return _store(inv, doc, now)


def stored_closings(store: ReportStore, site: Site, timezone: str) -> dict[str, Closing]:
    """The newest stored closing of each month made for these meters in this time zone, each
    checked against the appliance's report key before it is used."""
    out: dict[str, Closing] = {}
    entries = [e for e in store.entries() if e.get("kind") == CLOSING]
    if not entries:
        return out
    key = report_key(store.dir, create=False)
    for entry in entries:
        path = store.objects / entry["sha256"] / JSON_NAME
        verify_file(path, key.public)
        doc = load_json(path.read_bytes(), str(path), error=ReportError)
        closing = parse_closing(doc, entry["sha256"], site, timezone, str(path))
        if closing is not None:
            out[closing.label] = closing
    return out


def close_months(
    inv: Invocation,
    client: VictoriaMetrics,
    site: Site,
    *,
    months: list[Period] | None = None,
    now: float | None = None,
) -> list[Stored]:
    """Close ``months`` (default: every whole month of the retention window that ended and has no
    closing for these meters yet): read, sign and store each one that has samples."""
    store = ReportStore(inv.home)
    if months is None:
        have = stored_closings(store, site, site.timezone)
        months = [m for m in ended_months(site.timezone, _now(now)) if m.label not in have]
    out = []
    for month in months:
        inv.step(f"closing {month.label}")
        meters, gpu = read_month(client, site, month, progress=inv.step)
        if not has_samples(meters) and gpu is None:
            continue
        doc = closing_document(site=site, month=month, meters=meters, gpu=gpu, vm_url=client.source)
        out.append(store.add(doc, generated_at=_generated_at(now)))
    if store.dir.is_dir():
        remember_site(store.dir, site)
    return out


def report_close(
    inv: Invocation,
    *,
    site: Path | None = None,
    months: list[str] | None = None,
    vm: str | Sequence[str] | None = None,
    now: float | None = None,
) -> list[Stored]:
    """``report.close``: sign and store the meter closing of each of ``months`` (months that are
    over), or of every month that ended within the retention window and has none yet. The meters
    come from ``site``, or from the site.yaml the last energy report or closing used."""
    if site is not None:
        parsed = load_site(site, field_list())
    else:
        remembered = remembered_site(ReportStore(inv.home).dir)
        if remembered is None:
            raise ReportInputError(
                "--site", "not given, and no site.yaml was used here before; give --site FILE"
            )
        parsed = remembered
    inv.object = f"closing {','.join(months) if months else 'due'}"
    periods = None
    if months:
        periods = []
        for month in months:
            if not re.fullmatch(r"\d{4}-\d{2}", month):
                raise ReportInputError(f"--month {month}", "give one month YYYY-MM")
            p = parse_period(month, parsed.timezone)
            if p.end > in_progress_end(_now(now)):
                raise ReportInputError(
                    f"--month {month}", "is not over yet; a month is closed once it has ended"
                )
            periods.append(p)
    client = victoriametrics(inv.home, vm)
    inv.details.update(site=str(parsed.path), vm=", ".join(client.urls), months=months)
    closed = close_months(inv, client, parsed, months=periods, now=now)
    inv.details["closed"] = [c.label for c in closed]
    inv.details["sha256"] = [c.sha256 for c in closed]
    return closed


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
