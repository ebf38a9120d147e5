"""The appliance's report key: ``$VIGIL_HOME/reports/key/report.key`` (0600) and ``report.pub``.

Made on first use (the appliance signs unattended, so the key is not encrypted; it is protected by
its mode, root's, as the audit key is). The public key is in minisign's format: an auditor checks a
report with ``minisign -V -m report.json -x report.json.minisig -p report.pub``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vigil.bundle.errors import KeyFileError
from vigil.bundle.signing import SigningKey, generate_keypair, load_public_key, load_signing_key
from vigil.installer.reports.errors import ReportError

KEY_DIR = "key"
KEY_NAME = "report"


def key_paths(reports_dir: Path) -> tuple[Path, Path]:
    d = reports_dir / KEY_DIR
    return d / f"{KEY_NAME}.key", d / f"{KEY_NAME}.pub"


def report_key(reports_dir: Path, *, create: bool = True) -> SigningKey:
    """The report signing key, made (with its directory, 0700) when there is none and ``create``."""
    key_dir = reports_dir / KEY_DIR
    key_path, pub_path = key_paths(reports_dir)
    if not os.path.lexists(key_dir):
        if not create:
            raise ReportError(str(key_path), "no report key yet (it is made by the first report)")
        key_dir.mkdir(mode=0o700)
    _plain_dir(key_dir)
    for path in (key_path, pub_path):
        if os.path.islink(path):
            raise ReportError(str(path), "is a symbolic link; refusing to use it")
    if not key_path.exists():
        if not create:
            raise ReportError(str(key_path), "no report key yet (it is made by the first report)")
        if pub_path.exists():
            raise ReportError(str(key_path), f"missing, but {pub_path} exists; restore the key from a backup")
        try:
            generate_keypair(key_dir / KEY_NAME)
        except KeyFileError as exc:
            raise ReportError(exc.obj, exc.reason) from None
    try:
        key = load_signing_key(key_path)
        pub = load_public_key(pub_path)
    except KeyFileError as exc:
        raise ReportError(exc.obj, exc.reason) from None
    if pub.raw != key.public.raw:
        raise ReportError(str(pub_path), f"is not the public key of {key_path}")
    return key


def _plain_dir(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ReportError(str(path), "is not a directory (a symbolic link?); refusing to use it")
    if st.st_mode & 0o022:
        raise ReportError(
            str(path), f"is writable by others (mode {st.st_mode & 0o777:04o}); refusing to use it"
        )
