"""Figures a test measures but never asserts (how long an `up` or a deploy took).

Speed is measured, not asserted: a test records a figure with ``measured(name, seconds)`` (the
fixture in tests/conftest.py); each figure goes into the JUnit XML as a property of its test and
is listed at the end of the run, and written as JSON to $VIGIL_TEST_FIGURES when that is set.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Figures:
    """name -> (test node id, seconds), in the order recorded."""

    items: dict[str, tuple[str, float]] = field(default_factory=dict)

    def add(self, name: str, seconds: float, nodeid: str) -> None:
        self.items[name] = (nodeid, round(seconds, 1))

    def lines(self) -> list[str]:
        return [f"{secs:8.1f} s  {name}  ({nodeid})" for name, (nodeid, secs) in self.items.items()]

    def write(self) -> None:
        path = os.environ.get("VIGIL_TEST_FIGURES")
        if path and self.items:
            Path(path).write_text(
                json.dumps(
                    {name: {"seconds": secs, "test": nodeid} for name, (nodeid, secs) in self.items.items()},
                    indent=1,
                )
                + "\n"
            )


#: the session's figures (one test session per process)
FIGURES = Figures()
