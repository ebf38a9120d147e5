"""Output helpers shared by the subcommands: OK lines, JSON, and the operations' progress events."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from vigil.installer.ops import Event, Invocation, Step


def ok(obj: str, message: str) -> None:
    print(f"OK: {obj}: {message}")


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


@contextmanager
def showing_progress(inv: Invocation, *, steps: str | None = None, bars: bool = True) -> Iterator[None]:
    """Show the operation's events on stderr while the block runs.

    ``steps``: the prefix for each step line (None: steps are not shown). ``bars``: a byte progress bar
    per label, only when stderr is a terminal (a log file gets no bar).
    """
    show_bars = bars and sys.stderr.isatty()
    with ExitStack() as stack:
        progress: Any = None
        tasks: dict[str, Any] = {}

        def on_event(event: Event) -> None:
            nonlocal progress
            if isinstance(event, Step):
                if steps is not None:
                    print(f"{steps}{event.text}", file=sys.stderr, flush=True)
            elif show_bars:
                if progress is None:
                    progress = stack.enter_context(_bar())
                if event.label not in tasks:
                    tasks[event.label] = progress.add_task(event.label, total=None)
                progress.update(tasks[event.label], completed=event.done, total=event.total or None)

        saved = inv.on_event
        inv.on_event = on_event
        try:
            yield
        finally:
            inv.on_event = saved


def _bar() -> Any:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        transient=True,
        console=None,
    )
