"""The audit trail: read, verify, checkpoint and export it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vigil.basics.errors import UsageError
from vigil.installer.audit import GENESIS, AuditLog, AuditPaths, Summary, export, verify_summary
from vigil.installer.audit._canonical import parse_since
from vigil.installer.ops._invocation import Invocation


def audit_records(
    inv: Invocation, *, since: str | None = None, action: str | None = None
) -> Iterator[dict[str, Any]]:
    """``audit.show``: the records in log order, from SINCE (ISO 8601, no zone = UTC), under ACTION.

    Reading does not verify. ``details["shown"]`` counts what was taken.
    """
    log = AuditLog(inv.home)
    stamp = None
    if since:
        try:
            stamp = parse_since(since)
        except ValueError:
            raise UsageError("vigil audit show", f"--since {since!r}: not an ISO 8601 date or time") from None
    inv.object = str(log.paths.log)
    inv.details.update(since=stamp, action=action, shown=0)

    def walk() -> Iterator[dict[str, Any]]:
        for record in log.records(since=stamp, action=action):
            inv.details["shown"] += 1
            yield record

    return walk()


def audit_verify(
    inv: Invocation, *, log: Path | None = None, checkpoints: Path | None = None, key: Path | None = None
) -> Summary:
    """``audit.verify``: the hash chain against the signed checkpoints and the audit public key.

    Without paths: this host's own log; a host that has recorded nothing yet has an empty, valid one.
    """
    paths = AuditPaths.under(inv.home)
    log_path = log or paths.log
    cp_path = checkpoints or log_path.with_name("checkpoints.jsonl")
    key_path = key or log_path.with_name("audit.pub")
    inv.object = str(log_path)
    inv.details.update(checkpoints=str(cp_path), checkpoint_key=str(key_path))
    explicit = log or checkpoints or key
    if not explicit and not any(p.exists() for p in (log_path, cp_path, key_path)):
        inv.details.update(records=0, checkpoints=0)
        return Summary(records=0, checkpoints=0, head=GENESIS)
    summary = verify_summary(log_path, cp_path, key_path)
    inv.details.update(records=summary.records, checkpoints=summary.checkpoints, head=summary.head)
    return summary


def audit_checkpoint(inv: Invocation) -> dict[str, Any]:
    """``audit.checkpoint``: sign the current head now."""
    log = AuditLog(inv.home)
    cp = log.checkpoint()
    inv.object = str(log.paths.checkpoints)
    inv.details.update(count=cp["count"], head=cp["head"], key_id=cp["key_id"])
    return cp


def audit_export(inv: Invocation, out: Path) -> tuple[Path, Summary]:
    """``audit.export``: log, checkpoints and public key copied into the new directory OUT, verified there."""
    log = AuditLog(inv.home)
    inv.object = str(out)
    copied = export(log, out)
    summary = verify_summary(copied / "log.jsonl", copied / "checkpoints.jsonl", copied / "audit.pub")
    inv.details.update(records=summary.records, checkpoints=summary.checkpoints, head=summary.head)
    return copied, summary
