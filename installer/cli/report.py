"""`vigil report` subcommands: usage, energy, close, list, show, verify, export."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from vigil.basics.errors import UsageError
from vigil.installer import ops
from vigil.installer.cli._output import ok, say, showing_progress

FORMATS = ("json", "csv", "pdf")


def _formats(text: str) -> list[str]:
    chosen = [f.strip().lower() for f in text.split(",") if f.strip()]
    for f in chosen:
        if f not in FORMATS:
            raise UsageError(f"--format {f}", f"unknown format (known: {', '.join(FORMATS)})")
    if not chosen:
        raise UsageError("--format", "give one or more of json, csv, pdf (e.g. json,pdf)")
    return chosen


def _vm_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vm",
        metavar="URL",
        action="append",
        help="VictoriaMetrics to read; give it again for each replica, in the order to try them: a "
        "replica that is down, fails or answers 5xx is passed over for the next (default "
        "$VIGIL_VM_URL, a comma-separated list, else every monitoring host of the last successful "
        "`vigil deploy` recorded in the audit log, port victoriametrics_port)",
    )
    p.add_argument(
        "--format",
        default="json",
        metavar="LIST",
        help="what to print the stored path of, comma-separated: json, csv, pdf (default json; the JSON's "
        "path is always the last line). All three are always stored and signed",
    )


def _vm(args: argparse.Namespace) -> list[str] | str | None:
    """The replicas given with --vm, else $VIGIL_VM_URL's (the reports split a comma-separated list)."""
    return list(args.vm) if args.vm else os.environ.get("VIGIL_VM_URL")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "report",
        help="signed usage and energy reports for auditors",
        description="Usage (GPU-hours and GPU energy per account and user) and energy (Directive (EU) "
        "2023/1791 Art. 12) reports, read from VictoriaMetrics, written as canonical JSON, CSV and PDF, "
        "signed with the appliance's report key ($VIGIL_HOME/reports/key/, made on first use) in "
        "minisign's format and stored under $VIGIL_HOME/reports/ by SHA-256. See docs/reports.md.",
    )
    rsub = p.add_subparsers(dest="report_command", metavar="SUBCOMMAND", parser_class=type(p))
    rsub.required = True

    usage = rsub.add_parser(
        "usage",
        help="GPU-hours, GPU energy and jobs per account and user over a period",
        description="Per account and per user: GPU-hours, GPU energy (kWh) and jobs over a period whose "
        "days begin at midnight UTC, or in --timezone (a job crossing a boundary is split there). "
        "Reads the accounting recording rules where they cover the period and the raw DCGM and "
        "slurm_job_info series where they do not. Nothing is "
        "stored when VictoriaMetrics cannot be read or holds no GPU data for the period.",
    )
    usage.add_argument("--period", metavar="P", help="YYYY-MM, YYYY-Qn or YYYY")
    usage.add_argument("--from", dest="first", metavar="DAY", help="first day YYYY-MM-DD (with --to)")
    usage.add_argument("--to", dest="last", metavar="DAY", help="last day YYYY-MM-DD, included")
    usage.add_argument("--account", metavar="A", help="only this account")
    usage.add_argument(
        "--timezone",
        metavar="ZONE",
        default="UTC",
        help="IANA time zone whose midnights bound the period, e.g. Europe/Berlin (default UTC)",
    )
    usage.add_argument(
        "--allocations",
        metavar="FILE",
        type=Path,
        help="YAML `accounts: {ACCOUNT: awarded GPU-hours}`: adds awarded and balance per account",
    )
    usage.add_argument(
        "--billing",
        metavar="FILE",
        type=Path,
        help="YAML `partitions: {PARTITION: weight}` (and `default: weight`, 1.0 if not given): adds billed "
        "GPU-hours per account, each partition's GPU-hours times its weight",
    )
    usage.add_argument(
        "--sacct",
        metavar="FILE",
        type=Path,
        help="Slurm's accounting for the period, as `SLURM_TIME_FORMAT=%%s sacct --allusers --allocations "
        "--parsable2 --noheader -S START -E END --format=JobIDRaw,Account,User,Partition,AllocTRES,Start,End,"
        "State,NodeList` prints it on the controller: adds the reconciliation, Slurm's GPU-hours beside the "
        "meters' per account, and the jobs where they differ with why where known",
    )
    _vm_option(usage)
    usage.set_defaults(func=usage_handler, action="report.usage")

    energy = rsub.add_parser(
        "energy",
        help="the data centre's yearly energy report (EED Article 12)",
        description="E_IT and E_DC from the meters site.yaml names (counter resets counted), the declared "
        "values, PUE, WUE, ERF and REF, each with its legal reference, and `missing`: every mandatory "
        "field site.yaml does not give. With --strict, any missing field fails and nothing is stored.",
    )
    energy.add_argument(
        "--year", required=True, metavar="YYYY", help="the calendar year (UTC, or site.yaml's `timezone`)"
    )
    energy.add_argument(
        "--timezone",
        metavar="ZONE",
        help="IANA time zone of the year's midnights (default: site.yaml's, or UTC)",
    )
    energy.add_argument(
        "--site", required=True, type=Path, metavar="FILE", help="site.yaml (docs/reports.md)"
    )
    energy.add_argument("--strict", action="store_true", help="fail when a mandatory field is missing")
    _vm_option(energy)
    energy.set_defaults(func=energy_handler, action="report.energy")

    close = rsub.add_parser(
        "close",
        help="sign and store the meter closing of months that ended",
        description="A month's meter closing: each site.yaml meter's counter increase over the month "
        "(resets counted), its coverage, and the GPUs' energy and GPU-hours per account, signed and stored "
        "like the reports, so that the yearly energy report survives VictoriaMetrics' retention. Without "
        "--month, every month that ended within the retention window and has no closing yet (what "
        "`vigil report energy` also does first; run it monthly from a timer). See docs/reports.md.",
    )
    close.add_argument(
        "--month",
        metavar="YYYY-MM",
        action="append",
        help="close this month (it must be over), again if it was closed before; repeat for several",
    )
    close.add_argument(
        "--site",
        type=Path,
        metavar="FILE",
        help="site.yaml whose meters to close (default: the one the last energy report or closing used)",
    )
    close.add_argument(
        "--vm",
        metavar="URL",
        action="append",
        help="VictoriaMetrics to read, again for each replica (default as for `vigil report usage`)",
    )
    close.set_defaults(func=close_handler, action="report.close")

    lst = rsub.add_parser(
        "list",
        help="list stored reports",
        description="One line per generation from $VIGIL_HOME/reports/index.jsonl: id, kind, period, "
        "when generated, key.",
    )
    lst.set_defaults(func=list_handler, action="report.list")

    show = rsub.add_parser(
        "show",
        help="print a stored report's JSON",
        description="Print the canonical JSON of a stored report.",
    )
    show.add_argument("id", metavar="ID", help="the report's SHA-256 or a unique prefix (6+ hex digits)")
    show.set_defaults(func=show_handler, action="report.show")

    verify = rsub.add_parser(
        "verify",
        help="check a report's signature and the CSV and PDF beside it",
        description="Check FILE against FILE.minisig with the report public key: the signature, that FILE "
        "is canonical JSON, and that the signature names its SHA-256. Then each rendering beside it "
        "(report.csv, report.pdf): its signature, and that the signature's trusted comment names FILE's "
        "SHA-256 (a rendering of another report fails). `minisign -V -m FILE -x FILE.minisig -p "
        "report.pub` checks one signature without vigil.",
    )
    verify.add_argument("file", metavar="FILE", type=Path, help="report.json")
    verify.add_argument(
        "--pub", type=Path, metavar="PUB", help="report public key (default: this appliance's own)"
    )
    verify.set_defaults(func=verify_handler, action="report.verify")

    exp = rsub.add_parser(
        "export",
        help="copy a report with its signatures, public key and a README",
        description="Write report.json, report.csv, report.pdf, their .minisig files, report.pub and "
        "README.txt (the verification commands) into the new directory DIR. Each rendering must be bound "
        "to the JSON (its signature names the JSON's SHA-256), else nothing is written.",
    )
    exp.add_argument("id", metavar="ID", help="the report's SHA-256 or a unique prefix")
    exp.add_argument("--out", metavar="DIR", type=Path, required=True, help="directory to create")
    exp.set_defaults(func=export_handler, action="report.export")


