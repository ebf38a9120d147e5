"""Writing and reading the appliance's audit log (``AuditLog``).

Each append takes the directory lock, reads the last record from the tail of the file
(never the whole file), chains the new record to it and appends it durably. A signed
checkpoint follows when asked for (``record_command`` asks after every vigil command) and,
without being asked, when none exists yet or ``checkpoint_every`` records have been
appended since the latest one. Every new checkpoint is also sent off the host as a syslog
line (:mod:`vigil.installer.audit.witness`); the signing key is loaded, and checked against its
pin, before a record is appended, so a log whose key is gone is refused, not continued.

Time in the log never goes backwards: when the host clock is behind the last record (a
clock step back), the new record carries the last record's time and says in
``details.clock_behind_us`` by how many microseconds the clock was behind.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vigil.basics.errors import clip, one_line
from vigil.installer.audit import _canonical
from vigil.installer.audit._canonical import GENESIS, canonical, format_time, record_hash
from vigil.installer.audit._files import AuditPaths, append_line, create_empty, last_line, locked
from vigil.installer.audit._schema import OUTCOMES, parse_checkpoint, parse_record
from vigil.installer.audit.errors import AuditError
from vigil.installer.audit.keys import key_id, load_or_create, sign
from vigil.installer.audit.witness import SyslogWitness

DEFAULT_CHECKPOINT_EVERY = 100
#: the most characters a record keeps of its object, its reason and each string in its details
#: (longer ones are cut and say how long they were): one hostile name must not make every later
#: command read a 30 MB line
MAX_OBJECT_CHARS = 1024
MAX_REASON_CHARS = 4096
MAX_DETAIL_CHARS = 4096


def _text(value: str, limit: int) -> str:
    """A string as a record keeps it: at most ``limit`` characters, and no character that UTF-8
    cannot encode (a lone surrogate from an undecodable file name is kept as its escape)."""
    value = clip(value, limit)
    if not value.isprintable():
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _clip_strings(value: Any) -> Any:
    """``value`` (plain JSON) with every string, key or value, cut to ``MAX_DETAIL_CHARS``."""
    if isinstance(value, str):
        return _text(value, MAX_DETAIL_CHARS)
    if isinstance(value, list):
        return [_clip_strings(v) for v in value]
    if isinstance(value, dict):
        return {_text(k, MAX_DETAIL_CHARS): _clip_strings(v) for k, v in value.items()}
    return value


def _os_user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _micros_between(earlier: str, later: str) -> int:
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    return (datetime.strptime(later, fmt) - datetime.strptime(earlier, fmt)) // timedelta(microseconds=1)


class AuditLog:
    """The audit log under ``home/audit/``: append records, write checkpoints, read records."""

    def __init__(
        self,
        home: Path,
        *,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        witness: SyslogWitness | None = None,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be >= 1")
        self.paths = AuditPaths.under(Path(home))
        self.checkpoint_every = checkpoint_every
        #: where each new checkpoint is sent off the host (default: syslog, see ``witness``)
        self.witness = witness if witness is not None else SyslogWitness.from_env()

    # -- writing ---------------------------------------------------------------------------

    def append(
        self,
        action: str,
        obj: str,
        outcome: str,
        reason: str = "",
        details: dict[str, Any] | None = None,
        actor_operator: str | None = None,
        *,
        checkpoint: bool = False,
    ) -> dict[str, Any]:
        """Append one record and return it; with ``checkpoint=True`` also sign the new head."""
        if not action:
            raise AuditError("cannot record an empty action")
        if outcome not in OUTCOMES:
            raise AuditError(f"cannot record outcome {outcome!r}: not one of {', '.join(OUTCOMES)}")
        with locked(self.paths):
            # the key first: a log whose key is gone gets no record it could never sign
            key = load_or_create(self.paths)
            seq, head, last_time = self._tail()
            latest = self._latest_checkpoint()
            self._check_not_behind(seq, head, latest)
            record = self._new_record(
                seq + 1, head, last_time, action, obj, outcome, reason, details, actor_operator
            )
            append_line(self.paths.log, canonical(record) + b"\n")
            due = latest is None or record["seq"] - latest["count"] >= self.checkpoint_every
            if checkpoint or due:
                self._write_checkpoint(key, record["seq"], record["hash"], record["time"], latest)
        return record

    def checkpoint(self) -> dict[str, Any]:
        """Sign the current head and return the checkpoint (the latest one if it already covers it).

        The checkpoint is sent to the witness even when it is not new, so this also re-sends the
        latest one after syslog was away; ``self.witness.last_error`` says whether it went.
        """
        with locked(self.paths):
            key = load_or_create(self.paths)
            seq, head, last_time = self._tail()
            latest = self._latest_checkpoint()
            self._check_not_behind(seq, head, latest)
            checkpoint = self._write_checkpoint(key, seq, head, last_time, latest)
            if checkpoint is latest:
                self.witness.send(checkpoint)
            return checkpoint

    def _new_record(
        self,
        seq: int,
        prev: str,
        last_time: str | None,
        action: str,
        obj: str,
        outcome: str,
        reason: str,
        details: dict[str, Any] | None,
        operator: str | None,
    ) -> dict[str, Any]:
        try:
            # the stored form of details: plain JSON (paths and the like as strings)
            plain: dict[str, Any] = _clip_strings(
                json.loads(json.dumps(dict(details or {}), default=str, allow_nan=False))
            )
        except (ValueError, RecursionError) as exc:
            raise AuditError(f"record {seq}: details cannot be stored as JSON ({exc})") from None
        uid = os.getuid()
        if uid == 0 and os.environ.get("SUDO_USER"):
            plain.setdefault("sudo_user", os.environ["SUDO_USER"])
        when = _canonical.now()
        if last_time is not None and when < last_time:
            plain["clock_behind_us"] = _micros_between(when, last_time)
            when = last_time
        record: dict[str, Any] = {
            "seq": seq,
            "time": when,
            "actor": {"user": _os_user(uid), "uid": uid, "operator": operator},
            "host": socket.gethostname(),
            "action": action,
            "object": one_line(clip(obj, MAX_OBJECT_CHARS)),
            "outcome": outcome,
            "reason": one_line(clip(reason, MAX_REASON_CHARS)),
            "details": plain,
            "prev": prev,
        }
        record["hash"] = record_hash(record)
        return record

    def _write_checkpoint(
        self,
        key: Ed25519PrivateKey,
        count: int,
        head: str,
        last_time: str | None,
        latest: dict[str, Any] | None,
    ) -> dict[str, Any]:
        if latest is not None and latest["count"] == count:
            return latest
        create_empty(self.paths.log)  # a checkpoint over an empty log still needs the log
        when = max(t for t in (_canonical.now(), last_time, latest and latest["time"]) if t)
        fields = {"count": count, "head": head, "time": when, "key_id": key_id(key.public_key())}
        checkpoint = {**fields, "sig": sign(key, fields)}
        append_line(self.paths.checkpoints, canonical(checkpoint) + b"\n")
        # off the host as it is made, in count order (the lock is held); a failure is kept, not raised
        self.witness.send(checkpoint)
        return checkpoint

    def _tail(self) -> tuple[int, str, str | None]:
        """(seq, hash, time) of the last record; (0, GENESIS, None) for an empty log."""
        line = last_line(self.paths.log)
        if line is None:
            return 0, GENESIS, None
        try:
            record = parse_record(line, 0)
        except AuditError as exc:
            raise AuditError(
                f"{self.paths.log}: last line unreadable ({exc.reason}); run `vigil audit verify`"
            ) from None
        return record["seq"], record["hash"], record["time"]

    def _latest_checkpoint(self) -> dict[str, Any] | None:
        line = last_line(self.paths.checkpoints)
        if line is None:
            return None
        try:
            return parse_checkpoint(line, 0)
        except AuditError as exc:
            raise AuditError(
                f"{self.paths.checkpoints}: last line unreadable ({exc.reason}); run `vigil audit verify`"
            ) from None

    @staticmethod
    def _check_not_behind(seq: int, head: str, latest: dict[str, Any] | None) -> None:
        """Refuse to extend a log that its own latest checkpoint says was cut or rewritten."""
        if latest is None:
            return
        if latest["count"] > seq:
            raise AuditError(
                f"record {seq + 1}: missing: log ends at record {seq} but the latest checkpoint covers "
                f"{latest['count']} records (tail truncated); run `vigil audit verify`",
                seq=seq + 1,
            )
        if latest["count"] == seq and latest["head"] != head:
            raise AuditError(
                f"record {seq}: hash differs from the head of the latest checkpoint (log rewritten); "
                "run `vigil audit verify`",
                seq=seq,
            )

    # -- reading ---------------------------------------------------------------------------

    def records(
        self, since: str | datetime | None = None, action: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Records in log order, optionally from a time on and for an action prefix.

        ``action`` matches whole dotted parts: ``bundle`` selects ``bundle.import``, not
        ``bundles.x``; ``bundle.import`` selects exactly that action and its sub-actions.
        Reading does not verify the chain (``verify`` does); a malformed line raises.
        """
        if isinstance(since, datetime):
            since = format_time(since)
        prefix = action.rstrip(".") if action else None
        try:
            f = open(self.paths.log, "rb")  # noqa: SIM115 - closed in finally
        except FileNotFoundError:
            return
        with f:
            for lineno, line in enumerate(f, start=1):
                record = parse_record(line, lineno)
                if since is not None and record["time"] < since:
                    continue
                if prefix and record["action"] != prefix and not record["action"].startswith(prefix + "."):
                    continue
                yield record
