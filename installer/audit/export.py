"""Export the audit log for an off-host copy (removable media, an auditor's machine)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from vigil.installer.audit._files import (
    DIR_MODE,
    LOG_MODE,
    PIN_MODE,
    PIN_NAME,
    PUBLIC_KEY_MODE,
    cannot,
    fsync_dir,
    locked,
)
from vigil.installer.audit.errors import AuditError
from vigil.installer.audit.log import AuditLog

EXPORTED = (
    ("log", "log.jsonl", LOG_MODE),
    ("checkpoints", "checkpoints.jsonl", LOG_MODE),
    ("public_key", "audit.pub", PUBLIC_KEY_MODE),
    # the key id pinned at first use (``trust/audit-key-id``): verify of the copy checks audit.pub against it
    ("pin", PIN_NAME, PIN_MODE),
)


def export(log: AuditLog, out: Path) -> Path:
    """Copy log, checkpoints, public key and the pinned key id into the new directory ``out``.

    The head is checkpointed first, so the copy is covered to its last record. The copy is
    taken under the audit lock (a consistent cut), staged in a hidden directory next to
    ``out`` and renamed into place; ``out`` must not exist yet.
    """
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise AuditError(f"export {out}: already exists")
    parent = out.parent
    if not parent.is_dir():
        raise AuditError(f"export {out}: directory {parent} does not exist")
    log.checkpoint()
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as exc:
        raise cannot(parent, "write", exc) from None
    try:
        os.chmod(stage, DIR_MODE)
        with locked(log.paths):
            for attr, name, mode in EXPORTED:
                src: Path = getattr(log.paths, attr)
                dst = stage / name
                with open(src, "rb") as fin, open(dst, "xb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
                    fout.flush()
                    os.fchmod(fout.fileno(), mode)
                    os.fsync(fout.fileno())
        fsync_dir(stage)
        os.rename(stage, out)
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if out.exists():
            raise AuditError(f"export {out}: already exists") from None
        raise cannot(out, "export", exc) from None
    fsync_dir(parent)
    return out
