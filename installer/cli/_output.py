"""Output helpers shared by the subcommands: OK lines, JSON, and the operations' progress events.

Text a host, a service, a bundle or the audit trail supplied reaches the terminal through
:func:`say` or :func:`ok` (and the FAIL line through ``main``): each line is printed with its control
characters, escape sequences, bidirectional overrides and newlines written out as visible escapes
(:func:`vigil.basics.printable.visible`), so it can neither rewrite nor hide another line, nor start
one of its own. JSON output escapes them by itself (``\u001b``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TextIO

from vigil.basics.printable import visible
from vigil.installer.ops import Event, Invocation, Step


def ok(obj: str, message: str) -> None:
    print(f"OK: {visible(obj)}: {visible(message)}")


def say(*lines: object, file: TextIO | None = None, flush: bool = False) -> None:
    """Print each of LINES as one line of its own (a newline inside it is shown as ``\\n``)."""
    for line in lines:
        print(visible(line), file=file, flush=flush)


def visible_tree(value: Any) -> Any:
    """VALUE (JSON-like data) with every string, keys too, made :func:`visible` for one line."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible_tree(k): visible_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [visible_tree(v) for v in value]
    return value


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
                    say(f"{steps}{event.text}", file=sys.stderr, flush=True)
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
