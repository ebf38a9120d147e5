"""The hosts x status grid: one line per host, drawn from a cache of finished lines.

Textual's DataTable draws every visible cell again after any change to any cell (its caches are
keyed by a table-wide update count), so a 500-host run, where some host changes every few
milliseconds, kept it repainting whole screens: 40 to 100 ms a frame on these machines, which
became the event lag. Here a changed row drops only its own line from the cache and asks for only
that screen line to be repainted; a paint of unchanged rows costs a dictionary lookup each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


class HostGrid(ScrollView, can_focus=True):
    """Rows keyed by host, fixed columns (``(key, label, width)``; width None: as wide as the widest
    cell), a header line that stays at the top, scrolled with the arrow and page keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_home", "First", show=False),
        Binding("end", "scroll_end", "Last", show=False),
    ]

    DEFAULT_CSS = """
    HostGrid { background: $surface; }
    HostGrid > .host-grid--header { text-style: bold; background: $panel; }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"host-grid--header"}

    def __init__(
        self,
        columns: Sequence[tuple[str, str, int | None]],
        *,
        id: str | None = None,  # noqa: A002
    ) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self._widths = [w if w is not None else len(label) for _, label, w in self.columns]
        self._order: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: dict[str, tuple[Text, ...]] = {}
        #: the drawn line of each row, with the base style it was drawn on
        self._lines: dict[str, tuple[Style, Strip]] = {}
        self.repaints = 0  # rows drawn afresh (for the benchmark and the tests)

    # -- the data ----------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    def clear(self) -> None:
        self._order, self._index, self._cells, self._lines = [], {}, {}, {}
        self._widths = [w if w is not None else len(label) for _, label, w in self.columns]
        self._resize()
        self.refresh()

    def set_row(self, key: str, cells: Sequence[Text]) -> None:
        """Add the row KEY, or change its cells; only its own line is drawn again."""
        if len(cells) != len(self.columns):
            raise ValueError(f"row {key}: {len(cells)} cells for {len(self.columns)} columns")
        cells = tuple(cells)
        if self._cells.get(key) == cells:
            return
        self._cells[key] = cells
        self._lines.pop(key, None)
        widened = False
        for i, (_, _, fixed) in enumerate(self.columns):
            if fixed is None and cells[i].cell_len > self._widths[i]:
                self._widths[i] = cells[i].cell_len
                widened = True
        if key not in self._index:
            self._index[key] = len(self._order)
            self._order.append(key)
            self._resize()
        if widened:  # a wider column moves every line: all of them are drawn again
            self._lines.clear()
            self._resize()
            self.refresh()
            return
        virtual = 1 + self._index[key]  # the header is line 0
        if 1 <= virtual - self.scroll_offset.y < self.size.height:
            self.refresh_line(virtual)

    def row_text(self, key: str) -> list[str]:
        """The row's cells as plain text (what the screen shows, uncut)."""
        return [c.plain for c in self._cells[key]]

    # -- drawing ---------------------------------------------------------------------------------
    def _resize(self) -> None:
        width = sum(w + 2 for w in self._widths)
        self.virtual_size = Size(width, len(self._order) + 1)

    def _strip(self, cells: Sequence[Text], base: Style) -> Strip:
        segments = []
        for text, width in zip(cells, self._widths, strict=True):
            plain = text.plain
            if len(plain) > width:
                plain = plain[: max(0, width - 1)] + "…"
            style = (
                base + text.style if isinstance(text.style, Style) else base + Style.parse(text.style or "")
            )
            segments.append(Segment(" " + plain.ljust(width) + " ", style))
        return Strip(segments)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:
            header = self.get_component_rich_style("host-grid--header")
            strip = self._strip([Text(label) for _, label, _ in self.columns], base + header)
        else:
            index = y - 1 + scroll_y
            if index >= len(self._order):
                return Strip.blank(width, base)
            key = self._order[index]
            cached = self._lines.get(key)
            if cached is not None and cached[0] == base:
                strip = cached[1]
            else:
                strip = self._strip(self._cells[key], base)
                self._lines[key] = (base, strip)
                self.repaints += 1
        return strip.crop_extend(scroll_x, scroll_x + width, base)
