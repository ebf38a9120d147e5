"""Text from outside vigil, made safe to show on a terminal.

A terminal obeys the escape sequences and control characters in what it is sent: ``\\x1b[2K\\r``
erases the line just printed, ``\\x1b[1A`` moves back up to rewrite an earlier one, a bidirectional
override (U+202E) shows the characters after it reversed, and a newline in what should be one field
starts a line that looks like vigil's own (``OK: …``). Host status documents, answers from services,
an unverified bundle's names and audit records all carry such text.

:func:`visible` writes every such character out as an escape the operator can see (``\\x1b``,
``\\u202e``): controls (C0, C1, DEL), format characters (the bidirectional overrides and isolates,
zero-width characters, tags), lone surrogates, line and paragraph separators. The command line
prints host text through it; the console (``vigil.tui.untrusted``) shows it the same way.
"""

from __future__ import annotations

import unicodedata

#: the Unicode categories written out as escapes: controls, format characters (the bidirectional
#: overrides and isolates, zero-width characters, tags), surrogates, line and paragraph separators
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape(ch: str) -> str:
    if unicodedata.category(ch) not in ESCAPED_CATEGORIES:
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_all(text: str) -> str:
    return "".join(map(_escape, text))


def visible(value: object, *, newlines: bool = False) -> str:
    """VALUE as a string with its control characters written out as escapes; with NEWLINES, line
    feeds and tabs are kept (for text shown over several lines), else they are escaped too (one field,
    one line)."""
    text = str(value)
    if text.isprintable():  # the common case: nothing to escape (a space is printable)
        return text
    if newlines:
        return "\n".join("\t".join(map(_escape_all, line.split("\t"))) for line in text.split("\n"))
    return _escape_all(text)


__all__ = ["ESCAPED_CATEGORIES", "visible"]
