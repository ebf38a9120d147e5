"""Record one user action: the record every front end (CLI, TUI) leaves when an action ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vigil.installer.audit.log import AuditLog


def record_command(
    home: Path,
    *,
    action: str,
    obj: str,
    outcome: str,
    reason: str = "",
    details: Mapping[str, Any] | None = None,
    argv: Sequence[str] = (),
    operator: str | None = None,
) -> dict[str, Any]:
    """Append one record for this action and a signed checkpoint over it; return the record.

    ``argv`` is what the operator asked for (a command line, or the TUI's equivalent of one) and is
    kept in the record's details. Raises :class:`~vigil.installer.audit.errors.AuditError` when the
    audit directory cannot be written (or its log is found cut or rewritten): an action that cannot
    be audited fails.
    """
    recorded = dict(details or {})
    recorded["argv"] = list(argv)
    return AuditLog(home).append(
        action, obj, outcome, reason, recorded, actor_operator=operator, checkpoint=True
    )
