"""The base of every error vigil reports to an operator.

Every error carries the object it is about and a short factual reason; a front end prints
``FAIL: <object>: <reason>`` and nothing else unless asked for the traceback. Each package derives
its own domain errors from :class:`VigilError` (``BundleError``, ``AuditError``, ``LabError``, …).
"""

from __future__ import annotations


class VigilError(Exception):
    """Base class of every error vigil reports to an operator."""

    #: audit outcome for this kind of error: "refused" when input was rejected on purpose,
    #: "failed" when something went wrong while trying.
    outcome = "failed"

    def __init__(self, obj: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"{obj}: {reason}")
        self.obj = obj
        self.reason = reason
        self.hint = hint

    def diagnostics(self) -> str:
        """A longer hint for the operator, when there is one."""
        return self.hint or ""


class UsageError(VigilError):
    """Bad usage of a front end (unknown option, missing argument)."""

    outcome = "refused"