def _finish(gen: ops.Generated, formats: list[str], table: list[str]) -> int:
    say(*table)  # accounts, users and sites as the stored series name them: escapes shown
    s = gen.stored
    state = "stored" if s.new else "already stored (same data)"
    ok(f"{s.kind} report {s.label}", f"sha256 {s.sha256}, {state}, signed by key {gen.key_id}")
    if "csv" in formats:
        print(s.csv_path)
    if "pdf" in formats:
        print(s.pdf_path)
    print(s.json_path)  # always the last line
    return 0


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:,.2f}" if isinstance(value, float) else str(value)


def usage_table(doc: dict[str, Any]) -> list[str]:
    lines = [f"usage {doc['period']['label']} ({doc['period']['start']} .. {doc['period']['end']})"]
    head = f"{'account':<20} {'user / [partition]':<16} {'GPU-hours':>12} {'active':>12} {'GPU kWh':>12}"
    head += f" {'jobs':>6}"
    alloc = "allocations" in doc
    billed = "billing" in doc
    lines.append(
        head + (f" {'awarded':>12} {'balance':>12}" if alloc else "") + (f" {'billed':>12}" if billed else "")
    )
    for a in doc["accounts"]:
        figures = (
            f"{_fmt(a['gpu_hours']):>12} {_fmt(a.get('active_gpu_hours')):>12} "
            f"{_fmt(a['gpu_energy_kwh']):>12} {a['jobs']:>6}"
        )
        line = f"{a['account']:<20} {'':<16} {figures}"
        if alloc:
            line += f" {_fmt(a['awarded_gpu_hours']):>12} {_fmt(a['balance_gpu_hours']):>12}"
        if billed:
            line += f" {_fmt(a['billed_gpu_hours']):>12}"
        lines.append(line)
        for p in a.get("partitions", []):
            figures = (
                f"{_fmt(p['gpu_hours']):>12} {_fmt(p['active_gpu_hours']):>12} "
                f"{_fmt(p['gpu_energy_kwh']):>12} {p['jobs']:>6}"
            )
            lines.append(f"{'':<20} {'[' + p['partition'] + ']':<16} {figures}")
        for u in a["users"]:
            figures = f"{_fmt(u['gpu_hours']):>12} {'':>12} {_fmt(u['gpu_energy_kwh']):>12} {u['jobs']:>6}"
            lines.append(f"{'':<20} {u['user']:<16} {figures}")
    t = doc["totals"]
    lines.append(
        f"{'total':<20} {'':<16} {_fmt(t['gpu_hours']):>12} {_fmt(t.get('active_gpu_hours')):>12} "
        f"{_fmt(t['gpu_energy_kwh']):>12} {t['jobs']:>6}"
    )
    for m in doc.get("gpu_models", []):
        lines.append(
            f"{'GPU model':<20} {m['model'] or '(none)':<16} {_fmt(m['gpu_hours']):>12} "
            f"{_fmt(m['active_gpu_hours']):>12} {_fmt(m['gpu_energy_kwh']):>12}"
        )
    src = doc["source"]
    tail = src.get("raw_partial_hour_s", 0)
    lines.append(
        f"hours: {src['hours']} whole: {src['recorded_hours']} from recording rules, {src['raw_hours']} from "
        f"raw series, {src['hours_without_data']} without data"
        + (f"; and the hour in progress ({tail // 60} min) from raw series" if tail else "")
    )
    rec = doc.get("reconciliation")
    if rec:
        t = rec["totals"]
        lines.append(
            f"Slurm's accounting: {_fmt(t['slurm_gpu_hours'])} GPU-hours, metered "
            f"{_fmt(t['metered_gpu_hours'])} device-hours; {t['jobs_differing']} of {t['jobs']} jobs "
            f"differ by more than {rec['threshold'] * 100:g} %"
        )
        for a in rec["accounts"]:
            lines.append(
                f"  {a['account']:<20} Slurm {_fmt(a['slurm_gpu_hours']):>12} metered "
                f"{_fmt(a['metered_gpu_hours']):>12} jobs {a['jobs']:>6}"
            )
        for j in rec["jobs"][:50]:
            lines.append(
                f"  job {j['job']:<12} {j['account'] or '-':<16} {j['state']:<10} Slurm "
                f"{_fmt(j['slurm_gpu_hours'])} metered {_fmt(j['metered_gpu_hours'])}: "
                f"{j['reason'] or 'reason unknown'}"
            )
        if len(rec["jobs"]) > 50:
            lines.append(f"  ... and {len(rec['jobs']) - 50} more jobs in the report's JSON")
    c = doc.get("cluster")
    if c:
        lines.append(
            f"cluster: {_fmt(c['measured_gpu_hours'])} GPU-hours measured = {_fmt(c['charged_gpu_hours'])} "
            f"charged + {_fmt(c['unallocated_gpu_hours'])} unallocated; {_fmt(c['measured_gpu_energy_kwh'])} "
            f"kWh = {_fmt(c['charged_gpu_energy_kwh'])} + {_fmt(c['unallocated_gpu_energy_kwh'])}"
        )
    return lines


