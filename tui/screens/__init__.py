"""The screens, one per area; each is a mode of the app, so it keeps its state while another is shown."""

from __future__ import annotations

from vigil.tui.screens._base import VigilScreen
from vigil.tui.screens.audit import AuditScreen
from vigil.tui.screens.bundle import ImportScreen
from vigil.tui.screens.deploy import DeployScreen
from vigil.tui.screens.help import HelpScreen
from vigil.tui.screens.overview import OverviewScreen

#: in the order of their keys, F2 onwards
SCREENS: tuple[type[VigilScreen], ...] = (ImportScreen, DeployScreen, AuditScreen, OverviewScreen)

__all__ = [
    "SCREENS",
    "AuditScreen",
    "DeployScreen",
    "HelpScreen",
    "ImportScreen",
    "OverviewScreen",
    "VigilScreen",
]
