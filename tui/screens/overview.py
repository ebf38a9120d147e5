"""Overview: the cluster at a glance — the Grafana overview's panels read from VictoriaMetrics, and
the firing alerts from Alertmanager with job, user and account — refreshed every 5 seconds while shown.

Reading metrics changes nothing and is not an operation of the appliance: no audit record.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Button, DataTable, Input, Label, Sparkline, Static

from vigil.tui import overview
from vigil.tui.screens._base import VigilScreen
from vigil.tui.widgets import ResultLine, to_ui

#: the lab's monitoring host (docs/lab.md); a site sets VIGIL_VM_URL and VIGIL_ALERTMANAGER_URL
DEFAULT_VM = "http://198.18.0.10:8428"
DEFAULT_AM = "http://198.18.0.10:9093"
#: seconds between refreshes, as the Grafana overview's
INTERVAL = 5.0


@dataclass
class Snapshot:
    panels: list[overview.Panel] = field(default_factory=list)
    utilisation: list[float] = field(default_factory=list)
    energy: dict[str, float] = field(default_factory=dict)
    alerts: list[overview.Alert] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def take_snapshot(vm_url: str, am_url: str, now: datetime | None = None) -> Snapshot:
    """Everything the screen shows, read once; what could not be read is a ``FAIL:`` line each."""
    now = now or datetime.now(UTC)
    snap = Snapshot()
    try:
        snap.panels = overview.fetch_panels(vm_url)
        snap.utilisation = overview.fetch_utilisation(vm_url, now=now.timestamp())
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        snap.energy = overview.fetch_energy(vm_url, seconds_today=int((now - midnight).total_seconds()))
    except overview.FetchError as exc:
        snap.failures.append(f"FAIL: {exc}")
    try:
        snap.alerts = overview.fetch_alerts(am_url)
    except overview.FetchError as exc:
        snap.failures.append(f"FAIL: {exc}")
    return snap


class OverviewScreen(VigilScreen):
    MODE = "overview"
    LABEL = "Overview"
    HELP = "Cluster panels from VictoriaMetrics and firing alerts from Alertmanager"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+r", "refresh", "Refresh", id="overview-refresh", tooltip="Read the panels and alerts now"
        ),
    ]

    DEFAULT_CSS = """
    OverviewScreen .row { height: 1; margin: 0 1; }
    OverviewScreen .row Label { width: 16; }
    OverviewScreen .row Input { width: 1fr; margin-right: 1; }
    OverviewScreen #panels { height: 1; margin: 0 1; text-style: bold; }
    OverviewScreen #util-row { height: 3; margin: 0 1; }
    OverviewScreen #util-label { width: 16; }
    OverviewScreen #util { width: 1fr; height: 3; }
    OverviewScreen #energy { height: auto; max-height: 2; margin: 0 1; color: $text-muted; }
    OverviewScreen #alerts { height: 1fr; margin: 0 1; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshot: Snapshot | None = None
        self._timer: Timer | None = None

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("VictoriaMetrics")
            yield Input(os.environ.get("VIGIL_VM_URL", DEFAULT_VM), id="vm", compact=True)
        with Horizontal(classes="row"):
            yield Label("Alertmanager")
            yield Input(os.environ.get("VIGIL_ALERTMANAGER_URL", DEFAULT_AM), id="am", compact=True)
            yield Button("Refresh", id="refresh", compact=True)
        yield ResultLine(id="result")
        yield Static("", id="panels", markup=False)
        with Horizontal(id="util-row"):
            yield Label("GPU util 30m", id="util-label")
            yield Sparkline([], id="util")
        yield Static("", id="energy", markup=False)
        yield DataTable(id="alerts", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#alerts", DataTable).add_columns(
            "sev", "alert", "instance", "job", "user", "account", "since"
        )

    def on_screen_resume(self) -> None:
        self.action_refresh()
        self._timer = self.set_interval(INTERVAL, self.action_refresh)

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    @on(Input.Submitted)
    @on(Button.Pressed, "#refresh")
    def action_refresh(self) -> None:
        self._fetch(self.query_one("#vm", Input).value.strip(), self.query_one("#am", Input).value.strip())

    @work(thread=True, exclusive=True, group="overview", exit_on_error=False)
    def _fetch(self, vm_url: str, am_url: str) -> None:
        snap = take_snapshot(vm_url, am_url)
        to_ui(self.app, self._show, snap)

    def _show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        result = self.query_one("#result", ResultLine)
        if snap.failures:
            result.fail(snap.failures)
        else:
            result.info(f"read at {time.strftime('%H:%M:%S')}; {len(snap.alerts)} alerts firing")
        self.query_one("#panels", Static).update("   ".join(f"{p.title} {p.text()}" for p in snap.panels))
        self.query_one("#util", Sparkline).data = snap.utilisation
        energy = ", ".join(
            f"{a} {kwh:.1f} kWh" for a, kwh in sorted(snap.energy.items(), key=lambda x: -x[1])
        )
        self.query_one("#energy", Static).update(f"GPU energy today: {energy}" if energy else "")
        table = self.query_one("#alerts", DataTable)
        table.clear()
        for a in snap.alerts:
            table.add_row(a.severity, a.name, a.instance, a.job, a.user, a.account, a.since)
