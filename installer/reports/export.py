"""``report export``: a stored report with everything an auditor needs to check it without vigil."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from vigil.basics.atomic import fsync_dir
from vigil.installer.reports.errors import ReportError, ReportVerifyError
from vigil.installer.reports.store import CSV_NAME, JSON_NAME, PDF_NAME, Stored
from vigil.installer.reports.verify import SIG_SUFFIX, load_pub, verify_report

PUB_NAME = "report.pub"
README_NAME = "README.txt"


def readme(stored: Stored, key_id: str) -> str:
    return f"""vigil {stored.kind} report {stored.label}
SHA-256 of report.json: {stored.sha256}
Signed with the appliance's report key {key_id} (minisign format, Ed25519).

Files
  report.json           the report: canonical JSON (sorted keys, no spaces, UTF-8)
  report.json.minisig   its signature
  report.csv            the same figures as CSV (a rendering of report.json), and its signature
  report.pdf            tables and plots for reading (a rendering of report.json), and its signature
  report.pub            the report public key (compare its id, {key_id}, with the one the
                        appliance's operator gave you out of band)

Verify with the stock minisign tool (no vigil needed):
  minisign -V -m report.json -x report.json.minisig -p report.pub
  minisign -V -m report.csv -x report.csv.minisig -p report.pub
  minisign -V -m report.pdf -x report.pdf.minisig -p report.pub
minisign prints "Signature and comment signature verified" and the trusted comment, which names
the report's SHA-256 (for report.csv and report.pdf: "csv of sha256:..." and "pdf of sha256:...");
all three must name the SHA-256 that this prints:
  sha256sum report.json
A CSV or PDF whose comment names another SHA-256 is a rendering of another report, even though
its signature verifies.

Or with vigil, which checks the CSV and the PDF beside report.json too:
  vigil report verify report.json --pub report.pub
Any change to report.json, even one character, makes verification fail.
"""


def export_report(stored: Stored, pub: Path, key_id: str, out: Path) -> Path:
    """Copy the report, its CSV and PDF, their signatures, the public key and a README into the new
    directory ``out`` (staged beside it, then renamed: it exists whole or not at all). The staged
    copies are verified against ``pub`` before the rename: the JSON names ``stored``'s digest and
    each rendering is bound to it, else nothing is exported and the stored file is named."""
    if os.path.lexists(out):
        raise ReportError(str(out), "already exists; give a new directory")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ReportError(str(parent), "directory does not exist")
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    try:
        names = [JSON_NAME, JSON_NAME + SIG_SUFFIX, CSV_NAME, CSV_NAME + SIG_SUFFIX]
        if os.path.lexists(stored.dir / PDF_NAME):  # reports stored before the PDF rendering have none
            names += [PDF_NAME, PDF_NAME + SIG_SUFFIX]
        for name in names:
            src = stored.dir / name
            if os.path.islink(src):
                raise ReportError(str(src), "is a symbolic link; refusing to follow it")
            if not src.is_file():
                raise ReportError(str(src), "missing from the stored report")
            shutil.copyfile(src, stage / name)
            os.chmod(stage / name, 0o444)
        shutil.copyfile(pub, stage / PUB_NAME)
        key = load_pub(stage / PUB_NAME)
        try:  # what leaves is what was checked: the copies, against the key they leave with
            verified = verify_report(stage / JSON_NAME, key)
        except ReportVerifyError as exc:  # named as stored: the stage is gone when this is read
            where = str(stored.dir / Path(exc.obj).name)
            raise ReportVerifyError(where, exc.reason.replace(str(stage), str(stored.dir))) from None
        if verified.sha256 != stored.sha256:
            raise ReportVerifyError(
                str(stored.json_path), f"its SHA-256 is {verified.sha256}, not {stored.sha256} as stored"
            )
        (stage / README_NAME).write_text(readme(stored, key_id))
        os.chmod(stage, 0o755)  # noqa: S103 - an export is for others to read (nothing in it is secret)
        fsync_dir(stage)
        os.rename(stage, out)
        fsync_dir(parent)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out
