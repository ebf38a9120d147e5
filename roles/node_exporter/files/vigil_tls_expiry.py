#!/usr/bin/python3
"""vigil-tls-expiry: the end of validity of this host's TLS certificates, for node_exporter.

Reads every `*.crt` file (PEM, one or more certificates, or one DER certificate) in the given
directories and writes `vigil_tls_certificates.prom` into node_exporter's textfile directory:

    vigil_tls_certificate_not_after_seconds{path, index}   end of validity (Unix time)
    vigil_tls_certificate_not_before_seconds{path, index}  start of validity
    vigil_tls_certificate_unreadable{path, reason}         1 for a file that holds no readable certificate

`index` is the certificate's place in its file (0: the first, the leaf of a chain). The alerts
CertificateExpiringSoon (30 days, P2), CertificateExpiryImminent (7 days, P1) and
CertificateUnreadable work on these series (docs/alerts.md).

Runs as root (vigil-tls-expiry.service, hourly timer; and once from each deploy) with the
standard library of python3 >= 3.9 only. Nothing it reads is trusted: a link, a FIFO, a device or
a file over 1 MiB is reported unreadable without being read, PEM is read by a line scanner that
looks at each line once (its work grows with the file, never faster), the DER reader checks every
length against what is left and reads nothing past the validity dates. The output is written as a new
file in the textfile directory and renamed into place, and only when its content changes (else its
mtime is brought forward); the directory must be root's and writable by no one else.

Usage: vigil_tls_expiry.py --textfile-dir DIR [--scan DIR ...] [--json]
Exit status 0 (unreadable certificates are in the metrics), 2 when the output cannot be written
safely (one line on stderr naming the path and the reason).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import calendar
import datetime
import errno
import json
import os
import re
import stat
import sys

OUTPUT = "vigil_tls_certificates.prom"
MAX_FILE = 1 << 20
MAX_FILES = 512
MAX_TOTAL = 32 << 20  # bytes read in one run, all directories together
MAX_CERTS = 64
PEM_BEGIN = b"-----BEGIN CERTIFICATE-----"
PEM_END = b"-----END CERTIFICATE-----"

UNIVERSAL_INTEGER = 0x02
SEQUENCE = 0x30
UTC_TIME = 0x17
GENERALIZED_TIME = 0x18
EXPLICIT_0 = 0xA0


class Unreadable(Exception):
    """A file that holds no readable certificate; `reason` is one of a few fixed words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _tlv(buf: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """The DER element at `pos` (before `end`): (tag, start of content, end of content)."""
    if pos + 2 > end:
        raise Unreadable("bad-der")
    tag = buf[pos]
    if tag & 0x1F == 0x1F:  # high tag numbers never occur before the validity dates
        raise Unreadable("bad-der")
    first = buf[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or pos + count > end:  # indefinite (BER) or absurd lengths
            raise Unreadable("bad-der")
        length = int.from_bytes(buf[pos : pos + count], "big")
        if length < 0x80 or buf[pos] == 0:  # DER: the shortest form only
            raise Unreadable("bad-der")
        pos += count
    if length > end - pos:
        raise Unreadable("bad-der")
    return tag, pos, pos + length


def _time(tag: int, raw: bytes) -> int:
    """RFC 5280 UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ) as Unix time."""
    if tag == UTC_TIME and re.fullmatch(rb"[0-9]{12}Z", raw):
        year = int(raw[0:2])
        year += 1900 if year >= 50 else 2000
        rest = raw[2:12]
    elif tag == GENERALIZED_TIME and re.fullmatch(rb"[0-9]{14}Z", raw):
        year = int(raw[0:4])
        rest = raw[4:14]
    else:
        raise Unreadable("bad-time")
    try:
        when = datetime.datetime(
            year, int(rest[0:2]), int(rest[2:4]), int(rest[4:6]), int(rest[6:8]), int(rest[8:10])
        )
    except ValueError:
        raise Unreadable("bad-time") from None
    return calendar.timegm(when.timetuple())


def validity(der: bytes) -> tuple[int, int]:
    """(notBefore, notAfter) of one DER certificate, as Unix time."""
    tag, start, end = _tlv(der, 0, len(der))
    if tag != SEQUENCE or end != len(der):
        raise Unreadable("bad-der")
    tag, pos, tbs_end = _tlv(der, start, end)
    if tag != SEQUENCE:
        raise Unreadable("bad-der")
    tag, c0, c1 = _tlv(der, pos, tbs_end)
    if tag == EXPLICIT_0:  # version
        pos = c1
        tag, c0, c1 = _tlv(der, pos, tbs_end)
    if tag != UNIVERSAL_INTEGER:  # serialNumber
        raise Unreadable("bad-der")
    pos = c1
    for _ in ("signature", "issuer"):
        tag, c0, c1 = _tlv(der, pos, tbs_end)
        if tag != SEQUENCE:
            raise Unreadable("bad-der")
        pos = c1
    tag, pos, val_end = _tlv(der, pos, tbs_end)
    if tag != SEQUENCE:
        raise Unreadable("bad-der")
    tag, c0, c1 = _tlv(der, pos, val_end)
    not_before = _time(tag, der[c0:c1])
    tag, c0, c1 = _tlv(der, c1, val_end)
    not_after = _time(tag, der[c0:c1])
    if c1 != val_end:
        raise Unreadable("bad-der")
    return not_before, not_after


def pem_blocks(data: bytes) -> list[bytes]:
    """The base64 text of each CERTIFICATE block of a PEM file (RFC 7468), in one pass over its lines.

    Each line is looked at once, so the work grows with the size of the file (1 MiB at most), whatever
    it holds. Text outside the blocks is skipped; a block that holds another boundary line or is
    never ended makes the file bad-pem; a 65th block makes it too-many, and reading stops there.
    """
    blocks: list[bytes] = []
    body: list[bytes] | None = None
    for raw in data.splitlines():
        line = raw.strip()
        if body is None:
            if line == PEM_BEGIN:
                body = []
        elif line == PEM_END:
            if len(blocks) == MAX_CERTS:
                raise Unreadable("too-many")
            blocks.append(b"".join(body))
            body = None
        elif line.startswith(b"-----"):
            raise Unreadable("bad-pem")
        else:
            body.extend(line.split())
    if body is not None:
        raise Unreadable("bad-pem")
    return blocks


def certificates(data: bytes) -> list[tuple[int, int]]:
    """Validity of each certificate in a PEM file (or of the one DER certificate)."""
    if data[:1] == b"\x30":
        return [validity(data)]
    blocks = pem_blocks(data)
    if not blocks:
        raise Unreadable("no-certificate")
    found = []
    for text in blocks:
        try:
            der = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise Unreadable("bad-pem") from None
        found.append(validity(der))
    return found


def read_file(dir_fd: int, name: str) -> bytes:
    """The bytes of a regular file in `dir_fd`, never through a link, never blocking on a FIFO."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError as exc:
        raise Unreadable("link" if exc.errno == errno.ELOOP else "unreadable") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not-regular")
        if st.st_size > MAX_FILE:
            raise Unreadable("too-large")
        chunks = []
        left = MAX_FILE + 1
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > MAX_FILE:
            raise Unreadable("too-large")
        return data
    finally:
        os.close(fd)


class Budget:
    """What one run may still read, so a run's work has a bound whatever the directories hold."""

    def __init__(self, left: int = MAX_TOTAL) -> None:
        self.left = left


def scan(
    directory: str, budget: Budget | None = None
) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, str]]]:
    """([(path, index, notBefore, notAfter)], [(path, reason)]) for the `*.crt` files of a directory.

    A file met once `budget` is spent is too-many, unread."""
    budget = budget if budget is not None else Budget()
    found: list[tuple[str, int, int, int]] = []
    bad: list[tuple[str, str]] = []
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return found, bad
    except OSError as exc:
        bad.append((directory, "link" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else "unreadable"))
        return found, bad
    try:
        names = sorted(n for n in os.listdir(dir_fd) if n.endswith(".crt") and not n.startswith("."))
        if len(names) > MAX_FILES:
            bad.append((directory, "too-many"))
            names = names[:MAX_FILES]
        for name in names:
            path = os.path.join(directory, name)
            if budget.left <= 0:
                bad.append((path, "too-many"))
                continue
            try:
                data = read_file(dir_fd, name)
                budget.left -= len(data)
                for index, (before, after) in enumerate(certificates(data)):
                    found.append((path, index, before, after))
            except Unreadable as exc:
                bad.append((path, exc.reason))
    finally:
        os.close(dir_fd)
    return found, bad


