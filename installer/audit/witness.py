"""Witnessed checkpoints: each checkpoint also leaves the admin host, as a syslog line.

Root on the admin host can rewrite ``audit/`` whole: with ``audit.key`` beside the log it can
re-sign every checkpoint, and without it it can still cut the log and its checkpoints back to an
earlier consistent state, or delete them. What it cannot do is take back a line that has already
reached another host. So, as in a transparency log's witnesses, every checkpoint is sent as one
syslog line as it is made (one line, shown cut in two here)::

    <86>Nov  2 10:00:00 vigil-audit[4242]: checkpoint count=8 head=<64 hex> \
        time=2026-11-02T10:00:00.123456Z key_id=<16 hex> sig=<base64>

It goes to the local syslog socket (``/dev/log``; ``$VIGIL_AUDIT_SYSLOG`` names another, an empty
value sends nothing). The ``audit`` role forwards every tag that starts with ``vigil`` (and facility
authpriv) over mutually authenticated TLS to the log receiver, which keeps it in
``/var/log/vigil-remote/<host>/<YYYY-MM-DD>.log``. ``vigil audit verify --witness FILE`` then
checks the log against the receiver's copy (:class:`Witnessed`).

Sending never fails a command and never holds it for long: one datagram, a short timeout, and the
reason kept in :attr:`SyslogWitness.last_error` when it did not go. An admin host without syslog
still works; its checkpoints are simply not witnessed, which ``verify --witness`` says.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from vigil.installer.audit._canonical import is_hex64, is_time
from vigil.installer.audit._files import cannot
from vigil.installer.audit._schema import signed_part
from vigil.installer.audit.errors import AuditError
from vigil.installer.audit.keys import check_signature, key_id

#: the syslog tag (program name) of a witness line; the audit role forwards tags starting with "vigil"
TAG = "vigil-audit"
DEFAULT_SOCKET = "/dev/log"
SOCKET_ENV = "VIGIL_AUDIT_SYSLOG"
#: facility authpriv (10), severity info (6): forwarded by the audit role's facility rule as well
PRIORITY = 10 * 8 + 6
#: the longest a command waits for a busy syslog socket
SEND_TIMEOUT_S = 0.25

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_PAYLOAD_RE = re.compile(
    r"checkpoint count=(?P<count>0|[1-9][0-9]{0,18}) head=(?P<head>\S+) time=(?P<time>\S+) "
    r"key_id=(?P<key_id>[0-9a-f]{16}) sig=(?P<sig>[A-Za-z0-9+/]{86}==)"
)
_TAG_RE = re.compile(re.escape(TAG) + r"(?:\[[0-9]+\])?:")


def witness_line(checkpoint: dict[str, Any]) -> str:
    """The message of a checkpoint's witness line (what follows ``vigil-audit[pid]: ``)."""
    cp = checkpoint
    return (
        f"checkpoint count={cp['count']} head={cp['head']} time={cp['time']} "
        f"key_id={cp['key_id']} sig={cp['sig']}"
    )


def _rfc3164_stamp(when: float) -> str:
    t = time.localtime(when)
    return f"{_MONTHS[t.tm_mon - 1]} {t.tm_mday:>2} {t.tm_hour:02}:{t.tm_min:02}:{t.tm_sec:02}"


class SyslogWitness:
    """Sends each checkpoint as a syslog datagram to a local socket; never raises."""

    def __init__(self, address: str | None, *, timeout: float = SEND_TIMEOUT_S) -> None:
        #: the syslog socket, or None to send nothing
        self.address = address or None
        self.timeout = timeout
        #: why the last checkpoint was not sent; None after a send that went out
        self.last_error: str | None = None

    @classmethod
    def from_env(cls) -> SyslogWitness:
        """``$VIGIL_AUDIT_SYSLOG`` when it is set (empty: send nothing), else ``/dev/log``."""
        return cls(os.environ.get(SOCKET_ENV, DEFAULT_SOCKET))

    def describe(self) -> str:
        return f"syslog {self.address}" if self.address else f"nothing (${SOCKET_ENV} is empty)"

    def send(self, checkpoint: dict[str, Any]) -> bool:
        """Send one witness line; ``True`` if the socket took it, else ``False`` and the reason kept."""
        if self.address is None:
            self.last_error = f"no syslog socket (${SOCKET_ENV} is empty)"
            return False
        message = (
            f"<{PRIORITY}>{_rfc3164_stamp(time.time())} {TAG}[{os.getpid()}]: {witness_line(checkpoint)}"
        )
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.settimeout(self.timeout)
                sock.connect(self.address)
                sock.send(message.encode("ascii"))
        except TimeoutError:
            self.last_error = f"{self.address}: busy (not taken within {self.timeout:g} s)"
            return False
        except (OSError, ValueError) as exc:  # ValueError: a socket path Python refuses outright
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.last_error = f"{self.address}: {reason or type(exc).__name__}"
            return False
        self.last_error = None
        return True


@dataclass(frozen=True)
class _Seen:
    head: str
    where: str


