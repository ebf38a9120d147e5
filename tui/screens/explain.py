"""A job explained (`vigil explain job`, docs/incidents.md), over the screen it was asked from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from vigil.tui.untrusted import plain


class ExplainScreen(ModalScreen[None]):
    """The explanation's lines: each the store's data, shown as plain text one line each (a line
    break a label held stays ``\\n``: it starts no line of its own)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="close-explain"),
    ]
    DEFAULT_CSS = """
    ExplainScreen { align: center middle; }
    ExplainScreen > VerticalScroll { width: 96%; height: 90%; border: round $accent; background: $surface; }
    ExplainScreen #explanation { width: 100%; }
    """

    def __init__(self, title: str, lines: Sequence[str]) -> None:
        super().__init__()
        self.title_text = title
        self.lines = list(lines)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(plain(self.title_text, "bold"), id="explain-title")
            yield Static(Text("\n").join(plain(line) for line in self.lines), id="explanation")
        yield Footer(compact=True)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
