"""``vigil demo``: the main job end to end (filled in as capabilities land)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    pass
