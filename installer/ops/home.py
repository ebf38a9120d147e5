"""The site at a glance, from this host's own state (the console's Home): the trust root installed, the
bundles in the store, the last deploy, upgrade or rollback and how it ended, the inventory it used, and
the audit trail's last verify. Reads files only: no service is asked, nothing is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vigil.basics.errors import VigilError
from vigil.bundle.store import BundleStore
from vigil.installer.audit import AuditError, AuditLog
from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.keys import show_trust

#: the actions that change what runs on the hosts
CHANGES = ("deploy", "upgrade", "rollback")


def _when(rec: dict[str, Any]) -> str:
    return str(rec.get("time", ""))[:19].replace("T", " ")


def site_summary(home: Path) -> list[str]:
    """One line each: the trust root, the bundles, the last change to the hosts, the audit trail.
    What a line holds is this host's state (a path, an inventory's name): shown as plain text."""
    lines = []
    try:
        path, root = show_trust(Invocation(home=home), None)
        lines.append(f"trust root v{root.version}: {root.threshold} of {len(root.keys)} key(s), {path}")
    except VigilError as exc:
        lines.append(f"trust root: none usable ({exc.reason}); install one with `vigil trust install`")
    try:
        versions = BundleStore(home).versions()
    except (VigilError, OSError) as exc:
        versions, note = [], f" ({exc})"
    else:
        note = ""
    last: dict[str, Any] | None = None
    verify: dict[str, Any] | None = None
    try:
        for rec in AuditLog(home).records():
            action = str(rec.get("action", ""))
            if action in CHANGES:
                last = rec
            elif action == "audit.verify":
                verify = rec
        unread = ""
    except (AuditError, OSError) as exc:
        unread = f" (the audit log cannot be read: {exc})"
    deployed = (last or {}).get("details", {}) or {}
    running = deployed.get("bundle_version")
    lines.append(
        (f"bundles: v{', v'.join(map(str, versions))} in the store" if versions else "bundles: none imported")
        + (f"; the last change ran v{running}" if running else "")
        + note
    )
    if last is None:
        lines.append(f"last deploy: none recorded{unread}")
    else:
        check = " (--check)" if deployed.get("check") else ""
        lines.append(
            f"last {last.get('action')}{check}: {last.get('outcome')} at {_when(last)} UTC, "
            f"inventory {last.get('object') or '?'}"
            + (f": {last.get('reason')}" if last.get("reason") else "")
        )
    if verify is None:
        lines.append(f"audit trail: never verified here (Audit, ctrl+y){unread}")
    else:
        d = verify.get("details") or {}
        count = f", {d['records']} records" if "records" in d else ""
        lines.append(f"audit trail: last verified {_when(verify)} UTC, {verify.get('outcome')}{count}")
    return lines
