"""Tamper-evident audit log (being written; see issue 6)."""

from __future__ import annotations

from installer.cli._context import Context


def record_command(ctx: Context) -> None:
    """Append one record for this invocation and a signed checkpoint."""
    return None
