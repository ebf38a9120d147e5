"""Widgets shared by the screens: the one-line result of an action, and progress fed from ops events."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.widgets import Static

from vigil.installer.ops import Bytes, Event
from vigil.tui.untrusted import plain_lines


class ResultLine(Static):
    """What the last action came to: ``OK: …`` in green, or the ``FAIL: …`` lines the CLI prints, in a
    red box nobody can miss. Also plain information while something runs.

    A line often holds what the action was given or found (a bundle's file name, a host's answer):
    it is shown as text, its control characters escaped (:mod:`vigil.tui.untrusted`); :attr:`lines`
    keeps it as it was."""

    DEFAULT_CSS = """
    ResultLine { height: auto; max-height: 6; padding: 0 1; }
    ResultLine.-ok { color: $success; text-style: bold; }
    ResultLine.-fail { color: $text; background: $error 30%; border: heavy $error; text-style: bold; }
    ResultLine.-info { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__("", id=id, markup=False)
        self.lines: list[str] = []

    def _set(self, kind: str, lines: list[str]) -> None:
        self.lines = list(lines)
        self.set_classes(f"-{kind}")
        self.update(plain_lines(lines))

    def ok(self, line: str) -> None:
        self._set("ok", [line])

    def fail(self, lines: list[str]) -> None:
        self._set("fail", lines)

    def info(self, line: str) -> None:
        self._set("info", [line])

    def clear(self) -> None:
        self._set("info", [])

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


class EventRelay:
    """An ``Invocation.on_event`` that hands the operation's events to the UI thread.

    Called on the worker thread; it marshals each event with ``app.call_from_thread`` (which waits for
    the UI to take it). Byte counts coalesce: at most one every ``interval`` seconds, and always the
    last one of a stream, so that hashing a 10 GB bundle does not wait on the screen.
    """

    def __init__(self, app: App[object], deliver: Callable[[Event], None], interval: float = 0.05) -> None:
        self.app = app
        self.deliver = deliver
        self.interval = interval
        self._last = 0.0

    def __call__(self, event: Event) -> None:
        now = time.monotonic()
        if isinstance(event, Bytes):
            final = event.total is not None and event.done >= event.total
            if not final and now - self._last < self.interval:
                return
        self._last = now
        to_ui(self.app, self.deliver, event)


def to_ui(app: App[object], callback: Callable[..., object], *args: Any) -> None:
    """From a worker thread: run CALLBACK(*ARGS) on the UI thread and wait for it. When the app has
    gone (quit while the work finished) there is nobody to tell; the work's audit record is still written."""
    with contextlib.suppress(RuntimeError):
        app.call_from_thread(callback, *args)
