"""Check a report file against its signature and a public key, as ``minisign -V`` would, and more:
the file must also be the canonical form of its JSON and the signature's trusted comment must name
its digest. Its renderings (CSV, PDF) are bound to it the same way: each one's signed trusted
comment names its role and the JSON's digest, so a rendering of another report, signed by the same
key, does not pass beside it."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from vigil.basics.bounded import load_json
from vigil.basics.canonical import canonical_json
from vigil.bundle.errors import KeyFileError, SignatureError
from vigil.bundle.signing import Minisig, PublicKey, load_public_key
from vigil.installer.reports.errors import ReportVerifyError

MAX_REPORT_BYTES = 256 << 20
SIG_SUFFIX = ".minisig"


#: the renderings stored and exported beside a report's JSON: (role, suffix)
RENDERINGS = (("csv", ".csv"), ("pdf", ".pdf"))
_RENDERING_COMMENT = re.compile(r"vigil \S+ report .* (csv|pdf) of sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class Verified:
    path: Path
    kind: str
    label: str
    sha256: str
    key_id: str
    #: the renderings checked beside the JSON and bound to it (empty when only the JSON was checked)
    renderings: tuple[Path, ...] = ()

    @property
    def renderings_note(self) -> str:
        """What was said of the renderings, for the front ends' ``OK`` line."""
        if not self.renderings:
            return "no rendering beside it"
        return f"{', '.join(p.name for p in self.renderings)} bound to it"


def trusted_comment(kind: str, label: str, digest: str) -> str:
    return f"vigil {kind} report {label} sha256:{digest}"


def rendering_comment(kind: str, label: str, role: str, digest: str) -> str:
    """The trusted comment of a rendering's signature: its role and the digest of its JSON."""
    return f"vigil {kind} report {label} {role} of sha256:{digest}"


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


def _signed(path: Path, pub: PublicKey) -> tuple[bytes, Minisig]:
    """``path``'s bytes, checked against ``path.minisig``: the signature and its trusted comment's."""
    where = str(path)
    data = _read(path, MAX_REPORT_BYTES)
    sig_path = path.with_name(path.name + SIG_SUFFIX)
    try:
        sig = Minisig.parse(_read(sig_path, 4096), where=str(sig_path))
        pub.verify_minisig(data, sig, what=where)
    except SignatureError as exc:
        raise ReportVerifyError(where, exc.reason) from None
    except ReportVerifyError as exc:
        raise ReportVerifyError(where, f"signature {sig_path}: {exc.reason}") from None
    return data, sig


def verify_file(path: Path, pub: PublicKey) -> Verified:
    """The report's JSON alone: 1 read, 2 signature over the bytes, 3 trusted comment's signature,
    4 canonical form, 5 digest named."""
    where = str(path)
    data, sig = _signed(path, pub)
    try:
        doc = load_json(data, where, error=ReportVerifyError)
        canonical = canonical_json(doc)
    except ValueError:
        bound = _RENDERING_COMMENT.fullmatch(sig.trusted_comment)
        if bound:
            raise ReportVerifyError(
                where,
                f"a rendering ({bound[1]}) of the report sha256:{bound[2]}, not a report: verify its "
                "report.json, which checks the renderings beside it",
            ) from None
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


def rendering_path(report: Path, role: str) -> Path:
    """Where the ``role`` rendering of ``report`` lies: beside it, its suffix changed (report.csv)."""
    return report.with_suffix(dict(RENDERINGS)[role])


def verify_rendering(path: Path, pub: PublicKey, report: Verified, role: str) -> None:
    """One rendering of ``report``: 1 signature over its bytes, 2 its trusted comment's signature,
    3 the comment names its role and the digest of ``report``'s JSON."""
    _, sig = _signed(path, pub)
    if sig.trusted_comment != rendering_comment(report.kind, report.label, role, report.sha256):
        bound = _RENDERING_COMMENT.fullmatch(sig.trusted_comment)
        if bound and bound[2] != report.sha256:
            why = f"signed as the {bound[1]} of another report, sha256:{bound[2]}"
        else:
            why = f"its signature's trusted comment does not name it the {role} of this report"
        raise ReportVerifyError(
            str(path), f"not a rendering of {report.path.name} (sha256:{report.sha256}): {why}"
        )


def verify_report(path: Path, pub: PublicKey) -> Verified:
    """The report's JSON (:func:`verify_file`), then each rendering lying beside it
    (:func:`verify_rendering`); a rendering that is there must verify and be bound to this JSON."""
    verified = verify_file(path, pub)
    checked = []
    for role, _ in RENDERINGS:
        rendering = rendering_path(path, role)
        if os.path.lexists(rendering):
            verify_rendering(rendering, pub, verified, role)
            checked.append(rendering)
    return replace(verified, renderings=tuple(checked))
