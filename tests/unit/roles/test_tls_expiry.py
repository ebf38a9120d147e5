"""node_exporter's certificate expiry scan (roles/node_exporter/files/vigil_tls_expiry.py), which runs
as root on every host and reads files it must not trust.

The dates it reads are compared with what `cryptography` reads from the same certificates, the
metrics it writes must pass `promtool check metrics`, and every hostile input (links, FIFOs, huge
files, broken DER and PEM, odd file names, a textfile directory others can write to, a link or a
directory in the output's place) is either reported as unreadable or refused in one line, never
followed and never left half-written.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.unit.roles.facts_helpers import load_module
from tests.unit.roles.rendering import ROLES

SCRIPT = ROLES / "node_exporter" / "files" / "vigil_tls_expiry.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the scan checks that root owns the textfile dir")

tls = load_module(SCRIPT)
UTC = datetime.timezone.utc
KEY = ec.generate_private_key(ec.SECP256R1())


def make_cert(not_before: datetime.datetime, not_after: datetime.datetime) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu01")])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(KEY, hashes.SHA256())
    )


def pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def ts(c: x509.Certificate) -> tuple[int, int]:
    return int(c.not_valid_before_utc.timestamp()), int(c.not_valid_after_utc.timestamp())


def dt(*args: int) -> datetime.datetime:
    return datetime.datetime(*args, tzinfo=UTC)  # type: ignore[misc]


LEAF = make_cert(dt(2026, 1, 2, 3, 4, 5), dt(2027, 2, 3, 4, 5, 6))
DER = LEAF.public_bytes(serialization.Encoding.DER)


def run(textfile: Path, *scan: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-I", str(SCRIPT), "--textfile-dir", str(textfile), "--json"]
    for d in scan:
        argv += ["--scan", str(d)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    textfile, certs = tmp_path / "textfile", tmp_path / "tls"
    textfile.mkdir(mode=0o755)
    certs.mkdir(mode=0o755)
    return textfile, certs


def metrics(textfile: Path) -> dict[str, str]:
    out = {}
    for line in (textfile / tls.OUTPUT).read_text().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = value
    return out


def promtool_accepts(textfile: Path) -> None:
    res = subprocess.run(
        ["promtool", "check", "metrics"],
        input=(textfile / tls.OUTPUT).read_text(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_dates_match_cryptography_in_chains_der_and_both_time_forms(dirs: tuple[Path, Path]) -> None:
    textfile, certs = dirs
    old = make_cert(dt(1999, 12, 31, 23, 59, 59), dt(2049, 12, 31, 23, 59, 59))  # UTCTime, both centuries
    late = make_cert(dt(2049, 6, 1), dt(2050, 1, 1))  # notAfter as GeneralizedTime
    far = make_cert(dt(2030, 2, 28), dt(2100, 2, 28, 12))
    (certs / "server.crt").write_bytes(pem(LEAF, old, late))
    (certs / "ca.crt").write_bytes(pem(far))
    (certs / "raw.crt").write_bytes(DER)
    (certs / "server.key").write_bytes(b"not scanned: not *.crt")
    res = run(textfile, certs)
    assert res.returncode == 0, res.stderr
    assert '"certificates": 5' in res.stdout and '"unreadable": 0' in res.stdout
    got = metrics(textfile)
    expect = {
        ("server.crt", 0): LEAF,
        ("server.crt", 1): old,
        ("server.crt", 2): late,
        ("ca.crt", 0): far,
        ("raw.crt", 0): LEAF,
    }
    assert len(got) == 2 * len(expect)
    for (name, index), cert in expect.items():
        labels = f'{{path="{certs / name}",index="{index}"}}'
        before, after = ts(cert)
        assert got[f"vigil_tls_certificate_not_after_seconds{labels}"] == str(after)
        assert got[f"vigil_tls_certificate_not_before_seconds{labels}"] == str(before)
    promtool_accepts(textfile)


def test_an_unchanged_scan_changes_nothing_but_the_mtime(dirs: tuple[Path, Path]) -> None:
    textfile, certs = dirs
    (certs / "server.crt").write_bytes(pem(LEAF))
    assert '"changed": true' in run(textfile, certs).stdout
    out = textfile / tls.OUTPUT
    ino = out.stat().st_ino
    os.utime(out, (1_000_000, 1_000_000))
    assert '"changed": false' in run(textfile, certs).stdout
    assert out.stat().st_ino == ino and out.stat().st_mtime > 1_000_000
    (certs / "other.crt").write_bytes(pem(make_cert(dt(2026, 1, 1), dt(2026, 12, 31))))
    assert '"changed": true' in run(textfile, certs).stdout
    assert out.stat().st_ino != ino and (out.stat().st_mode & 0o777) == 0o644
    assert sorted(p.name for p in textfile.iterdir()) == [tls.OUTPUT]


def _broken() -> dict[str, bytes]:
    body = DER
    return {
        "truncated.crt": body[:-1],
        "trailing.crt": body + b"\x00",
        "indefinite.crt": b"\x30\x80" + body[2:],
        "five-byte-length.crt": b"\x30\x85\x00\x00\x00\x01\x00" + body[4:],
        "non-minimal-length.crt": b"\x30\x82\x00\x10" + b"\x02" * 16,
        "length-past-end.crt": b"\x30\x84\x7f\xff\xff\xff" + body[6:],
        "high-tag.crt": b"\x30\x05\x1f\x81\x01\x01\x00",
        "bad-base64.crt": b"-----BEGIN CERTIFICATE-----\nMII$$$notbase64==\n-----END CERTIFICATE-----\n",
        "a-key.crt": b"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
        "empty.crt": b"",
    }


def _der_with_times(not_before: bytes, not_after: bytes) -> bytes:
    def tlv(tag: int, content: bytes) -> bytes:
        n = len(content)
        length = bytes([n]) if n < 0x80 else bytes([0x82]) + n.to_bytes(2, "big")
        return bytes([tag]) + length + content

    validity = tlv(0x30, not_before + not_after)
    version, serial, empty = tlv(0xA0, tlv(0x02, b"\x02")), tlv(0x02, b"\x01"), tlv(0x30, b"")
    tbs = tlv(0x30, version + serial + empty + empty + validity)
    return tlv(0x30, tbs + tlv(0x30, b"") + tlv(0x03, b"\x00"))


BAD_TIMES = {
    "month-13.crt": (b"\x17\x0d" + b"261301000000Z", b"\x17\x0d" + b"270101000000Z"),
    "no-zulu.crt": (b"\x17\x0d" + b"2601010000000", b"\x17\x0d" + b"270101000000Z"),
    "fraction.crt": (b"\x18\x11" + b"20260101000000.5Z", b"\x17\x0d" + b"270101000000Z"),
    "year-zero.crt": (b"\x17\x0d" + b"260101000000Z", b"\x18\x0f" + b"00000101000000Z"),
    "wrong-tag.crt": (b"\x04\x0d" + b"260101000000Z", b"\x17\x0d" + b"270101000000Z"),
}


def test_broken_certificates_are_reported_by_name_and_reason(dirs: tuple[Path, Path]) -> None:
    textfile, certs = dirs
    for name, data in _broken().items():
        (certs / name).write_bytes(data)
    for name, (nb, na) in BAD_TIMES.items():
        (certs / name).write_bytes(_der_with_times(nb, na))
    good = _der_with_times(b"\x17\x0d" + b"260101000000Z", b"\x18\x0f" + b"20270101000000Z")
    (certs / "hand-made.crt").write_bytes(good)
    (certs / "huge.crt").write_bytes(b"-" * (tls.MAX_FILE + 1))
    res = run(textfile, certs)
    assert res.returncode == 0, res.stderr
    got = metrics(textfile)
    unreadable = {
        k.split('path="', 1)[1].split('"', 1)[0].rsplit("/", 1)[1]: k.split('reason="', 1)[1].split('"', 1)[0]
        for k in got
        if k.startswith("vigil_tls_certificate_unreadable")
    }
    assert set(unreadable) == set(_broken()) | set(BAD_TIMES) | {"huge.crt"}
    assert unreadable["huge.crt"] == "too-large"
    assert unreadable["a-key.crt"] == unreadable["empty.crt"] == "no-certificate"
    assert unreadable["bad-base64.crt"] == "bad-pem"
    assert {unreadable[n] for n in BAD_TIMES} == {"bad-time"}
    assert got[f'vigil_tls_certificate_not_after_seconds{{path="{certs}/hand-made.crt",index="0"}}'] == str(
        int(dt(2027, 1, 1).timestamp())
    )
    promtool_accepts(textfile)


def test_links_fifos_and_directories_are_not_read(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    textfile, certs = dirs
    secret = tmp_path / "shadow"
    secret.write_bytes(pem(LEAF))
    (certs / "link.crt").symlink_to(secret)
    os.mkfifo(certs / "fifo.crt")  # opening it for reading would block without O_NONBLOCK
    os.mkfifo(tmp_path / "fifo")
    (certs / "to-fifo.crt").symlink_to(tmp_path / "fifo")
    (certs / "dir.crt").mkdir()
    linked_dir = tmp_path / "linked-tls"
    linked_dir.symlink_to(certs)
    res = run(textfile, certs, linked_dir, tmp_path / "missing")
    assert res.returncode == 0, res.stderr
    got = metrics(textfile)
    assert got == {
        f'vigil_tls_certificate_unreadable{{path="{certs}/dir.crt",reason="not-regular"}}': "1",
        f'vigil_tls_certificate_unreadable{{path="{certs}/fifo.crt",reason="not-regular"}}': "1",
        f'vigil_tls_certificate_unreadable{{path="{certs}/link.crt",reason="link"}}': "1",
        f'vigil_tls_certificate_unreadable{{path="{certs}/to-fifo.crt",reason="link"}}': "1",
        f'vigil_tls_certificate_unreadable{{path="{linked_dir}",reason="link"}}': "1",
    }


def test_hostile_file_names_stay_one_label_each(dirs: tuple[Path, Path]) -> None:
    textfile, certs = dirs
    names = ['quote".crt', "back\\slash.crt", "new\nline.crt", "brace}{.crt"]
    for name in names:
        (certs / name).write_bytes(pem(LEAF))
    raw = os.fsencode(str(certs)) + b"/latin1-\xe9.crt"
    with open(raw, "wb") as fh:
        fh.write(pem(LEAF))
    res = run(textfile, certs)
    assert res.returncode == 0, res.stderr
    text = (textfile / tls.OUTPUT).read_text(encoding="utf-8")
    samples = [ln for ln in text.splitlines() if ln.startswith("vigil_tls_certificate_not_after")]
    assert len(samples) == len(names) + 1
    assert any('quote\\".crt' in s for s in samples) and any("new\\nline.crt" in s for s in samples)
    assert any("back\\\\slash.crt" in s for s in samples) and any("latin1-\\\\xe9.crt" in s for s in samples)
    promtool_accepts(textfile)


def test_the_output_never_follows_a_link_and_never_lands_in_a_directory_others_can_change(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    textfile, certs = dirs
    (certs / "server.crt").write_bytes(pem(LEAF))
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (textfile / tls.OUTPUT).symlink_to(victim)
    assert run(textfile, certs).returncode == 0
    assert victim.read_text() == "keep me\n"
    assert not (textfile / tls.OUTPUT).is_symlink() and "not_after" in (textfile / tls.OUTPUT).read_text()

    (textfile / tls.OUTPUT).unlink()
    (textfile / tls.OUTPUT).mkdir()
    res = run(textfile, certs)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{textfile / tls.OUTPUT}: not written" in res.stderr
    assert sorted(p.name for p in textfile.iterdir()) == [tls.OUTPUT]  # no staged file left

    for change in ("group-writable", "not-root", "link"):
        other = tmp_path / f"textfile-{change}"
        target = other
        if change == "link":
            other.symlink_to(textfile)
        else:
            other.mkdir()
            other.chmod(0o775)
            if change == "not-root":
                other.chmod(0o755)
                os.chown(other, 65534, 65534)
        res = run(target, certs)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (change, res.stderr)
        assert str(target) in res.stderr, res.stderr
        if change != "link":
            assert list(other.iterdir()) == []


def test_random_damage_is_only_ever_unreadable_or_a_date() -> None:
    rng = random.Random(20261202)  # noqa: S311 - reproducible damage, not a secret
    for cut in range(len(DER)):
        with pytest.raises(tls.Unreadable):
            tls.validity(DER[:cut])
    outcomes = {"unreadable": 0, "read": 0}
    for _ in range(3000):
        data = bytearray(DER)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            before, after = tls.validity(bytes(data))
        except tls.Unreadable:
            outcomes["unreadable"] += 1
        else:
            assert isinstance(before, int) and isinstance(after, int)
            outcomes["read"] += 1
    # Most damage lands in the key or the signature, past the dates: those still read.
    assert outcomes["unreadable"] > 0 and outcomes["read"] > 0, outcomes


MiB = 1 << 20
BEGIN, END = b"-----BEGIN CERTIFICATE-----\n", b"-----END CERTIFICATE-----\n"


def _fill(unit: bytes, head: bytes = b"", tail: bytes = b"", size: int = MiB) -> bytes:
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def _hostile(size: int) -> dict[str, tuple[bytes, str]]:
    """Files of ``size`` bytes built to make a PEM reader work hard, with the reason each is refused;
    the regex this scan used took minutes on the first at 1 MiB (each BEGIN line searched the rest
    of the file for an END)."""
    return {
        "begin-lines.crt": (_fill(BEGIN, size=size), "bad-pem"),
        "text-then-begin.crt": (_fill(b"x" + BEGIN, size=size), "no-certificate"),
        "one-block-never-ended.crt": (_fill(b"QUFB" * 16 + b"\n", head=BEGIN, size=size), "bad-pem"),
        "one-huge-block.crt": (_fill(b"QUFB\n", head=BEGIN, tail=END, size=size), "bad-der"),
        "newlines.crt": (b"\n" * size, "no-certificate"),
        "carriage-returns.crt": (b"\r" * size, "no-certificate"),
        "blanks-in-a-block.crt": (_fill(b" \t\n", head=BEGIN, tail=END, size=size), "bad-der"),
        "dashes.crt": (_fill(b"-----\n", size=size), "no-certificate"),
        "empty-blocks.crt": (_fill(BEGIN + END, size=size), "too-many"),
        "end-lines.crt": (_fill(END, size=size), "no-certificate"),
    }


HOSTILE_PEM = _hostile(MiB)

# Each file read three times; the least CPU time of the three counts. CPU time, not the clock: on a
# shared machine the clock counts the other processes' turns too.
_TIMER = """
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("scan", sys.argv[1])
tls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tls)
out = {}
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    took = []
    for _ in range(3):
        start = time.process_time()
        try:
            tls.certificates(data)
            reason = "read"
        except tls.Unreadable as exc:
            reason = exc.reason
        took.append(time.process_time() - start)
    out[path] = [reason, min(took)]
