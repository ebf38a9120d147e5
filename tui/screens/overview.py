"""Home (the Overview screen, where the console opens): the site at a glance — this host's trust
root, bundles, last change to the hosts and audit verify (read when the screen is shown and on
ctrl+r) — then the cluster — the Grafana overview's panels read from VictoriaMetrics, and the firing
alerts from Alertmanager with job, user and account, by severity — refreshed every 5 seconds while shown.
Enter on an alert that names a job explains that job (`vigil explain job`, docs/incidents.md), an
action of its own with its audit record; so does a job id typed in "Explain job" (a job search: any
job the store holds, alerting or not).

On a site deployed with TLS (the site CA and the API password in the state root) both are read
over https, checked against the site CA, with the API login; otherwise over plain http.

Reading metrics changes nothing and is not an operation of the appliance: no audit record.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Button, DataTable, Input, Label, Sparkline, Static

from vigil.basics.errors import VigilError
from vigil.installer import ops
from vigil.installer.ops import ReplicaHealth, SiteAccess, read_replicas, site_access, site_metrics_key
from vigil.tui import overview
from vigil.tui.screens._base import VigilScreen
from vigil.tui.screens.explain import ExplainScreen
from vigil.tui.session import Outcome, perform
from vigil.tui.untrusted import plain
from vigil.tui.widgets import ResultLine, to_ui

#: the lab's monitoring host (docs/lab.md) and the ports of VictoriaMetrics and Alertmanager; a site
#: sets VIGIL_VM_URL and VIGIL_ALERTMANAGER_URL (each a comma-separated list for a monitoring pair)
LAB_MONITORING = "198.18.0.10"
VM_PORT = 8428
AM_PORT = 9093
#: seconds between refreshes, as the Grafana overview's
INTERVAL = 5.0


@dataclass
class Snapshot:
    panels: list[overview.Panel] = field(default_factory=list)
    utilisation: list[float] = field(default_factory=list)
    energy: dict[str, float] = field(default_factory=dict)
    alerts: list[overview.Alert] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    #: each replica of either service asked for itself (one line each on the screen)
    replicas: list[ReplicaHealth] = field(default_factory=list)


def default_urls(access: SiteAccess) -> tuple[str, str]:
    """The VictoriaMetrics and Alertmanager the screen starts with: ``$VIGIL_VM_URL`` and
    ``$VIGIL_ALERTMANAGER_URL``, else the lab's monitoring host in the site's scheme."""
    return (
        os.environ.get("VIGIL_VM_URL") or access.url(LAB_MONITORING, VM_PORT),
        os.environ.get("VIGIL_ALERTMANAGER_URL") or access.url(LAB_MONITORING, AM_PORT),
    )


def _lab_defaults(port: int) -> set[str]:
    return {f"{scheme}://{LAB_MONITORING}:{port}" for scheme in ("http", "https")}


def take_snapshot(
    vm_url: str,
    am_url: str,
    now: datetime | None = None,
    *,
    access: SiteAccess | None = None,
    metrics_key: str | None = None,
) -> Snapshot:
    """Everything the screen shows, read once with ACCESS (default: plain, no login); what could not
    be read is a ``FAIL:`` line each. Either URL may list several replicas, comma-separated: the
    first that answers is read, and the one that answered is tried first next time."""
    now = now or datetime.now(UTC)
    snap = Snapshot()
    try:
        vm = overview.replicas(vm_url, access=access, service="VictoriaMetrics")
        snap.panels = overview.fetch_panels(vm)
        snap.utilisation = overview.fetch_utilisation(vm, now=now.timestamp())
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        snap.energy = overview.fetch_energy(vm, seconds_today=int((now - midnight).total_seconds()))
    except overview.FetchError as exc:
        snap.failures.append(f"FAIL: {exc}")
    try:
        am = overview.replicas(am_url, access=access, service="Alertmanager")
        snap.alerts = overview.fetch_alerts(am)
    except overview.FetchError as exc:
        snap.failures.append(f"FAIL: {exc}")
    try:
        snap.replicas = read_replicas(
            vm_url, am_url, access=access, now=now.timestamp(), metrics_key=metrics_key
        )
    except VigilError as exc:  # a URL that is no URL: said above already, by the reads
        snap.replicas = []
        if not snap.failures:
            snap.failures.append(f"FAIL: {exc}")
    return snap


class OverviewScreen(VigilScreen):
    MODE = "overview"
    LABEL = "Home"
    HELP = "The site (trust root, bundles, last deploy, audit) and the cluster: panels and firing alerts"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+r",
            "refresh_all",
            "Refresh",
            id="overview-refresh",
            tooltip="Read the site's state, the panels and the alerts now",
        ),
    ]

    DEFAULT_CSS = """
    OverviewScreen .row { height: 1; margin: 0 1; }
    OverviewScreen .row Label { width: 16; }
    OverviewScreen .row Input { width: 1fr; margin-right: 1; }
    OverviewScreen .row Label.inline { width: auto; margin-right: 1; }
    OverviewScreen .row Input#job { width: 12; }
    OverviewScreen #site { height: auto; max-height: 4; margin: 0 1; }
    OverviewScreen #replicas { height: auto; max-height: 6; margin: 0 1; }
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

    def _access(self) -> tuple[SiteAccess, str | None]:
        """The site's access as the state root says now (a deploy may have moved it to TLS since
        the screen was made), or plain access and the ``FAIL:`` line of why it cannot be read."""
        try:
            return site_access(self.session.home), None
        except VigilError as exc:
            return SiteAccess(), f"FAIL: {exc}"

    def body(self) -> ComposeResult:
        vm_url, am_url = default_urls(self._access()[0])
        with Horizontal(classes="row"):
            yield Label("VictoriaMetrics")
            yield Input(vm_url, id="vm", compact=True)
            yield Label("Explain job", classes="inline")
            yield Input(
                placeholder="job id", id="job", compact=True, restrict=r"[A-Za-z0-9._-]*", max_length=64
            )
        with Horizontal(classes="row"):
            yield Label("Alertmanager")
            yield Input(am_url, id="am", compact=True)
            yield Button("Refresh", id="refresh", compact=True)
        yield ResultLine(id="result")
        yield Static("", id="site", markup=False)
        yield Static("", id="replicas", markup=False)
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
        self._read_site()
        self.action_refresh()
        self._timer = self.set_interval(INTERVAL, self.action_refresh)

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    @on(Input.Submitted, "#job")
    def explain_typed(self, event: Input.Submitted) -> None:
        """A job id typed in "Explain job": that job, explained (whether or not an alert names it)."""
        job = event.value.strip()
        if not job:
            self.query_one("#result", ResultLine).info("type a job id, then enter")
            return  # anything else typed is the explanation's to check (installer/reports/explain.py)
        self.query_one("#result", ResultLine).info(f"explaining job {job} …")
        self._explain(job, self.query_one("#vm", Input).value.strip())

    @on(DataTable.RowSelected, "#alerts")
    def explain_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on an alert: the first job it names, explained."""
        alerts = self.snapshot.alerts if self.snapshot else []
        if not 0 <= event.cursor_row < len(alerts):
            return
        job = alerts[event.cursor_row].job.split(",")[0].strip()
        if not job:
            self.query_one("#result", ResultLine).info("this alert names no job to explain")
            return
        self.query_one("#result", ResultLine).info(f"explaining job {job} …")
        self._explain(job, self.query_one("#vm", Input).value.strip())

    @work(thread=True, exclusive=True, group="overview-explain", exit_on_error=False)
    def _explain(self, job: str, vm_url: str) -> None:
        argv = ["explain", "job", job] + (["--vm", vm_url] if vm_url else [])
        inv = self.session.invocation("explain.job", argv)
        outcome = perform(inv, lambda inv: ops.explain_job_op(inv, job, vm=vm_url or None))
        to_ui(self.app, self._explained, job, outcome)

    def _explained(self, job: str, outcome: Outcome[dict[str, Any]]) -> None:
        if outcome.value is None:
            self.query_one("#result", ResultLine).fail(outcome.failures)
            return
        self.query_one("#result", ResultLine).info(f"job {job} explained")
        self.app.push_screen(ExplainScreen(f"job {job}", ops.explain_lines(outcome.value)))

    @on(Input.Submitted, "#vm")
    @on(Input.Submitted, "#am")
    @on(Button.Pressed, "#refresh")
    def action_refresh_all(self) -> None:
        """ctrl+r: the site's state as well as the cluster (the timer reads the cluster only)."""
        self._read_site()
        self.action_refresh()

    def action_refresh(self) -> None:
        access, failure = self._access()
        for name, port in (("vm", VM_PORT), ("am", AM_PORT)):
            box = self.query_one(f"#{name}", Input)
            wanted = access.url(LAB_MONITORING, port)
            if box.value.strip() in _lab_defaults(port) and box.value != wanted:
                box.value = wanted  # the lab's default follows the site's scheme
        self._fetch(
            self.query_one("#vm", Input).value.strip(),
            self.query_one("#am", Input).value.strip(),
            access,
            failure,
        )

    @work(thread=True, exclusive=True, group="overview-site", exit_on_error=False)
    def _read_site(self) -> None:
        lines = ops.site_summary(self.session.home)
        to_ui(self.app, self._show_site, lines)

    def _show_site(self, lines: list[str]) -> None:
        # this host's state (paths, an inventory's name): plain text, one line each
        self.query_one("#site", Static).update(Text("\n").join(plain(line) for line in lines))

    @work(thread=True, exclusive=True, group="overview", exit_on_error=False)
    def _fetch(self, vm_url: str, am_url: str, access: SiteAccess, failure: str | None) -> None:
        if failure:
            snap = Snapshot(failures=[failure])
        else:
            try:
                key = site_metrics_key(self.session.home)
            except VigilError:  # a key file that is no key: the replicas' /metrics is said unread
                key = None
            snap = take_snapshot(vm_url, am_url, access=access, metrics_key=key)
        to_ui(self.app, self._show, snap)

    def _show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        result = self.query_one("#result", ResultLine)
        if snap.failures:
            result.fail(snap.failures)
        else:
            sick = sum(1 for r in snap.replicas if not r.ok)
            attention = f"; {sick} replicas need attention" if sick else ""
            firing = f"{len(snap.alerts)} alert{'' if len(snap.alerts) == 1 else 's'} firing"
            by = {s: sum(1 for a in snap.alerts if a.severity == s) for s in ("P0", "P1", "P2")}
            if snap.alerts:
                firing += " (" + ", ".join(f"{s} {n}" for s, n in by.items() if n) + ")"
            result.info(f"read at {time.strftime('%H:%M:%S')}; {firing}{attention}")
        # what each replica said of itself: data, shown as plain text
        # (each line made visible alone: a newline a replica sent stays \n, it starts no line)
        self.query_one("#replicas", Static).update(
            Text("\n").join(plain(("ok   " if r.ok else "FAIL ") + r.line()) for r in snap.replicas)
        )
        self.query_one("#panels", Static).update(
            plain("   ".join(f"{p.title} {p.text()}" for p in snap.panels))
        )
        self.query_one("#util", Sparkline).data = snap.utilisation
        # the labels are the cluster's: an account is whatever a Slurm user passed to --account
        energy = ", ".join(
            f"{a} {kwh:.1f} kWh" for a, kwh in sorted(snap.energy.items(), key=lambda x: -x[1])
        )
        self.query_one("#energy", Static).update(plain(f"GPU energy today: {energy}" if energy else ""))
        table = self.query_one("#alerts", DataTable)
        table.clear()
        for a in snap.alerts:
            cells = (a.severity, a.name, a.instance, a.job, a.user, a.account, a.since)
            table.add_row(*map(plain, cells))
