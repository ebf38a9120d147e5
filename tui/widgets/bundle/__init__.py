"""The bundle screen's widgets: a channel's components, with the build's progress per component."""

from __future__ import annotations

from vigil.tui.widgets.bundle.components import ComponentRow, ComponentTable, component_rows

__all__ = ["ComponentRow", "ComponentTable", "component_rows"]
