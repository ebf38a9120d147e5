"""Check a report file against its signature and a public key, as ``minisign -V`` would, and more:
the file must also be the canonical form of its JSON and the signature's trusted comment must name
its digest."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from vigil.basics.bounded import load_json
from vigil.basics.canonical import canonical_json
from vigil.bundle.errors import KeyFileError, SignatureError
from vigil.bundle.signing import Minisig, PublicKey, load_public_key
from vigil.installer.reports.errors import ReportVerifyError

MAX_REPORT_BYTES = 256 << 20
SIG_SUFFIX = ".minisig"


@dataclass(frozen=True)
class Verified:
    path: Path
    kind: str
    label: str
    sha256: str
    key_id: str


def trusted_comment(kind: str, label: str, digest: str) -> str:
    return f"vigil {kind} report {label} sha256:{digest}"


def _read(path: Path, limit: int) -> bytes:
    where = str(path)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ReportVerifyError(where, f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ReportVerifyError(where, "not a regular file")
    if st.st_size > limit:
        raise ReportVerifyError(where, f"larger than {limit} bytes")
    try:
        with open(path, "rb") as f:
            return f.read(limit + 1)
    except OSError as exc:
        raise ReportVerifyError(where, f"cannot read: {exc.strerror}") from None


def load_pub(path: Path) -> PublicKey:
    try:
        return load_public_key(path)
    except KeyFileError as exc:
        raise ReportVerifyError(exc.obj, exc.reason) from None


def verify_file(path: Path, pub: PublicKey, *, signature: Path | None = None) -> Verified:
    """1 read, 2 signature over the bytes, 3 trusted comment, 4 canonical form, 5 digest named."""
    where = str(path)
    data = _read(path, MAX_REPORT_BYTES)
    sig_path = signature or path.with_name(path.name + SIG_SUFFIX)
    try:
        sig = Minisig.parse(_read(sig_path, 4096), where=str(sig_path))
        pub.verify_minisig(data, sig, what=where)
    except SignatureError as exc:
        raise ReportVerifyError(where, exc.reason) from None
    except ReportVerifyError as exc:
        raise ReportVerifyError(where, f"signature {sig_path}: {exc.reason}") from None
    try:
        doc = load_json(data, where, error=ReportVerifyError)
        canonical = canonical_json(doc)
    except ValueError:
        raise ReportVerifyError(where, "not JSON (yet signed: made by something other than vigil?)") from None
    if canonical != data:
        raise ReportVerifyError(where, "signed, but not canonical JSON (not a vigil report)")
    digest = hashlib.sha256(data).hexdigest()
    kind = str(doc.get("kind", "")) if isinstance(doc, dict) else ""
    label = str(doc.get("period", {}).get("label", "")) if isinstance(doc, dict) else ""
    if sig.trusted_comment != trusted_comment(kind, label, digest):
        raise ReportVerifyError(
            where, f"signature's trusted comment does not name this report: {sig.trusted_comment!r}"
        )
    return Verified(path, kind, label, digest, pub.id_hex)
