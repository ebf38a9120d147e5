"""`vigil audit` subcommands: show, verify, checkpoint, export."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from vigil.basics.printable import visible
from vigil.installer import ops

CSV_COLUMNS = (
    "seq",
    "time",
    "user",
    "uid",
    "operator",
    "host",
    "action",
    "object",
    "outcome",
    "reason",
    "details",
    "hash",
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "audit",
        help="read, verify, checkpoint and export the appliance's audit log",
        description="The appliance's tamper-evident audit log: one record per vigil command in "
        "$VIGIL_HOME/audit/log.jsonl, chained by SHA-256, with Ed25519-signed checkpoints in "
        "checkpoints.jsonl.",
    )
    audit_sub = p.add_subparsers(dest="audit_command", metavar="SUBCOMMAND", parser_class=type(p))
    audit_sub.required = True

    show = audit_sub.add_parser(
        "show",
        help="print records",
        description="Print audit records in log order. Reading does not verify; use `vigil audit verify`.",
    )
    show.add_argument(
        "--since", metavar="ISO", help="only records at or after this time (ISO 8601; no zone = UTC)"
    )
    show.add_argument(
        "--action",
        dest="action_prefix",
        metavar="PREFIX",
        help="only actions equal to PREFIX or under it (`bundle` matches `bundle.import`)",
    )
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print a JSON array of the records as stored")
    fmt.add_argument("--csv", action="store_true", help="print CSV with a header row")
    show.set_defaults(func=show_handler, action="audit.show")

    verify = audit_sub.add_parser(
        "verify",
        help="check the hash chain and the signed checkpoints",
        description="Verify a log against its checkpoints and the audit public key. Without options, "
        "verifies $VIGIL_HOME/audit/ with the appliance's own public key, which must be the one whose id "
        "was pinned at first use in $VIGIL_HOME/trust/audit-key-id. On an exported copy, pass all "
        "three files: only the public key is needed (and the copy's audit-key-id is checked). Alone on "
        "the host this cannot see root with the audit key re-signing a rewritten log, nor the log and "
        "its checkpoints cut back together: --witness checks the log against the checkpoints sent off "
        "the host as they were made. Exits non-zero naming the first bad record.",
    )
    verify.add_argument(
        "--log", metavar="FILE", type=Path, help="log to verify (default $VIGIL_HOME/audit/log.jsonl)"
    )
    verify.add_argument(
        "--checkpoints",
        metavar="FILE",
        type=Path,
        help="its checkpoints (default: checkpoints.jsonl next to --log)",
    )
    verify.add_argument(
        "--checkpoint-key",
        metavar="PUB",
        type=Path,
        help="audit public key (PEM) the checkpoints must be signed with (default: audit.pub next to --log)",
    )
    verify.add_argument(
        "--witness",
        metavar="FILE",
        type=Path,
        action="append",
        default=[],
        help="the log receiver's copy of this host's syslog (/var/log/vigil-remote/<host>/<date>.log), or "
        "any file of its vigil-audit lines; repeatable. Every witnessed checkpoint must carry a good "
        "signature of the audit key and sign the log's hash after its count of records",
    )
    verify.set_defaults(func=verify_handler, action="audit.verify")

    checkpoint = audit_sub.add_parser(
        "checkpoint",
        help="sign the current head now",
        description="Write a signed checkpoint over the current head of the log (every vigil command "
        "also does this when it exits), and send it to syslog as a vigil-audit line for the log receiver "
        "(again, if it exists already): says whether the syslog socket ($VIGIL_AUDIT_SYSLOG, default "
        "/dev/log) took it.",
    )
    checkpoint.set_defaults(func=checkpoint_handler, action="audit.checkpoint")

    exp = audit_sub.add_parser(
        "export",
        help="copy log, checkpoints and public key for off-host keeping",
        description="Copy log.jsonl, checkpoints.jsonl, audit.pub and the pinned key id audit-key-id into "
        "the new directory DIR (staged, then renamed). `vigil audit verify --log DIR/log.jsonl "
        "--checkpoints DIR/checkpoints.jsonl "
        "--checkpoint-key DIR/audit.pub` verifies the copy.",
    )
    exp.add_argument("--out", metavar="DIR", type=Path, required=True, help="directory to create")
    exp.set_defaults(func=export_handler, action="audit.export")


def show_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    records = ops.audit_records(inv, since=args.since, action=args.action_prefix)
    out = sys.stdout
    if args.json:
        out.write("[")
        shown = 0
        for record in records:
            out.write(
                ("\n" if shown == 0 else ",\n") + json.dumps(record, sort_keys=True, ensure_ascii=False)
            )
            shown += 1
        out.write("\n]\n" if shown else "]\n")
    elif args.csv:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for record in records:
            writer.writerow(_csv_row(record))
    else:
        for record in records:
            out.write(visible(_text_line(record)) + "\n")  # recorded text: escapes shown, one line
    return 0


def _csv_row(record: dict[str, Any]) -> list[Any]:
    actor = record["actor"]
    return [
        record["seq"],
        record["time"],
        actor["user"],
        actor["uid"],
        actor["operator"] or "",
        record["host"],
        record["action"],
        record["object"],
        record["outcome"],
        record["reason"],
        json.dumps(record["details"], sort_keys=True, ensure_ascii=False),
        record["hash"],
    ]


def _text_line(record: dict[str, Any]) -> str:
    actor = record["actor"]
    who = actor["user"] + (f"({actor['operator']})" if actor["operator"] else "")
    line = f"{record['seq']:>6}  {record['time']}  {who:<16} {record['outcome']:<7} {record['action']}"
    if record["object"]:
        line += f"  {record['object']}"
    if record["reason"]:
        line += f"  -- {record['reason']}"
    return line


def verify_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    summary = ops.audit_verify(
        inv, log=args.log, checkpoints=args.checkpoints, key=args.checkpoint_key, witness=args.witness
    )
    line = (
        f"OK: audit: {summary.records} records, {summary.checkpoints} checkpoints, head {summary.head[:12]}"
    )
    if args.witness:
        line += f"; witnessed: {summary.witnessed} checkpoints, up to record {summary.witnessed_records}"
        if summary.witnessed_records < summary.records:
            line += f" of {summary.records} (later ones not witnessed yet)"
        elif summary.witnessed_records > summary.records:
            line += f", beyond this copy's {summary.records} (later records are not in it)"
    print(line)
    return 0


def checkpoint_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    cp, unsent = ops.audit_checkpoint(inv)
    sent = "sent to syslog" if unsent is None else f"not sent to syslog ({unsent})"
    print(
        f"OK: audit: checkpoint over {cp['count']} records, head {cp['head'][:12]}, key {cp['key_id']}",
        end="",
    )
    print(f", {sent}")
    return 0


def export_handler(args: argparse.Namespace, inv: ops.Invocation) -> int:
    out, summary = ops.audit_export(inv, args.out)
    print(f"OK: audit: exported {summary.records} records, {summary.checkpoints} checkpoints to {out}")
    return 0
