"""The audit trail: read, verify, checkpoint and export it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vigil.basics.errors import UsageError
from vigil.installer.audit import (
    GENESIS,
    PIN_NAME,
    AuditError,
    AuditLog,
    AuditPaths,
    Summary,
    export,
    first_witness_line,
    read_pin,
    verify_summary,
)
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
    inv: Invocation,
    *,
    log: Path | None = None,
    checkpoints: Path | None = None,
    key: Path | None = None,
    witness: Sequence[Path] = (),
) -> Summary:
    """``audit.verify``: the hash chain against the signed checkpoints and the audit public key,
    and, with WITNESS files (the log receiver's copy of the checkpoints), against those too.

    Without paths: this host's own log, with its key checked against the id pinned in
    ``trust/audit-key-id``; a host that has recorded nothing yet has an empty, valid one, unless a
    key was pinned here or checkpoints were witnessed (then the log was deleted). With ``--log``:
    the ``audit-key-id`` beside it (an export's copy of the pin) is checked when it is there, and
    the log is taken for a copy: witnessed checkpoints past its end are said, not failed.
    """
    paths = AuditPaths.under(inv.home)
    log_path = log or paths.log
    cp_path = checkpoints or log_path.with_name("checkpoints.jsonl")
    key_path = key or log_path.with_name("audit.pub")
    if log is not None:
        pin: Path | None = log_path.with_name(PIN_NAME)
    else:
        pin = paths.pin if key is None else None  # a key named by the operator stands on its own
    inv.object = str(log_path)
    inv.details.update(
        checkpoints=str(cp_path),
        checkpoint_key=str(key_path),
        pin=str(pin) if pin else None,
        witness=[str(w) for w in witness],
    )
    explicit = log or checkpoints or key
    if not explicit and not any(p.exists() for p in (log_path, cp_path, key_path)):
        restore = f"restore {paths.dir} from a backup"
        pinned = read_pin(paths.pin)
        if pinned is not None:
            raise AuditError(
                f"log {log_path}: not found, but the audit key pinned at {pinned} ({paths.pin}) signed a "
                f"log here (audit log deleted); {restore}"
            )
        seen = first_witness_line(witness)
        if seen is not None:
            raise AuditError(
                f"log {log_path}: not found, but {seen} witnessed a checkpoint of it (audit log deleted)"
            )
        inv.details.update(records=0, checkpoints=0)
        return Summary(records=0, checkpoints=0, head=GENESIS)
    # an explicit --log is a copy (an export): checkpoints witnessed after it was taken are not missing
    summary = verify_summary(log_path, cp_path, key_path, witness=witness, pin=pin, copy=log is not None)
    inv.details.update(records=summary.records, checkpoints=summary.checkpoints, head=summary.head)
    if witness:
        inv.details.update(witnessed=summary.witnessed, witnessed_records=summary.witnessed_records)
    return summary


def audit_checkpoint(inv: Invocation) -> tuple[dict[str, Any], str | None]:
    """``audit.checkpoint``: sign the current head now (or take the latest checkpoint if it covers the
    head) and send it to the witness. Returns the checkpoint and why it was not sent (None: it was)."""
    log = AuditLog(inv.home)
    cp = log.checkpoint()
    unsent = log.witness.last_error
    inv.object = str(log.paths.checkpoints)
    inv.details.update(
        count=cp["count"], head=cp["head"], key_id=cp["key_id"], witness=log.witness.describe(), unsent=unsent
    )
    return cp, unsent


def audit_export(inv: Invocation, out: Path) -> tuple[Path, Summary]:
    """``audit.export``: log, checkpoints and public key copied into the new directory OUT, verified there."""
    log = AuditLog(inv.home)
    inv.object = str(out)
    copied = export(log, out)
    summary = verify_summary(
        copied / "log.jsonl", copied / "checkpoints.jsonl", copied / "audit.pub", pin=copied / PIN_NAME
    )
    inv.details.update(records=summary.records, checkpoints=summary.checkpoints, head=summary.head)
    return copied, summary