print(json.dumps(out))
"""


def test_hostile_pem_of_1_mib_is_read_in_time_linear_in_its_size(dirs: tuple[Path, Path]) -> None:
    textfile, certs = dirs
    eighth = certs.parent / "eighth"
    eighth.mkdir()
    for name, (data, _) in HOSTILE_PEM.items():
        assert len(data) <= tls.MAX_FILE, name
        (certs / name).write_bytes(data)
    for name, (data, _) in _hostile(MiB // 8).items():
        (eighth / name).write_bytes(data)
    files = [str(d / name) for name in HOSTILE_PEM for d in (certs, eighth)]
    # In a child, so a reader that takes minutes fails the test at the timeout instead of hanging it.
    res = subprocess.run(
        [sys.executable, "-I", "-c", _TIMER, str(SCRIPT), *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    took = json.loads(res.stdout)
    for name, (_, reason) in HOSTILE_PEM.items():
        (big_reason, big), (small_reason, small) = took[str(certs / name)], took[str(eighth / name)]
        assert big_reason == small_reason == reason, (name, big_reason, small_reason)
        # Linear: eight times the input, about eight times the work; a reader that goes back over
        # the input for each line (quadratic) does 64 times the work. 2 s of CPU is a ceiling far
        # above a linear read (tens of milliseconds) and far below a quadratic one (minutes).
        assert big < 24 * small + 0.02, (name, big, small)
        assert big < 2.0, (name, big)
    # The whole run over the same directory: each file is one unreadable sample, nothing else.
    start = time.monotonic()
    res = run(textfile, certs)
    assert res.returncode == 0 and time.monotonic() - start < 30, res.stderr
    assert f'"unreadable": {len(HOSTILE_PEM)}' in res.stdout


def test_pem_text_around_blocks_crlf_and_blanks_read_broken_blocks_not(dirs: tuple[Path, Path]) -> None:
    textfile, certs = dirs
    chain = pem(LEAF, make_cert(dt(2020, 1, 1), dt(2040, 1, 1)))
    explained = b"subject=CN = gpu01\nissuer=CN = gpu01\n" + chain + b"trailing words\n"
    (certs / "explained.crt").write_bytes(explained)
    (certs / "crlf.crt").write_bytes(chain.replace(b"\n", b"\r\n"))
    blanks = pem(LEAF).replace(b"-----\n", b"-----  \n").replace(b"\n", b" \n", 3)
    (certs / "blanks.crt").write_bytes(blanks)
    lines = pem(LEAF).splitlines(keepends=True)
    (certs / "never-ended.crt").write_bytes(chain + b"".join(lines[:-1]))
    (certs / "nested.crt").write_bytes(b"".join(lines[:2]) + BEGIN + b"".join(lines[2:]))
    (certs / "a-key-inside.crt").write_bytes(
        b"".join(lines[:2]) + b"-----BEGIN PRIVATE KEY-----\n" + b"".join(lines[2:])
    )
    (certs / "sixty-five.crt").write_bytes(pem(LEAF) * (tls.MAX_CERTS + 1))
    (certs / "sixty-four.crt").write_bytes(pem(LEAF) * tls.MAX_CERTS)
    res = run(textfile, certs)
    assert res.returncode == 0, res.stderr
    got = metrics(textfile)
    after = str(ts(LEAF)[1])
    for name, count in (("explained.crt", 2), ("crlf.crt", 2), ("blanks.crt", 1), ("sixty-four.crt", 64)):
        sample = f'vigil_tls_certificate_not_after_seconds{{path="{certs / name}",index='
        assert got[f'{sample}"0"}}'] == after, name
        assert f'{sample}"{count - 1}"}}' in got and f'{sample}"{count}"}}' not in got, name
    for name, reason in (
        ("never-ended.crt", "bad-pem"),
        ("nested.crt", "bad-pem"),
        ("a-key-inside.crt", "bad-pem"),
        ("sixty-five.crt", "too-many"),
    ):
        sample = f'vigil_tls_certificate_unreadable{{path="{certs / name}",reason="{reason}"}}'
        assert got.get(sample) == "1", name
    promtool_accepts(textfile)


def test_one_run_reads_at_most_its_budget(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for directory in (first, second):
        for n in range(3):
            (directory / f"{n}.crt").write_bytes(pem(LEAF) + b"#" * (MiB - 2048))
    budget = tls.Budget(3 * MiB + MiB // 2)
    found, bad = tls.scan(str(first), budget)
    assert len(found) == 3 and bad == []
    found, bad = tls.scan(str(second), budget)
    assert [p.rsplit("/", 1)[1] for p, *_ in found] == ["0.crt"]
    assert bad == [(str(second / "1.crt"), "too-many"), (str(second / "2.crt"), "too-many")]
    assert tls.Budget().left == tls.MAX_TOTAL == 32 * MiB
