"""A channel's components as its lock pins them (version, kind, licence, bytes to fetch), and the
state of each while a build runs: waiting, fetching (download or cache), checked (its upstream
sha256 as locked), staged, then for all of them compressing, signing and signed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.widgets import DataTable

from vigil.bundle.catalog import Catalog, Lock
from vigil.tui.untrusted import plain

#: a licence longer than this is cut in the table (the whole text is in the lock and the SBOM)
LICENCE_WIDTH = 28

STATE_STYLE = {
    "waiting": "dim",
    "fetching": "bold yellow",
    "checked": "yellow",
    "staged": "green",
    "compressing": "yellow",
    "signing": "yellow",
    "signed": "bold green",
    "failed": "bold red",
}


@dataclass(frozen=True)
class ComponentRow:
    name: str
    version: str
    kind: str
    licence: str
    #: bytes of its upstream artifacts, as the lock pins them (None: not locked, or not known)
    size: int | None
    artifacts: int


def component_rows(catalog: Catalog, lock: Lock | None) -> list[ComponentRow]:
    """The lock's components; without a lock, the catalog's (their sizes are not known yet)."""
    if lock is None:
        return [
            ComponentRow(c.name, c.version or "(from its project)", c.source.kind, c.license, None, 0)
            for c in catalog.components
        ]
    rows = []
    for c in lock.components:
        sizes = [a.size for a in c.artifacts]
        size = sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
        rows.append(ComponentRow(c.name, c.version, c.kind, c.license, size, len(c.artifacts)))
    return rows


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


class ComponentTable(DataTable[Text]):
    """One row per component; the state column follows the build's steps."""

    #: what matters most first: at 80 columns the licence is cut (the highlighted row says it whole)
    COLUMNS: ClassVar[tuple[str, ...]] = ("component", "version", "size", "state", "licence", "kind")

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.rows_shown: list[ComponentRow] = []
        self.states: dict[str, str] = {}
        #: every state each component went through in the last build, in order
        self.history: dict[str, list[str]] = {}
        self._current: str | None = None

    def on_mount(self) -> None:
        # the state column is empty until a build starts: as wide as its longest state from the first,
        # or it keeps the header's width and cuts them ("waiti")
        widths = {"state": max(map(len, STATE_STYLE))}
        for col in self.COLUMNS:
            self.add_column(col, key=col, width=widths.get(col))

    def show(self, rows: list[ComponentRow]) -> None:
        self.clear()
        self.rows_shown = list(rows)
        self.states = {r.name: "" for r in rows}
        self._current = None
        for r in rows:
            licence = r.licence if len(r.licence) <= LICENCE_WIDTH else r.licence[: LICENCE_WIDTH - 1] + "…"
            cells = (r.name, r.version, _size(r.size), "", licence, r.kind)
            self.add_row(*map(plain, cells), key=r.name)

    def detail(self, index: int) -> str:
        """The row at INDEX in one line, its licence whole."""
        if not 0 <= index < len(self.rows_shown):
            return ""
        r = self.rows_shown[index]
        what = f"{r.artifacts} artifact(s), {_size(r.size)}" if r.artifacts else "not locked"
        return f"{r.name} {r.version} ({r.kind}): licence {r.licence}; {what}"

    def total_size(self) -> int | None:
        sizes = [r.size for r in self.rows_shown]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    def set_state(self, name: str, state: str) -> None:
        if name not in self.states:
            return
        self.states[name] = state
        self.history.setdefault(name, []).append(state)
        self.update_cell(name, "state", Text(state, style=STATE_STYLE.get(state, "")))

    def start(self) -> None:
        """A build begins: every component waits."""
        self._current = None
        self.history = {}
        for name in self.states:
            self.set_state(name, "waiting")

    def fetching(self, name: str) -> None:
        """The build's step ``fetch NAME …``: this one is under way (the one before is staged)."""
        self._current = name
        self.set_state(name, "fetching")
        if name in self.states:
            self.move_cursor(row=self.get_row_index(name))

    def all(self, state: str) -> None:
        """Every component reached STATE (packed into the payload, signed)."""
        self._current = None
        for name in self.states:
            self.set_state(name, state)

    def failed(self) -> None:
        """The build stopped: the component under way is the one it stopped at."""
        if self._current is not None:
            self.set_state(self._current, "failed")
        self._current = None
