"""Root on the admin host against its own audit log, and the witness that catches it.

Each test performs the attack on a log written by real ``vigil`` commands, with a real unix
datagram socket standing in for ``/dev/log``: what it receives is stored the way the log
receiver stores it (``<RFC 3339 time> <host> <tag>: <message>``, rsyslog's file format), next to
lines of other programs, so ``verify --witness`` reads what an auditor would hand it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from audit_helpers import LogFiles, Result, line, rechain, unprotect
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vigil.installer.audit import GENESIS, AuditPaths, key_id
from vigil.installer.audit.keys import sign

Vigil = Callable[..., Result]

#: what the log receiver holds for the admin host besides vigil's lines; none of it is a witness line
OTHER_LINES = (
    "2026-11-02T09:59:00.000000+00:00 admin sudo:     root : TTY=pts/0 ; PWD=/root ; USER=root ; "
    "COMMAND=/usr/bin/logger -t vigil-audit: checkpoint count=1\n"
    "2026-11-02T09:59:01.000000+00:00 admin vigil-audit-prune[77]: removed 0 files\n"
    '2026-11-02T09:59:02.000000+00:00 admin auditd: type=EXECVE a0="logger" a1="vigil-audit:"\n'
)

#: the commands that make the log the attacks start from: 8 records, each witnessed
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("audit", "verify"),
    ("audit", "checkpoint"),
    ("--bogus-option", "audit", "show"),
    ("--operator", "alice", "audit", "show", "--json"),
    ("audit", "show", "--since", "not-a-date"),
    ("audit", "checkpoint"),
    ("audit", "show", "--action", "audit.verify", "--csv"),
    ("audit", "verify"),
)

_DATAGRAM_RE = re.compile(
    rb"<(?P<pri>[0-9]{1,3})>(?P<stamp>[A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8}) (?P<rest>.*)"
)


class Receiver:
    """A syslog socket and the log receiver's file for this host, filled from it."""

    def __init__(self, sock_path: Path, file: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(sock_path))
        self.sock.setblocking(False)
        self.path = sock_path
        self.file = file
        self.priorities: list[int] = []
        file.parent.mkdir(parents=True)
        file.write_text(OTHER_LINES)

    def drain(self) -> int:
        """Store every datagram waiting on the socket as the receiver would; return how many."""
        n = 0
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return n
            match = _DATAGRAM_RE.fullmatch(data)
            assert match is not None, data
            self.priorities.append(int(match["pri"]))
            with self.file.open("a") as f:
                f.write(f"2026-11-02T10:00:{n:02}.000000+00:00 admin {match['rest'].decode()}\n")
            n += 1

    def lines(self) -> list[str]:
        return self.file.read_text().splitlines()

    def lineno_of(self, count: int) -> int:
        """The receiver file's first line witnessing the checkpoint over ``count`` records."""
        for n, text in enumerate(self.lines(), start=1):
            if f" vigil-audit[{os.getpid()}]: checkpoint count={count} " in text:
                return n
        raise AssertionError(f"no witness line for count {count}")

    def send_as(self, tag: str, message: str) -> None:
        """What anyone on the admin host can do: `logger -t TAG MESSAGE`."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(f"<14>Nov  2 10:01:00 {tag}: {message}".encode(), str(self.path))
        self.drain()


@pytest.fixture
def receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    short = Path(tempfile.mkdtemp(prefix="vw", dir="/tmp"))  # a socket path must stay under 108 bytes
    rx = Receiver(short / "log", tmp_path / "vigil-remote" / "admin" / "2026-11-02.log")
    monkeypatch.setenv("VIGIL_AUDIT_SYSLOG", str(rx.path))
    yield rx
    rx.sock.close()
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def run(vigil: Vigil, receiver: Receiver) -> Vigil:
    """A vigil command, then whatever it sent to syslog stored by the receiver."""

    def go(*argv: str) -> Result:
        result = vigil(*argv)
        receiver.drain()
        return result

    return go


@pytest.fixture
def witnessed_log(run: Vigil, home: Path, receiver: Receiver) -> LogFiles:
    for argv in COMMANDS:
        run(*argv)
    files = LogFiles(home)
    assert [r["seq"] for r in files.records()] == list(range(1, len(COMMANDS) + 1))
    return files


def _verify_witness(run: Vigil, receiver: Receiver, *more: str) -> Result:
    return run("audit", "verify", "--witness", str(receiver.file), *more)


def _fails(result: Result, message: str) -> None:
    assert (result.rc, result.out) == (1, "")
    assert result.first_error == f"FAIL: audit: {message}"


def _payload(cp: dict[str, Any]) -> str:
    return " ".join(["checkpoint"] + [f"{k}={cp[k]}" for k in ("count", "head", "time", "key_id", "sig")])


def _audit_key(home: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key((home / "audit" / "audit.key").read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    return key


def _resign(
    checkpoints: list[dict[str, Any]], records: list[dict[str, Any]], key: Ed25519PrivateKey
) -> list[str]:
    """Every checkpoint re-signed over the (rewritten) records, as root holding audit.key would."""
    out = []
    for cp in checkpoints:
        fields = {k: v for k, v in cp.items() if k != "sig"}
        fields["head"] = records[cp["count"] - 1]["hash"] if cp["count"] else GENESIS
        out.append(line({**fields, "sig": sign(key, fields)}))
    return out


# -- the log as it should be -----------------------------------------------------------------------


def test_untouched_log_verifies_with_and_without_witness(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver
) -> None:
    records, checkpoints = witnessed_log.records(), witnessed_log.checkpoints()
    head = records[-1]["hash"][:12]
    plain = run("audit", "verify")  # today's behaviour, unchanged
    assert (plain.rc, plain.err) == (0, "")
    assert plain.out == f"OK: audit: {len(records)} records, {len(checkpoints)} checkpoints, head {head}\n"
    # every checkpoint left the host, as an authpriv.info line tagged vigil-audit
    stored = "\n".join(receiver.lines())
    for cp in checkpoints:
        assert f"checkpoint count={cp['count']} head={cp['head']} time={cp['time']} " in stored
    assert set(receiver.priorities) == {10 * 8 + 6}
    records, checkpoints = witnessed_log.records(), witnessed_log.checkpoints()  # and the plain verify's
    n, head = len(records), records[-1]["hash"][:12]
    witnessed = _verify_witness(run, receiver)
    assert witnessed.rc == 0, witnessed.err
    assert witnessed.out == (
        f"OK: audit: {n} records, {len(checkpoints)} checkpoints, head {head}; "
        f"witnessed: {len(checkpoints)} checkpoints, up to record {n}\n"
    )


def test_key_id_pinned_outside_the_audit_directory(run: Vigil, witnessed_log: LogFiles, home: Path) -> None:
    pin = home / "trust" / "audit-key-id"
    assert pin.read_text() == witnessed_log.checkpoints()[0]["key_id"] + "\n"
    assert oct(pin.stat().st_mode & 0o777) == "0o644"


# -- (a) root with the key rewrites a record and re-signs every checkpoint ------------------------


def test_rewritten_and_resigned_log_fails_against_the_witness(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver, home: Path
) -> None:
    records = witnessed_log.records()
    assert records[2]["outcome"] == "refused"
    records[2]["outcome"] = "ok"  # hide the refusal
    records = rechain(records, 2)
    witnessed_log.write_records(records)
    witnessed_log.write_checkpoints(_resign(witnessed_log.checkpoints(), records, _audit_key(home)))
    # alone on the host, this cannot be seen: the key signs whatever root asks
    assert run("audit", "verify").rc == 0
    # and root may even send the new heads to the receiver: the old ones are still there
    assert run("audit", "checkpoint").rc == 0
    result = _verify_witness(run, receiver)
    _fails(
        result,
        f"record 3: hash differs from the head of the checkpoint over 3 records witnessed in "
        f"{receiver.file} line {receiver.lineno_of(3)} (log rewritten)",
    )


# -- (b) the last records and their checkpoints cut off (no key needed) -----------------------------


def test_truncated_log_and_checkpoints_fail_against_the_witness(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver
) -> None:
    witnessed_log.write_log(witnessed_log.log_lines()[:5])
    kept = [line(cp) for cp in witnessed_log.checkpoints() if cp["count"] <= 5]
    witnessed_log.write_checkpoints(kept)
    before = witnessed_log.log_lines()
    result = _verify_witness(run, receiver)
    _fails(
        result,
        f"record 6: missing: log ends at record 5 but the checkpoint over 6 records witnessed in "
        f"{receiver.file} line {receiver.lineno_of(6)} covers it (log truncated, or replaced)",
    )
    assert witnessed_log.log_lines()[:5] == before  # verify changed nothing it read


# -- (c) audit/ deleted -----------------------------------------------------------------------------


def test_deleted_audit_directory_is_not_started_over(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver, home: Path
) -> None:
    paths, pin = AuditPaths.under(home), home / "trust" / "audit-key-id"
    pinned = witnessed_log.checkpoints()[0]["key_id"]
    unprotect(paths.log, paths.checkpoints)
    shutil.rmtree(paths.dir)

    result = run("audit", "show")
    _fails(
        result,
        f"{paths.private_key}: missing: the audit key pinned at {pinned} ({pin}) is gone; restore "
        f"{paths.dir} from a backup (a new key is refused; docs/audit.md says how to start over)",
    )
    assert not paths.private_key.exists() and not paths.public_key.exists()
    assert not paths.log.exists() and not paths.checkpoints.exists()  # no fresh log was started

    verify = run("audit", "verify")
    assert verify.rc == 1
    assert verify.err.splitlines()[0] == (
        f"FAIL: audit: log {paths.log}: not found, but the audit key pinned at {pinned} ({pin}) "
        f"signed a log here (audit log deleted); restore {paths.dir} from a backup"
    )


def test_deleted_audit_directory_and_pin_fail_against_the_witness(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver, home: Path
) -> None:
    paths, pin = AuditPaths.under(home), home / "trust" / "audit-key-id"
    old = witnessed_log.checkpoints()[0]["key_id"]
    unprotect(paths.log, paths.checkpoints)
    shutil.rmtree(paths.dir)
    pin.unlink(missing_ok=True)  # the thorough intruder: on the host alone this is a first use again
    first = run("audit", "verify", "--witness", str(receiver.file))
    where = f"{receiver.file} line 4"  # the first vigil-audit line, after the other programs' ones
    _fails(first, f"log {paths.log}: not found, but {where} witnessed a checkpoint of it (audit log deleted)")
    assert run("audit", "show").rc == 0  # a new key, a new pin, a new log of one record
    new = LogFiles(home).checkpoints()[0]["key_id"]
    assert new != old
    result = _verify_witness(run, receiver)
    _fails(
        result,
        f"witness {receiver.file} line {receiver.lineno_of(1)}: checkpoint signed by key {old}, not by this "
        f"log's audit key {new} (audit key replaced, or a line of another host)",
    )


def test_replaced_audit_key_is_refused_by_the_pin(run: Vigil, witnessed_log: LogFiles, home: Path) -> None:
    paths, pin = AuditPaths.under(home), home / "trust" / "audit-key-id"
    pinned = witnessed_log.checkpoints()[0]["key_id"]
    other = Ed25519PrivateKey.generate()
    paths.private_key.write_bytes(
        other.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    paths.public_key.write_bytes(
        other.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    records = witnessed_log.records()
    cps = [{**cp, "key_id": _key_id(other)} for cp in witnessed_log.checkpoints()]
    witnessed_log.write_checkpoints(_resign(cps, records, other))
    size = paths.log.stat().st_size
    result = run("audit", "verify")
    _fails(
        result,
        f"public key {paths.public_key}: key {_key_id(other)} is not the audit key {pinned} pinned in "
        f"{pin} (audit key replaced)",
    )
    assert paths.log.stat().st_size == size  # not even verify's own record was added


def _key_id(key: Ed25519PrivateKey) -> str:
    return key_id(key.public_key())


# -- (d) a forged witness line ---------------------------------------------------------------------


def test_forged_witness_line_fails_naming_the_line(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver
) -> None:
    cp = witnessed_log.checkpoints()[-1]
    forged = {**cp, "head": "ab" * 32}  # anyone on the host: `logger -t vigil-audit …`
    receiver.send_as("vigil-audit[1]", _payload(forged))
    where = f"witness {receiver.file} line {len(receiver.lines())}"
    result = _verify_witness(run, receiver)
    _fails(result, f"{where}: bad signature (checkpoint forged or altered)")


def test_malformed_witness_line_fails_naming_the_line(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver
) -> None:
    receiver.send_as("vigil-audit", "checkpoint count=9 head=nothex")
    where = f"witness {receiver.file} line {len(receiver.lines())}"
    result = _verify_witness(run, receiver)
    _fails(
        result,
        f"{where}: malformed: not 'checkpoint count=N head=H time=T key_id=K sig=S' "
        "(vigil-audit line forged?)",
    )


def test_signature_from_another_checkpoint_does_not_pass(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver
) -> None:
    a, b = witnessed_log.checkpoints()[1:3]
    receiver.send_as("vigil-audit", _payload({**a, "sig": b["sig"]}))
    where = f"witness {receiver.file} line {len(receiver.lines())}"
    _fails(_verify_witness(run, receiver), f"{where}: bad signature (checkpoint forged or altered)")


# -- (e) no syslog on the admin host ---------------------------------------------------------------


def test_without_syslog_commands_succeed_fast_and_verify_says_nothing_was_witnessed(
    vigil: Vigil, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_AUDIT_SYSLOG", str(tmp_path / "no-such-socket"))
    started = time.monotonic()
    for argv in COMMANDS:
        vigil(*argv)
    assert time.monotonic() - started < 5
    result = vigil("audit", "checkpoint")
    assert result.rc == 0
    assert result.out.endswith(
        f", not sent to syslog ({tmp_path / 'no-such-socket'}: No such file or directory)\n"
    )
    assert vigil("audit", "verify").rc == 0
    empty = tmp_path / "receiver.log"
    empty.write_text(OTHER_LINES)
    nothing = vigil("audit", "verify", "--witness", str(empty))
    _fails(
        nothing,
        f"witness {empty}: no vigil-audit checkpoint line (nothing witnessed: is this host's syslog "
        "forwarded to the log receiver?)",
    )


def test_a_syslog_that_does_not_read_holds_no_command_long(
    vigil: Vigil, home: Path, receiver: Receiver
) -> None:
    # the socket's queue is full and nobody drains it: each send gives up after its short timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        s.connect(str(receiver.path))
        with pytest.raises(BlockingIOError):
            for _ in range(100_000):
                s.send(b"<14>filler")
    started = time.monotonic()
    for argv in (("audit", "show"), ("audit", "verify"), ("audit", "checkpoint")):
        assert vigil(*argv).rc == 0
    assert time.monotonic() - started < 5
    result = vigil("audit", "checkpoint")
    assert f"not sent to syslog ({receiver.path}: " in result.out


# -- the pin travels with an export ---------------------------------------------------------------


def test_export_carries_the_pin_and_its_verify_checks_it(
    run: Vigil, witnessed_log: LogFiles, receiver: Receiver, tmp_path: Path
) -> None:
    out = tmp_path / "media" / "audit"
    out.parent.mkdir()
    assert run("audit", "export", "--out", str(out)).rc == 0
    pinned = witnessed_log.checkpoints()[0]["key_id"]
    assert (out / "audit-key-id").read_text() == pinned + "\n"
    args = ["--log", str(out / "log.jsonl"), "--checkpoints", str(out / "checkpoints.jsonl")]
    args += ["--checkpoint-key", str(out / "audit.pub")]
    ok = run("audit", "verify", *args, "--witness", str(receiver.file))
    assert ok.rc == 0, ok.err
    # the export's own record came after the copy was taken, and was witnessed: said, not failed
    n = len(COMMANDS)
    assert ok.out.endswith(f"up to record {n + 1}, beyond this copy's {n} (later records are not in it)\n")
    (out / "audit-key-id").write_text("0123456789abcdef\n")
    bad = run("audit", "verify", *args)
    _fails(
        bad,
        f"public key {out / 'audit.pub'}: key {pinned} is not the audit key 0123456789abcdef pinned in "
        f"{out / 'audit-key-id'} (audit key replaced)",
    )


def test_witness_lines_parse_from_the_stored_form(witnessed_log: LogFiles, receiver: Receiver) -> None:
    stored = [t for t in receiver.lines() if " vigil-audit[" in t]
    assert stored
    for text in stored:
        payload = text.split(": ", 1)[1]
        fields = dict(kv.split("=", 1) for kv in payload.removeprefix("checkpoint ").split(" "))
        assert set(fields) == {"count", "head", "time", "key_id", "sig"}
        assert json.loads(fields["count"]) >= 0