def _label(value: str) -> str:
    """A label value in the text exposition format (any bytes of a file name kept visible, UTF-8)."""
    text = os.fsencode(value).decode("utf-8", "backslashreplace")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _gauge(name: str, text: str, key: str, samples: list[tuple[str, str, object]]) -> list[str]:
    """One gauge family: HELP, TYPE, and a sample per (path, value of the label KEY, value)."""
    lines = [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
    return lines + [f'{name}{{path="{_label(p)}",{key}="{k}"}} {v}' for p, k, v in samples]


def render(found: list[tuple[str, int, int, int]], bad: list[tuple[str, str]]) -> bytes:
    prefix = "vigil_tls_certificate_"
    lines = _gauge(
        prefix + "not_after_seconds",
        "End of a TLS certificate's validity (Unix time).",
        "index",
        [(p, str(i), after) for p, i, _, after in found],
    )
    lines += _gauge(
        prefix + "not_before_seconds",
        "Start of a TLS certificate's validity (Unix time).",
        "index",
        [(p, str(i), before) for p, i, before, _ in found],
    )
    lines += _gauge(
        prefix + "unreadable",
        "A certificate file that holds no readable certificate.",
        "reason",
        [(p, r, 1) for p, r in bad],
    )
    return ("\n".join(lines) + "\n").encode()


class Refused(Exception):
    pass


def _safe_dir(path: str) -> int:
    """An fd of the textfile directory: a real directory of root's that no one else may write to."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Refused(f"{path}: cannot open the directory ({os.strerror(exc.errno or 0)})") from None
    st = os.fstat(fd)
    if st.st_uid != 0 or st.st_mode & 0o022:
        os.close(fd)
        raise Refused(f"{path}: the textfile directory must be root's and writable by root alone")
    return fd


def write(textfile_dir: str, content: bytes) -> bool:
    """Put `content` in place as OUTPUT; True when it changed."""
    dir_fd = _safe_dir(textfile_dir)
    try:
        try:
            old = read_file(dir_fd, OUTPUT)
        except Unreadable:
            old = None
        if old == content:
            os.utime(OUTPUT, dir_fd=dir_fd, follow_symlinks=False)
            return False
        tmp = f".{OUTPUT}.{os.getpid()}.{binascii.hexlify(os.urandom(6)).decode()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dir_fd)
            raise
        os.close(fd)
        try:
            os.rename(tmp, OUTPUT, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError:
            os.unlink(tmp, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)
        return True
    finally:
        os.close(dir_fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vigil-tls-expiry", description=__doc__.splitlines()[0])
    parser.add_argument("--textfile-dir", required=True)
    parser.add_argument("--scan", action="append", default=[], metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print {changed, certificates, unreadable}")
    args = parser.parse_args(argv)
    found: list[tuple[str, int, int, int]] = []
    bad: list[tuple[str, str]] = []
    budget = Budget()
    for directory in args.scan:
        f, b = scan(directory, budget)
        found += f
        bad += b
    try:
        changed = write(args.textfile_dir, render(found, bad))
    except Refused as exc:
        print(f"vigil-tls-expiry: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        target = os.path.join(args.textfile_dir, OUTPUT)
        print(f"vigil-tls-expiry: {target}: not written ({exc.strerror or exc})", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"changed": changed, "certificates": len(found), "unreadable": len(bad)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