def usage_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    formats = _formats(args.format)
    with showing_progress(inv, steps="... ", bars=False):
        gen = ops.report_usage(
            inv,
            period=args.period,
            first=args.first,
            last=args.last,
            account=args.account,
            allocations=args.allocations,
            billing=args.billing,
            vm=_vm(args),
            timezone=args.timezone,
            sacct=args.sacct,
        )
    off = inv.details.get("imbalance")
    if off is not None:
        label = gen.doc["period"]["label"]
        print(f"WARN: usage report {label}: does not add up, stored saying so: {off}", file=sys.stderr)
    return _finish(gen, formats, usage_table(gen.doc))


def energy_table(doc: dict[str, Any]) -> list[str]:
    lines = [f"energy {doc['period']['label']}"]
    for key, item in doc["kpis"].items():
        lines.append(f"  {key:<30} {_fmt(item['value']):>16} {item['unit']:<6} {item['source']}")
    for key, item in doc["indicators"].items():
        lines.append(f"  {key:<30} {_fmt(item['value']):>16} {item['unit']}")
    if doc["missing"]:
        lines.append("missing: " + ", ".join(m["field"] for m in doc["missing"]))
    months = doc.get("months")
    if months:
        closed = sum(1 for m in months["sources"] if m["source"] == "closing")
        lines.append(
            f"months: {len(months['sources']) - closed - len(months['missing'])} from samples, "
            f"{closed} from closings, {len(months['missing'])} without data"
            + (f" ({', '.join(months['missing'])})" if months["missing"] else "")
        )
        for d in months["differences"]:
            lines.append(
                f"  {d['month']} {d['what']}: samples {d['samples_kwh']} kWh, closing {d['closing_kwh']} kWh"
            )
    return lines


