"""Small output helpers shared by the subcommands: OK lines, JSON, a progress bar on a terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def ok(obj: str, message: str) -> None:
    print(f"OK: {obj}: {message}")


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


@contextmanager
def progress_bar(label: str, *, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A byte progress bar on stderr when it is a terminal; ``None`` otherwise (no output)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        transient=True,
        console=None,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        yield update
