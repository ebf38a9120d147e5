"""Text from outside the console, shown as text and nothing else.

Much of what the console shows comes from elsewhere: an unverified bundle's manifest, alert labels
(an account is whatever a Slurm user passes to ``--account``), audit records, inventories, Ansible's
output. Textual reads a ``str`` given to a table cell (and to a Label, a notification, an option) as
markup: ``[@click=app.screenshot(...)]`` would run an action when clicked, ``[/]`` would stop the
console. And a terminal obeys the escape sequences and control characters in what it is sent.

So every piece of such data reaches a widget as a :class:`rich.text.Text` made here: never parsed
as markup, its control characters (C0 and C1, DEL, the bidirectional overrides and other invisible
format characters, line and paragraph separators, lone surrogates) written out as escapes
(``\\x1b``, ``\\u202e``) that the operator can see, by :func:`vigil.basics.printable.visible`, as the
command line prints them. Our own styling is added to the ``Text``
(``style=``, :meth:`Text.assemble <rich.text.Text.assemble>`), never by formatting data into markup.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import StyleType
from rich.text import Text

from vigil.basics.printable import visible


def plain(value: object, style: StyleType = "", *, newlines: bool = False) -> Text:
    """VALUE for a widget: a Text of :func:`visible` VALUE, never markup, in STYLE (ours)."""
    return Text(visible(value, newlines=newlines), style=style, end="")


def plain_lines(lines: Iterable[object], style: StyleType = "") -> Text:
    """Several values, one (or more) lines each, for a widget that shows text over several lines."""
    return plain("\n".join(map(str, lines)), style, newlines=True)


__all__ = ["plain", "plain_lines", "visible"]
