"""Text from outside the console, shown as text and nothing else.

Much of what the console shows comes from elsewhere: an unverified bundle's manifest, alert labels
(an account is whatever a Slurm user passes to ``--account``), audit records, inventories, Ansible's
output. Textual reads a ``str`` given to a table cell (and to a Label, a notification, an option) as
markup: ``[@click=app.screenshot(...)]`` would run an action when clicked, ``[/]`` would stop the
console. And a terminal obeys the escape sequences and control characters in what it is sent.

So every piece of such data reaches a widget as a :class:`rich.text.Text` made here: never parsed
as markup, its control characters (C0 and C1, DEL, the bidirectional overrides and other invisible
format characters, line and paragraph separators, lone surrogates) written out as escapes
(``\\x1b``, ``\\u202e``) that the operator can see. Our own styling is added to the ``Text``
(``style=``, :meth:`Text.assemble <rich.text.Text.assemble>`), never by formatting data into markup.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from rich.style import StyleType
from rich.text import Text

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


def visible(value: object, *, newlines: bool = False) -> str:
    """VALUE as a string with its control characters written out as escapes; with NEWLINES, line
    feeds and tabs are kept (for text shown over several lines)."""
    text = str(value)
    if text.isprintable():  # the common case: nothing to escape (a space is printable)
        return text
    if newlines:
        return "\n".join("\t".join(map(_escape_all, line.split("\t"))) for line in text.split("\n"))
    return _escape_all(text)


def _escape_all(text: str) -> str:
    return "".join(map(_escape, text))


def plain(value: object, style: StyleType = "", *, newlines: bool = False) -> Text:
    """VALUE for a widget: a Text of :func:`visible` VALUE, never markup, in STYLE (ours)."""
    return Text(visible(value, newlines=newlines), style=style, end="")


def plain_lines(lines: Iterable[object], style: StyleType = "") -> Text:
    """Several values, one (or more) lines each, for a widget that shows text over several lines."""
    return plain("\n".join(map(str, lines)), style, newlines=True)


__all__ = ["plain", "plain_lines", "visible"]
