"""The base of every error vigil reports to an operator.

Every error carries the object it is about and a short factual reason; a front end prints
``FAIL: <object>: <reason>`` and nothing else unless asked for the traceback. Each package derives
its own domain errors from :class:`VigilError` (``BundleError``, ``AuditError``, ``LabError``, …).
"""

from __future__ import annotations

import re

#: the most characters of an object or a reason an error keeps; hostile input (a 30 MB path) must
#: not become a 30 MB ``FAIL`` line or audit record
MAX_OBJECT_CHARS = 1024
MAX_REASON_CHARS = 2048


def clip(text: str, limit: int) -> str:
    """``text`` itself when it has at most ``limit`` characters, else its first ``limit`` characters
    and how long the whole was: ``"aaaa… (31457280 bytes)"``."""
    if len(text) <= limit:
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}… ({size} bytes)"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """``text`` with control characters and unencodable (lone surrogate) characters written as
    escapes, so that it prints as one line and encodes as UTF-8: ``"a\\nb"`` for a newline."""
    if text.isprintable():
        return text
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class VigilError(Exception):
    """Base class of every error vigil reports to an operator."""

    #: audit outcome for this kind of error: "refused" when input was rejected on purpose,
    #: "failed" when something went wrong while trying.
    outcome = "failed"

    def __init__(self, obj: str, reason: str, *, hint: str | None = None) -> None:
        obj, reason = one_line(clip(obj, MAX_OBJECT_CHARS)), one_line(clip(reason, MAX_REASON_CHARS))
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
