"""vigil.tui.untrusted: data becomes a Text, never markup, with the characters a terminal obeys escaped."""

from __future__ import annotations

import pytest
from rich.text import Text

from vigil.tui.untrusted import plain, plain_lines, visible


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("gpu01 [/] [@click=app.quit]x[/]", "gpu01 [/] [@click=app.quit]x[/]"),  # markup: as it is
        ("café ① 😀 a\u00a0b", "café ① 😀 a\u00a0b"),  # printable, wide and non-breaking: as they are
        ("\x1b[2J\x00\x07\x7f", "\\x1b[2J\\x00\\x07\\x7f"),  # C0 and DEL
        ("\x9b31m\x85", "\\x9b31m\\x85"),  # C1: CSI, NEL
        ("a\u202eb\u2066c\u200bd\ufeff", "a\\u202eb\\u2066c\\u200bd\\ufeff"),  # bidi, zero-width
        ("x\u2028y\u2029z", "x\\u2028y\\u2029z"),  # line and paragraph separators
        ("t\U000e0041g", "t\\U000e0041g"),  # a tag character (invisible)
        ("bad\udcff", "bad\\udcff"),  # a lone surrogate (an undecodable file name)
        ("a\nb\tc\r", "a\\x0ab\\x09c\\x0d"),  # one line: line feeds and tabs too
    ],
)
def test_controls_are_written_as_escapes(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    text = plain(raw, "bold")
    assert isinstance(text, Text) and text.plain == shown and text.spans == []
    assert str(text.style) == "bold"


def test_several_lines_keep_their_line_feeds_and_tabs() -> None:
    assert visible("a\tb\n\x1b[1mc\r\n", newlines=True) == "a\tb\n\\x1b[1mc\\x0d\n"
    text = plain_lines(["one [b]", "two\x9b", 3])
    assert text.plain == "one [b]\ntwo\\x9b\n3" and text.spans == []