def energy_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    formats = _formats(args.format)
    with showing_progress(inv, steps="... ", bars=False):
        gen = ops.report_energy(
            inv, year=args.year, site=args.site, vm=_vm(args), strict=args.strict, timezone=args.timezone
        )
    return _finish(gen, formats, energy_table(gen.doc))


def close_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    with showing_progress(inv, steps="... ", bars=False):
        closed = ops.report_close(inv, site=args.site, months=args.month, vm=_vm(args))
    for s in closed:
        state = "stored" if s.new else "already stored (same data)"
        ok(f"closing {s.label}", f"sha256 {s.sha256}, {state}")
    if not closed:
        ok("closing", "nothing to close (every month that ended has its closing, or has no samples)")
    for s in closed:
        print(s.json_path)
    return 0


def list_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    for e in ops.report_list(inv):
        say(f"{e['sha256'][:12]}  {e['kind']:<6} {e['period']:<24} {e['generated']}  key {e['key_id']}")
    return 0


def show_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    _, data = ops.report_show(inv, args.id)
    sys.stdout.write(data.decode() + "\n")
    return 0


def verify_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    v = ops.report_verify(inv, args.file, pub=args.pub)
    ok(
        str(v.path),
        f"{v.kind} report {v.label}, sha256 {v.sha256}, signed by key {v.key_id}; {v.renderings_note}",
    )
    return 0


def export_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    out = ops.report_export(inv, args.id, args.out)
    ok(
        f"report {args.id}",
        f"exported to {out} (verify: minisign -V -m report.json -x report.json.minisig -p report.pub)",
    )
    return 0