class Witnessed:
    """The checkpoints found in witness files, each signature checked, to match against a log walk.

    Lines whose syslog tag is not ``vigil-audit`` are skipped: a receiver's file holds the host's
    whole trail. A ``vigil-audit`` line that is not a well-formed checkpoint, is signed by another
    key or carries a bad signature is an error naming its file and line: the receiver only holds
    what the admin host sent, so such a line is forged or altered, and an auditor must look at it.
    """

    def __init__(self, files: Iterable[Path], public_key: Ed25519PublicKey) -> None:
        self.files = [Path(f) for f in files]
        self._key = public_key
        self._key_id = key_id(public_key)
        #: count -> the distinct heads witnessed over that many records (one, unless the log forked)
        self._heads: dict[int, list[_Seen]] = {}
        #: how many distinct checkpoints were witnessed
        self.checkpoints = 0
        for path in self.files:
            self._read(path)
        if not self._heads:
            names = ", ".join(str(f) for f in self.files)
            raise AuditError(
                f"witness {names}: no {TAG} checkpoint line (nothing witnessed: is this host's syslog "
                "forwarded to the log receiver?)"
            )

    @property
    def latest(self) -> int:
        """The highest record count a witnessed checkpoint covers."""
        return max(self._heads)

    def _read(self, path: Path) -> None:
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise AuditError(f"witness {path}: not found") from None
        except OSError as exc:
            raise cannot(path, "read", exc) from None
        seen: set[tuple[int, str, str, str]] = set()
        with f:
            for lineno, raw in enumerate(f, start=1):
                message = _witness_message(raw)
                if message is None:
                    continue
                where = f"witness {path} line {lineno}"
                cp = _parse(message, where)
                # 1 the audit key of this log (a line of a replaced key, or of another host, is not)
                if cp["key_id"] != self._key_id:
                    raise AuditError(
                        f"{where}: checkpoint signed by key {cp['key_id']}, not by this log's audit key "
                        f"{self._key_id} (audit key replaced, or a line of another host)"
                    )
                ident = (cp["count"], cp["head"], cp["time"], cp["sig"])
                if ident in seen:
                    continue  # the same checkpoint sent again (`vigil audit checkpoint`)
                # 2 its signature
                check_signature(self._key, signed_part(cp), cp["sig"], where)
                seen.add(ident)
                # 3 kept by count, to be matched against the record with that sequence number
                heads = self._heads.setdefault(cp["count"], [])
                if all(s.head != cp["head"] for s in heads):
                    heads.append(_Seen(cp["head"], where))
                    self.checkpoints += 1

    def settle(self, seq: int, head: str) -> None:
        """The log's hash after ``seq`` records is ``head``: every checkpoint witnessed over ``seq``
        records must have signed exactly that."""
        for seen in self._heads.get(seq, ()):
            if seen.head != head:
                raise AuditError(
                    f"record {seq}: hash differs from the head of the checkpoint over {seq} records "
                    f"witnessed in {seen.where.removeprefix('witness ')} (log rewritten)",
                    seq=seq,
                )

    def finish(self, seq: int) -> None:
        """The log ended after record ``seq``: no witnessed checkpoint may cover more."""
        beyond = [n for n in self._heads if n > seq]
        if beyond:
            count = min(beyond)
            where = self._heads[count][0].where.removeprefix("witness ")
            raise AuditError(
                f"record {seq + 1}: missing: log ends at record {seq} but the checkpoint over {count} "
                f"records witnessed in {where} covers it (log truncated, or replaced)",
                seq=seq + 1,
            )


def first_witness_line(files: Iterable[Path]) -> str | None:
    """Where the first ``vigil-audit`` line of ``files`` is (``<file> line <n>``); ``None`` if none is.

    For a host whose log is gone, key and all: the witness still shows that there was one.
    """
    for path in files:
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise AuditError(f"witness {path}: not found") from None
        except OSError as exc:
            raise cannot(Path(path), "read", exc) from None
        with f:
            for lineno, raw in enumerate(f, start=1):
                if _witness_message(raw) is not None:
                    return f"{path} line {lineno}"
    return None


def _witness_message(raw: bytes) -> str | None:
    """The message of a ``vigil-audit`` line, or ``None`` for any other line.

    The tag is the first word that ends with ``:`` — in a receiver's file (``<time> <host>
    vigil-audit[pid]: …``), in ``journalctl -o short`` output and in a bare ``vigil-audit: …``
    line alike — so a ``vigil-audit:`` inside another program's message is not taken for one.
    """
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    for i, word in enumerate(text.split(" ")):
        if word.endswith(":"):
            if not _TAG_RE.fullmatch(word):
                return None
            rest = text.split(" ")[i + 1 :]
            return " ".join(rest).strip()
    return None


def _parse(message: str, where: str) -> dict[str, Any]:
    match = _PAYLOAD_RE.fullmatch(message)
    if match is None:
        raise AuditError(
            f"{where}: malformed: not 'checkpoint count=N head=H time=T key_id=K sig=S' ({TAG} line forged?)"
        )
    cp: dict[str, Any] = match.groupdict()
    cp["count"] = int(cp["count"])
    if not is_hex64(cp["head"]):
        raise AuditError(f"{where}: malformed: head must be 64 lower-case hex digits")
    if not is_time(cp["time"]):
        raise AuditError(f"{where}: malformed: time must be UTC RFC 3339 with microseconds")
    # the same field order as a checkpoint, so the signed canonical bytes are the same
    return {k: cp[k] for k in ("count", "head", "time", "key_id", "sig")}
