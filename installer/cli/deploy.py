"""`vigil deploy` subcommands."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Registered once the deploy commands land."""
