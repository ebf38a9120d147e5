"""What every screen of the console shares: header, footer, its actions in the command palette."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from vigil.tui.session import Session

#: the screens in the order of their keys (F2 onwards): mode and label, for the bar at the top
NAV: tuple[tuple[str, str], ...] = (
    ("import", "Import"),
    ("deploy", "Deploy"),
    ("audit", "Audit"),
    ("overview", "Home"),
    ("bundle", "Bundle"),
    ("inventory", "Inventory"),
    ("reports", "Reports"),
)


def nav_text(current: str) -> str:
    """The top bar: each screen's key and label, the one in front highlighted (it fits in 80 columns;
    F1 help is in the footer)."""
    parts = []
    for n, (mode, label) in enumerate(NAV, start=2):
        text = f"F{n} {label}"
        parts.append(f"[reverse b]{text}[/]" if mode == current else text)
    return " ".join(parts)


class VigilScreen(Screen[None]):
    """A screen over one area of the operations layer."""

    #: the mode's name and the label in the footer and the palette
    MODE: ClassVar[str] = ""
    LABEL: ClassVar[str] = ""
    HELP: ClassVar[str] = ""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        yield Static(nav_text(self.MODE), id="nav")
        yield from self.body()
        yield Footer(compact=True)

    def body(self) -> ComposeResult:
        yield from ()

    def commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """This screen's actions for the command palette: each binding with a label."""
        found = []
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.description and "(" not in b.action:
                method = getattr(self, f"action_{b.action}", None)
                if method is not None:
                    found.append((b.description, b.tooltip or b.description, method))
        return found
