"""The Inventory screen's editor of the variables every host shares."""

from __future__ import annotations

from vigil.tui.widgets.inventory.editor import SharedVarsEditor

__all__ = ["SharedVarsEditor"]
