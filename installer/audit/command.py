"""Record one ``vigil`` invocation (the hook ``installer.cli.main`` calls before exiting)."""

from __future__ import annotations

from vigil.installer.audit.log import AuditLog
from vigil.installer.cli._context import Context


def record_command(ctx: Context) -> None:
    """Append one record for this invocation and a signed checkpoint over it.

    Raises :class:`~vigil.installer.audit.errors.AuditError` when the audit directory cannot be
    written (or its log is found cut or rewritten): a command that cannot be audited fails.
    """
    details = dict(ctx.audit_details)
    details["argv"] = list(ctx.argv)
    AuditLog(ctx.home).append(
        ctx.action,
        ctx.audit_object,
        ctx.outcome,
        ctx.reason,
        details,
        actor_operator=ctx.operator,
        checkpoint=True,
    )
