"""The deploy screen's live view: the board (events in, grid state out) and its widgets."""

from __future__ import annotations

from vigil.tui.widgets.deploy.board import COLUMNS, DeployBoard, HostRow
from vigil.tui.widgets.deploy.grid import HostGrid

__all__ = ["COLUMNS", "DeployBoard", "HostGrid", "HostRow"]
