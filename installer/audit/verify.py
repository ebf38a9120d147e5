"""Verify an audit log against its signed checkpoints, streaming (constant memory).

The protocol, in the order the checks run for each record:

1. the line is a well-formed record (else *malformed*, by seq or by line number);
2. its ``hash`` is the SHA-256 of its canonical JSON without ``hash`` (else *edited*);
3. its ``seq`` is the previous one plus one (else *deleted*, *reordered* or *inserted*);
4. its ``prev`` is the previous record's ``hash``, the genesis value for record 1;
5. its ``time`` is not before the previous record's;
6. every checkpoint whose ``count`` is this ``seq`` signs this record's hash as ``head``
   and is not older than the record;
7. with witness files, every witnessed checkpoint whose ``count`` is this ``seq`` signs this
   record's hash as ``head`` too (and none covers more records than the log holds).

Checkpoints are read in file order as the log is walked; each one, when read, must
(1) name the trusted key, (2) carry a valid signature, (3) have a count greater and a
time not earlier than the checkpoint before it. At the end of the log no checkpoint may
be left over (a log shorter than a checkpoint's count had its tail cut), and a log with
records must have at least one checkpoint.

What this cannot see on its own: someone holding the host's audit key (it sits beside the
log, so root on the host does), or someone who cuts the log *and* the checkpoints back to an
earlier consistent state. Both are caught by checkpoints kept off the host, which the log must
still contain: with ``witness`` files (the log receiver's copy of the checkpoints as they were
made, :mod:`vigil.installer.audit.witness`), each witnessed checkpoint, its signature checked
first, must sign the log's hash after its ``count`` records (7, checked in the same walk), and
the log must reach the highest witnessed count; an exported copy kept off the host serves the
same way. With ``pin`` (``trust/audit-key-id``, or the copy of it in an export), the key must be
the one pinned at first use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from vigil.installer.audit._canonical import GENESIS, record_hash
from vigil.installer.audit._files import cannot
from vigil.installer.audit._schema import parse_checkpoint, parse_record, signed_part
from vigil.installer.audit.errors import AuditError
from vigil.installer.audit.keys import check_pin, check_signature, key_id, load_public_key
from vigil.installer.audit.witness import Witnessed


@dataclass(frozen=True)
class Summary:
    """What a successful verification saw."""

    records: int
    checkpoints: int
    #: hash of the last record (the genesis value for an empty log)
    head: str
    #: distinct checkpoints found in the witness files (0 when none were given)
    witnessed: int = 0
    #: the highest record count a witnessed checkpoint covers
    witnessed_records: int = 0


def verify(
    log_path: Path,
    checkpoints_path: Path,
    public_key: Ed25519PublicKey | Path,
    *,
    witness: Sequence[Path] = (),
    pin: Path | None = None,
    copy: bool = False,
) -> None:
    """Return if the log and its checkpoints are intact; raise :class:`AuditError` naming the
    first bad record (or checkpoint, or line) and the reason otherwise.

    ``witness``: files holding the checkpoints as they were sent off the host; ``pin``: a file
    pinning the audit key's id (checked when it exists); ``copy``: the log is an exported copy, a
    prefix of the host's log, so checkpoints witnessed after it was taken are not missing records
    (:attr:`Summary.witnessed_records` then exceeds :attr:`Summary.records`).
    """
    verify_summary(log_path, checkpoints_path, public_key, witness=witness, pin=pin, copy=copy)


def verify_summary(
    log_path: Path,
    checkpoints_path: Path,
    public_key: Ed25519PublicKey | Path,
    *,
    witness: Sequence[Path] = (),
    pin: Path | None = None,
    copy: bool = False,
) -> Summary:
    """Like :func:`verify`, and say how many records and checkpoints were checked."""
    key = public_key if isinstance(public_key, Ed25519PublicKey) else load_public_key(Path(public_key))
    if pin is not None:  # 0 the key pinned at first use
        check_pin(pin, key, f"public key {public_key}" if isinstance(public_key, Path) else "public key")
    witnessed = Witnessed(witness, key) if witness else None
    with ExitStack() as stack:
        log = _open(Path(log_path), required=True, stack=stack)
        cps_file = _open(Path(checkpoints_path), required=False, stack=stack)
        assert log is not None  # noqa: S101 - narrows the type
        checkpoints = _Checkpoints(_numbered(cps_file), key)
        checkpoints.settle(0, GENESIS, None, None)
        if witnessed is not None:
            witnessed.settle(0, GENESIS)
        lines = _Peekable(_numbered(log))
        seq, head, time = 0, GENESIS, None
        for lineno, line in lines:
            record = parse_record(line, lineno)  # 1 well-formed
            n = record["seq"]
            if record_hash(record) != record["hash"]:  # 2 own hash
                raise AuditError(f"record {n}: hash mismatch (record edited)", seq=n)
            if n != seq + 1:  # 3 place in the sequence
                raise _out_of_place(n, seq + 1, lines)
            if record["prev"] != head:  # 4 chain link
                raise AuditError(
                    f"record {n}: prev does not match the hash of record {seq} (record inserted or replaced)",
                    seq=n,
                )
            if time is not None and record["time"] < time:  # 5 time
                raise AuditError(
                    f"record {n}: time goes backwards ({record['time']} is before record {seq}'s {time})",
                    seq=n,
                )
            seq, head, time = n, record["hash"], record["time"]
            checkpoints.settle(seq, head, time, lines)  # 6 checkpoints at this count
            if witnessed is not None:
                witnessed.settle(seq, head)  # 7 witnessed checkpoints at this count
        checkpoints.finish(seq)
        if witnessed is None:
            return Summary(records=seq, checkpoints=checkpoints.read, head=head)
        if not copy:
            witnessed.finish(seq)
        return Summary(
            records=seq,
            checkpoints=checkpoints.read,
            head=head,
            witnessed=witnessed.checkpoints,
            witnessed_records=witnessed.latest,
        )


def _open(path: Path, *, required: bool, stack: ExitStack) -> IO[bytes] | None:
    try:
        return stack.enter_context(open(path, "rb"))
    except FileNotFoundError:
        if required:
            raise AuditError(f"log {path}: not found") from None
        return None
    except OSError as exc:
        raise cannot(path, "read", exc) from None


def _numbered(f: IO[bytes] | None) -> Iterator[tuple[int, bytes]]:
    if f is None:
        return iter(())
    return enumerate(f, start=1)


class _Peekable:
    """Numbered lines with one line of look-ahead."""

    def __init__(self, it: Iterator[tuple[int, bytes]]) -> None:
        self._it = it
        self._ahead: tuple[int, bytes] | None = None

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self

    def __next__(self) -> tuple[int, bytes]:
        if self._ahead is not None:
            item, self._ahead = self._ahead, None
            return item
        return next(self._it)

    def peek_record(self) -> dict[str, Any] | None:
        """The next line as a JSON object, if it is one (not consumed)."""
        if self._ahead is None:
            self._ahead = next(self._it, None)
        if self._ahead is None:
            return None
        try:
            obj = json.loads(self._ahead[1])
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None


def _not_signed_head(seq: int, number: int, head: str, lines: _Peekable | None) -> AuditError:
    """Record ``seq`` is not the one checkpoint ``number`` signed: say why, from the next line."""
    after = lines.peek_record() if lines is not None else None
    if after is not None and after.get("seq") == seq:
        return AuditError(f"record {seq}: appears twice (record inserted)", seq=seq)
    if after is not None and after.get("seq") == seq + 1 and after.get("prev") != head:
        return AuditError(
            f"record {seq}: differs from the record signed in checkpoint {number} and record {seq + 1} "
            "does not follow it (record inserted or replaced)",
            seq=seq,
        )
    return AuditError(
        f"record {seq}: hash differs from the head signed in checkpoint {number} (log rewritten)", seq=seq
    )


def _out_of_place(seq: int, expected: int, rest: Iterator[tuple[int, bytes]]) -> AuditError:
    """Name what put record ``seq`` where record ``expected`` should be."""
    if seq == expected - 1:
        return AuditError(f"record {seq}: appears twice (record inserted)", seq=seq)
    if seq < expected:
        return AuditError(
            f"record {seq}: out of order: found after record {expected - 1} (records reordered)", seq=seq
        )
    # seq > expected: the missing record is either later in the file or gone
    for _, line in rest:
        try:
            later = json.loads(line)
        except ValueError:
            continue
        if isinstance(later, dict) and later.get("seq") == expected:
            return AuditError(
                f"record {expected}: out of order: record {seq} comes before it (records reordered)",
                seq=expected,
            )
    return AuditError(
        f"record {expected}: missing: log jumps from record {expected - 1} to record {seq} (record deleted)",
        seq=expected,
    )


class _Checkpoints:
    """The checkpoints file, read one checkpoint ahead of the log walk."""

    def __init__(self, lines: Iterator[tuple[int, bytes]], key: Ed25519PublicKey) -> None:
        self._lines = lines
        self._key = key
        self._key_id = key_id(key)
        self._last: tuple[int, int, str] | None = None  # (number, count, time) of the one before
        self.read = 0
        self.pending: tuple[int, dict[str, Any]] | None = self._next()

    def _next(self) -> tuple[int, dict[str, Any]] | None:
        item = next(self._lines, None)
        if item is None:
            return None
        number, line = item
        self.read = number
        where = f"checkpoint {number}"
        cp = parse_checkpoint(line, number)
        # 1 the trusted key
        if cp["key_id"] != self._key_id:
            raise AuditError(f"{where}: signed by unknown key {cp['key_id']} (forged)")
        # 2 the signature
        check_signature(self._key, signed_part(cp), cp["sig"], where)
        # 3 order against the checkpoint before it
        if self._last is not None:
            before, count, time = self._last
            if cp["count"] <= count:
                raise AuditError(
                    f"{where}: count {cp['count']} does not follow checkpoint {before}'s {count} "
                    "(checkpoint replayed or rolled back)"
                )
            if cp["time"] < time:
                raise AuditError(
                    f"{where}: time goes backwards ({cp['time']} is before checkpoint {before}'s {time}) "
                    "(checkpoint replayed or rolled back)"
                )
        self._last = (number, cp["count"], cp["time"])
        return number, cp

    def settle(self, seq: int, head: str, time: str | None, lines: _Peekable | None) -> None:
        """Match every checkpoint over ``seq`` records against the record ``seq``."""
        while self.pending is not None and self.pending[1]["count"] == seq:
            number, cp = self.pending
            if cp["head"] != head:
                raise _not_signed_head(seq, number, head, lines)
            if time is not None and cp["time"] < time:
                raise AuditError(f"checkpoint {number}: time is before record {seq}'s (checkpoint replayed)")
            self.pending = self._next()

    def finish(self, seq: int) -> None:
        """The log ended after record ``seq``: nothing may be left unmatched."""
        if self.pending is not None:
            number, cp = self.pending
            raise AuditError(
                f"record {seq + 1}: missing: log ends at record {seq} but checkpoint {number} covers "
                f"{cp['count']} records (tail truncated)",
                seq=seq + 1,
            )
        if seq > 0 and self.read == 0:
            raise AuditError(f"checkpoint 1: missing: the log has {seq} records but no signed checkpoint")
