"""The one error type of the audit log."""

from __future__ import annotations

from vigil.basics.errors import VigilError


class AuditError(VigilError):
    """The audit log could not be written or read, or it failed verification.

    The message names where the problem is first seen — ``record <seq>: <reason>``,
    ``checkpoint <n>: <reason>`` or ``line <n>: <reason>`` — so the CLI prints
    ``FAIL: audit: record 7: hash mismatch (record edited)``.
    """

    def __init__(self, reason: str, *, seq: int | None = None, hint: str | None = None) -> None:
        super().__init__("audit", reason, hint=hint)
        #: the first bad record's sequence number, when the problem is about one record
        self.seq = seq
