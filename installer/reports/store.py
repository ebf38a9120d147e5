"""The report store: ``$VIGIL_HOME/reports/``, content-addressed, with an append-only index.

::

    reports/                       0700
      key/report.key, report.pub   the report key (keys.py)
      objects/<sha256>/            one directory per report, named by the SHA-256 of its JSON
        report.json                canonical JSON (0444)
        report.json.minisig        minisign signature of report.json
        report.csv, report.csv.minisig  renderings; each signature's trusted comment names the
        report.pdf, report.pdf.minisig  JSON's digest (no PDF for meter closings, or reports stored
                                        before the PDF)
      index.jsonl                  one line per generation, appended (O_APPEND), never rewritten

A report's directory is written under ``objects/.stage-*`` and renamed into place, so it is there
whole or not at all; a second generation of the same report finds its directory and only adds an
index line. A reports dir, objects dir or index that is a symbolic link, or that others may write,
is refused rather than followed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.basics.atomic import fsync_dir
from vigil.basics.canonical import canonical_json
from vigil.installer.reports.errors import ReportError
from vigil.installer.reports.keys import key_paths, report_key
from vigil.installer.reports.pdf import render_pdf
from vigil.installer.reports.render import render_csv
from vigil.installer.reports.verify import SIG_SUFFIX, rendering_comment, trusted_comment

JSON_NAME = "report.json"
CSV_NAME = "report.csv"
PDF_NAME = "report.pdf"
_HEX = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(r"[0-9a-f]{6,64}")


@dataclass(frozen=True)
class Stored:
    sha256: str
    kind: str
    label: str
    dir: Path
    #: False when the very same report was stored before (only an index line was added)
    new: bool = True

    @property
    def id(self) -> str:
        return self.sha256[:12]

    @property
    def json_path(self) -> Path:
        return self.dir / JSON_NAME

    @property
    def csv_path(self) -> Path:
        return self.dir / CSV_NAME

    @property
    def pdf_path(self) -> Path:
        return self.dir / PDF_NAME


def _check_dir(path: Path, *, create: bool) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise ReportError(str(path), "no reports here yet") from None
        path.mkdir(mode=0o700, parents=False)
        return
    if stat.S_ISLNK(st.st_mode):
        raise ReportError(str(path), "is a symbolic link; refusing to follow it")
    if not stat.S_ISDIR(st.st_mode):
        raise ReportError(str(path), "is not a directory")
    if st.st_mode & 0o022:
        raise ReportError(
            str(path), f"is writable by others (mode {st.st_mode & 0o777:04o}); refusing to use it"
        )


class ReportStore:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.dir = home / "reports"
        self.objects = self.dir / "objects"
        self.index = self.dir / "index.jsonl"

    @property
    def public_key_path(self) -> Path:
        return key_paths(self.dir)[1]

    def _open(self, *, create: bool) -> None:
        if create and not self.home.exists():
            self.home.mkdir(mode=0o755, parents=True)
        _check_dir(self.dir, create=create)
        _check_dir(self.objects, create=create)
        if os.path.islink(self.index):
            raise ReportError(str(self.index), "is a symbolic link; refusing to follow it")

    def add(self, doc: dict[str, Any], *, generated_at: str) -> Stored:
        """Sign and store ``doc`` (made canonical here); append its index line."""
        self._open(create=True)
        key = report_key(self.dir)
        data = canonical_json(doc)
        digest = hashlib.sha256(data).hexdigest()
        kind, label = str(doc["kind"]), str(doc["period"]["label"])
        comment = trusted_comment(kind, label, digest)
        # the renderings are made from the canonical JSON itself, so they are functions of it alone
        signed = json.loads(data)
        files = {
            JSON_NAME: data,
            JSON_NAME + SIG_SUFFIX: key.sign_minisig(data, trusted_comment=comment).to_text().encode(),
        }
        renderings = [(CSV_NAME, "csv", render_csv(signed))]
        if kind != "closing":  # a meter closing is figures for the yearly report, not for reading
            renderings.append((PDF_NAME, "pdf", render_pdf(signed)))
        for name, role, content in renderings:
            # the rendering is bound to this JSON: its signed comment names its role and the digest
            files[name] = content
            rendering = rendering_comment(kind, label, role, digest)
            files[name + SIG_SUFFIX] = key.sign_minisig(content, trusted_comment=rendering).to_text().encode()
        target = self.objects / digest
        new = not os.path.lexists(target)
        if new:
            stage = Path(tempfile.mkdtemp(prefix=".stage-", dir=self.objects))
            try:
                for name, content in files.items():
                    fd = os.open(stage / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
                    with os.fdopen(fd, "wb") as out:
                        out.write(content)
                        out.flush()
                        os.fsync(out.fileno())
                os.chmod(stage, 0o700)
                fsync_dir(stage)
                try:
                    os.rename(stage, target)
                except OSError:
                    if not os.path.isdir(target):  # a concurrent generation of the same report won
                        raise
                    new = False
                fsync_dir(self.objects)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
        self._check_stored(target, data)
        self._append(
            {
                "sha256": digest,
                "kind": kind,
                "period": label,
                "generated": generated_at,
                "key_id": key.id_hex,
            }
        )
        return Stored(digest, kind, label, target, new)

    def _check_stored(self, target: Path, data: bytes) -> None:
        if os.path.islink(target) or not target.is_dir():
            raise ReportError(str(target), "is not a report directory (a symbolic link?)")
        path = target / JSON_NAME
        if os.path.islink(path) or not path.is_file() or path.read_bytes() != data:
            raise ReportError(str(path), "differs from the report named by its digest (store tampered?)")

    def _append(self, entry: dict[str, Any]) -> None:
        fd = os.open(self.index, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ReportError(str(self.index), "is not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX)
            with open(self.index, "rb") as f:  # counted under the lock: no two lines get one number
                seq = sum(1 for _ in f) + 1
            line = json.dumps({"seq": seq, **entry}, sort_keys=True, separators=(",", ":")) + "\n"
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def entries(self) -> list[dict[str, Any]]:
        """The index lines in order (an empty list when nothing was stored yet)."""
        if not os.path.lexists(self.dir):
            return []
        self._open(create=False)
        if not self.index.exists():
            return []
        out = []
        with open(self.index, "rb") as f:
            for n, raw in enumerate(f, 1):
                try:
                    entry = json.loads(raw)
                    if not isinstance(entry, dict) or not _HEX.fullmatch(str(entry.get("sha256"))):
                        raise ValueError
                except ValueError:
                    raise ReportError(str(self.index), f"line {n} is not an index entry") from None
                out.append(entry)
        return out

    def find(self, ident: str) -> Stored:
        """A stored report by its digest or a prefix of it (at least 6 hex digits, unambiguous)."""
        ident = ident.lower().removeprefix("sha256:")
        if not _PREFIX.fullmatch(ident):
            raise ReportError(f"report {ident}", "not a report id (6 to 64 hex digits of its SHA-256)")
        matches = {e["sha256"]: e for e in self.entries() if e["sha256"].startswith(ident)}
        if not matches:
            raise ReportError(f"report {ident}", f"not in {self.index}")
        if len(matches) > 1:
            raise ReportError(f"report {ident}", f"ambiguous: {len(matches)} reports start with it")
        ((digest, entry),) = matches.items()
        target = self.objects / digest
        if os.path.islink(target) or not target.is_dir():
            raise ReportError(str(target), "listed in the index but missing from the store")
        return Stored(digest, str(entry["kind"]), str(entry["period"]), target, False)
