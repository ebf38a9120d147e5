"""The screens, one per area; each is a mode of the app, so it keeps its state while another is shown."""

from __future__ import annotations

from vigil.tui.screens._base import VigilScreen
from vigil.tui.screens.audit import AuditScreen
from vigil.tui.screens.build import BuildScreen
from vigil.tui.screens.bundle import ImportScreen
from vigil.tui.screens.deploy import DeployScreen
from vigil.tui.screens.help import HelpScreen
from vigil.tui.screens.inventory import InventoryScreen
from vigil.tui.screens.overview import OverviewScreen
from vigil.tui.screens.reports import ReportsScreen

#: in the order of their keys, F2 onwards (the first slice's four keep their keys)
SCREENS: tuple[type[VigilScreen], ...] = (
    ImportScreen,
    DeployScreen,
    AuditScreen,
    OverviewScreen,
    BuildScreen,
    InventoryScreen,
    ReportsScreen,
)

__all__ = [
    "SCREENS",
    "AuditScreen",
    "BuildScreen",
    "DeployScreen",
    "HelpScreen",
    "ImportScreen",
    "InventoryScreen",
    "OverviewScreen",
    "ReportsScreen",
    "VigilScreen",
]
