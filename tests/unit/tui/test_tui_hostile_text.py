"""Hostile text on every screen: markup, actions and terminal escapes in data are shown as text.

Each screen's data is fed the same strings, through the path its data takes (a bundle's manifest,
Alertmanager's labels, the audit log, an inventory and a host's answer, Ansible's events, the report
store, a catalog): Rich markup that would end the console (``[/]``), run an action when clicked
(``[@click=app.quit]``, ``[@click=app.screenshot(...)]`` which writes a file), link or restyle, and
characters a terminal obeys (ESC, a C1 control, a bidirectional override). The console must keep
running, show each as the literal text with its controls escaped (a ``Text``, never markup, in the
widget), carry no action or link anywhere on screen, and clicking the text must do nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from test_tui_deploy import ev
from textual.coordinate import Coordinate
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Input, OptionList, RichLog, Select, Static
from tui_helpers import drive, settle

from tests.factories import craft_bundle, make_key
from vigil.basics.errors import VigilError
from vigil.installer import ops
from vigil.installer.deploy import DeployPlan
from vigil.installer.deploy.inventory import Inventory, SharedVars
from vigil.installer.deploy.upgrade import Change, Outcome
from vigil.tui import VigilApp
from vigil.tui.screens import DeployScreen
from vigil.tui.screens import build as build_screen
from vigil.tui.screens import inventory as inventory_screen
from vigil.tui.screens import overview as overview_screen
from vigil.tui.screens.build import ChannelView
from vigil.tui.widgets import ResultLine
from vigil.tui.widgets.bundle.components import LICENCE_WIDTH
from vigil.tui.widgets.deploy import HostGrid
from vigil.tui.widgets.inventory import SharedVarsEditor

#: wide enough that the longest of them fits in a table's first column
SIZE = (160, 50)
#: the screenshot action's directory, relative to the test's working directory (its tmp_path)
SHOTS = "shots"


@dataclass(frozen=True)
class Hostile:
    """A string an attacker controls, and how the console must show it."""

    raw: str
    shown: str

    @property
    def in_a_file_name(self) -> bool:
        return "/" not in self.raw


#: each must appear as it is, but for its control characters, written as escapes
HOSTILE = (
    Hostile("[/]", "[/]"),
    Hostile("[@click=app.quit]quit[/]", "[@click=app.quit]quit[/]"),
    Hostile(
        f"[@click=app.screenshot('x.svg','{SHOTS}')]shot[/]",
        f"[@click=app.screenshot('x.svg','{SHOTS}')]shot[/]",
    ),
    Hostile("[link=https://x]y[/link]", "[link=https://x]y[/link]"),
    Hostile("[bold red]x", "[bold red]x"),
    Hostile("\x1b[2Jclear", "\\x1b[2Jclear"),
    Hostile("evil\u202etxt.exe\x9b", "evil\\u202etxt.exe\\x9b"),
)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tests run in tmp_path, where the screenshot action would write into SHOTS."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / SHOTS).mkdir()
    return tmp_path


# -- what the screen shows ------------------------------------------------------------------------
#: the actions Textual's own scrollbars put in their styles (pressing on the bar or its track)
SCROLLBAR = {("@mouse.down", "grab"), ("@mouse.down", "scroll_up"), ("@mouse.down", "scroll_down")}


def inert(style: object) -> bool:
    """A style with no action (``@click`` and the like in its meta, but a scrollbar's) and no link."""
    if not style:
        return True
    parsed = style if isinstance(style, Style) else Style.parse(str(style))
    actions = {(k, v) for k, v in parsed.meta.items() if k.startswith("@")} - SCROLLBAR
    return parsed.link is None and not actions


def assert_text(value: object, shown: str, *, whole: bool = True) -> None:
    """VALUE (a cell, a widget's content) is a Text holding SHOWN (or, not WHOLE, a Text holding it
    among other text), with no action or link in any of its styles."""
    assert isinstance(value, Text), f"{value!r} is given as {type(value).__name__}, which is read as markup"
    if whole:
        assert value.plain == shown
    else:
        assert shown in value.plain, (shown, value.plain)
    assert inert(value.style) and all(inert(span.style) for span in value.spans), value.spans


def cells(table: DataTable[Any], column: int) -> list[object]:
    return [table.get_cell_at(Coordinate(row, column)) for row in range(table.row_count)]


def content(widget: Widget) -> object:
    """What a Static (a Label) was given to show."""
    assert isinstance(widget, Static)
    return widget.content


async def until(pilot: Pilot[None], done: Callable[[], bool]) -> None:
    """Wait (up to 10 s) until DONE: for a worker that waits on the operator, which settle() cannot."""
    for _ in range(200):
        if done():
            return
        await pilot.pause(0.05)
    raise AssertionError("the screen did not get there in 10 s")


@dataclass
class Seen:
    """The screen as drawn, and what clicking on it did."""

    lines: list[str] = field(default_factory=list)
    #: (x, y, style) of each cell of the screen that carries an action or a link
    actions: list[tuple[int, int, str]] = field(default_factory=list)
    clicked: int = 0
    #: app.quit, each time a click ran it
    quits: list[str] = field(default_factory=list)


async def look_and_click(app: VigilApp, pilot: Pilot[None]) -> Seen:
    """Read the whole screen as the terminal gets it (the compositor's lines, whose styles carry the
    actions a click runs), then click on every cell with an action or a link, and on the first
    character of each hostile text shown. A click that runs app.quit is noted (the app stays, for
    the test to say so); app.screenshot stays real: a file in SHOTS is the harm."""
    seen = Seen()

    async def quit_noted() -> None:
        seen.quits.append("app.quit")

    app.action_quit = quit_noted  # type: ignore[method-assign]
    # the screen at rest: a table the scenario scrolled through may still be scrolling back
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        x, text = 0, []
        for segment in strip:
            if not inert(segment.style):
                seen.actions.append((x, y, str(segment.style)))
            text.append(segment.text)
            x += segment.cell_length
        seen.lines.append("".join(text))
    targets = {(x, y) for x, y, _ in seen.actions}
    for h in HOSTILE:
        for y, line in enumerate(seen.lines):
            if h.shown in line:
                targets.add((cell_len(line[: line.index(h.shown)]), y))
                break
    for x, y in sorted(targets):
        await pilot.click(offset=(x, y))
        seen.clicked += 1
    await settle(app, pilot)
    return seen


def assert_harmless(seen: Seen, shots: Path, *, expect: tuple[Hostile, ...] = HOSTILE) -> None:
    """Nothing on screen acts or links; clicking did nothing; each of EXPECT is on screen as text;
    the terminal is sent no control character."""
    assert seen.actions == [], seen.actions
    assert seen.quits == [], "a click ran app.quit"
    assert list(shots.iterdir()) == [], "a click ran app.screenshot"
    screen = "\n".join(seen.lines)
    for h in expect:
        assert h.shown in screen, f"{h.shown!r} is not on screen"
    assert not any(ch in screen for ch in "\x1b\x9b\u202e"), "a control character reached the terminal"
    assert seen.clicked >= len(expect)


# -- Import: an unverified bundle's manifest (a courier can write it, no key needed) ---------------
def test_an_inspected_bundle(tmp_path: Path) -> None:
    key = make_key(tmp_path / "keys", "release")

    def edit(manifest: dict[str, Any]) -> None:
        base = manifest["components"][0]
        manifest["components"] = [
            dict(base, name=f"{n}{h.raw}", version=h.raw, license=h.raw, kind=h.raw)
            for n, h in enumerate(HOSTILE)
        ]
        manifest["channel"], manifest["arch"] = HOSTILE[1].raw, HOSTILE[5].raw

    bundle = craft_bundle(
        tmp_path / "out", [key], version=3, edit=edit, name="q\x1b[2J[@click=app.quit]x.bundle"
    ).path
    found: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        app.screen.query_one("#bundle", Input).value = str(bundle)
        await pilot.press("ctrl+t")  # inspect: read without verifying
        await settle(app, pilot)
        table = app.screen.query_one("#components", DataTable)
        found["columns"] = [cells(table, c) for c in range(len(table.columns))]
        found["summary"] = content(app.screen.query_one("#summary"))
        found["result"] = content(app.screen.query_one("#result"))
        # the field shows what the operator typed, as typed: emptied, so that only the data is on screen
        app.screen.query_one("#bundle", Input).value = ""
        found["seen"] = await look_and_click(app, pilot)

    drive(tmp_path / "home", scenario, size=SIZE)
    names, versions, _, _, kinds, licences = found["columns"]
    for n, h in enumerate(HOSTILE):
        assert_text(names[n], f"{n}{h.shown}")
        for column in (versions, licences, kinds):
            assert_text(column[n], h.shown)
    assert_text(found["summary"], f"channel {HOSTILE[1].shown}  arch {HOSTILE[5].shown}", whole=False)
    assert_text(found["result"], "q\\x1b[2J[@click=app.quit]x.bundle: not verified by inspect", whole=False)
    assert_harmless(found["seen"], tmp_path / SHOTS)


def assert_column(values: list[object], expect: list[str]) -> None:
    """A table column: each cell a Text with no action or link, holding EXPECT between them (the
    rows' order is the screen's own)."""
    for value in values:
        assert isinstance(value, Text), f"{value!r} is given as {type(value).__name__}, read as markup"
        assert_text(value, value.plain)
    assert sorted(v.plain for v in values if isinstance(v, Text)) == sorted(expect)


SHOWN = [h.shown for h in HOSTILE]


# -- Overview: Alertmanager's labels and VictoriaMetrics' accounts (what a Slurm user typed) --------
def test_overview_alerts_and_accounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_VM_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("VIGIL_ALERTMANAGER_URL", "http://127.0.0.1:1")

    def answer(base_url: str, path: str, params: dict[str, str] | None = None, *a: Any, **k: Any) -> Any:
        """The two APIs' answers, labelled by the cluster's users."""
        if path == "/api/v2/alerts":
            keys = ("alertname", "severity", "instance")
            who = ("hpc_job", "user", "account")
            # a job alert names its job in labels, a GPU alert in annotations: both ways, every string
            return [
                {
                    "labels": dict.fromkeys(keys + (who if n % 2 else ()), h.raw),
                    "annotations": {} if n % 2 else dict.fromkeys(who, h.raw),
                    "startsAt": "2026-12-01T03:00:00Z",
                }
                for n, h in enumerate(HOSTILE)
            ]
        if path == "/api/v1/query_range":
            return {"status": "success", "data": {"result": [{"values": [[0, "1"]]}]}}
        assert params is not None
        if params["query"].startswith("sum by (account)"):
            result = [{"metric": {"account": h.raw}, "value": [0, str(n)]} for n, h in enumerate(HOSTILE)]
        else:
            result = [{"metric": {}, "value": [0, "1"]}]
        return {"status": "success", "data": {"result": result}}

    monkeypatch.setattr(overview_screen.overview, "get_json", answer)
    found: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        table = app.screen.query_one("#alerts", DataTable)
        found["columns"] = [cells(table, c) for c in range(6)]
        found["energy"] = content(app.screen.query_one("#energy"))
        found["seen"] = await look_and_click(app, pilot)

    drive(tmp_path / "home", scenario, start="overview", size=SIZE)
    for column in found["columns"]:
        assert_column(column, SHOWN)
    for h in HOSTILE:
        assert_text(found["energy"], f"{h.shown} ", whole=False)
    assert_harmless(found["seen"], tmp_path / SHOTS)


# -- Audit: the records' operator, object and reason (a bundle file's name, an --operator) ----------
def test_audit_records(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for h in HOSTILE:
        inv = ops.Invocation(
            home=home, argv=["bundle", "import", h.raw], operator=h.raw, action="bundle.import"
        )
        inv.object = h.raw
        with pytest.raises(VigilError), ops.audited(inv):
            raise VigilError(h.raw, "not a bundle")
    found: dict[str, Any] = {"details": []}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        table = app.screen.query_one("#records", DataTable)
        found["who"], found["what"] = cells(table, 2), cells(table, 5)
        for row in range(table.row_count):
            table.move_cursor(row=row)
            await pilot.pause()
            found["details"].append(content(app.screen.query_one("#detail")))
        found["seen"] = await look_and_click(app, pilot)

    drive(home, scenario, start="audit", size=SIZE)
    assert_column(found["who"], SHOWN)
    for value, h in zip(found["what"], HOSTILE, strict=True):
        assert_text(value, f"{h.shown} -- ", whole=False)
        assert value.plain.startswith(h.shown)
    for value, h in zip(found["details"], HOSTILE, strict=True):
        assert_text(value, f" ({h.shown}) uid ", whole=False)
        assert_text(value, f"\nreason: {h.shown}: not a bundle\n", whole=False)
    assert_harmless(found["seen"], tmp_path / SHOTS)


# -- Inventory: the inventory's addresses and variables, and what the hosts answered --------------
def test_inventory_check_and_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    hosts = {f"gpu{n:02d}": {"ansible_host": h.raw} for n, h in enumerate(HOSTILE)}
    doc = {"all": {"children": {"monitoring": {"hosts": {"mon01": {"ansible_host": "127.0.0.1"}}},
                                "gpu_nodes": {"hosts": hosts}}}}  # fmt: skip
    (site / "group_vars").mkdir(parents=True)
    (site / "hosts.yml").write_text(yaml.safe_dump(doc))
    shared = {f"note{n}": h.raw for n, h in enumerate(HOSTILE)}
    (site / "group_vars" / "all.yml").write_text(yaml.safe_dump(shared))
    # the deploy's pre-flight ping is not run here: each host "answers" with a hostile reason
    answers = {f"gpu{n:02d}": h.raw for n, h in enumerate(HOSTILE)}
    monkeypatch.setattr(inventory_screen, "reach", lambda home, path, limit: answers)
    found: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        app.screen.query_one("#inventory", Input).value = str(site)
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        table = app.screen.query_one("#hosts", DataTable)
        found["address"], found["reachable"] = cells(table, 2), cells(table, 4)
        found["vars"] = content(app.screen.query_one("#vars"))
        found["result"] = content(app.screen.query_one("#result"))
        app.screen.query_one("#inventory", Input).value = ""
        found["seen"] = await look_and_click(app, pilot)
        # the editor of the shared variables names its file: an inventory directory can be called anything
        path = Path("/site", *(h.raw.replace("/", "|") for h in HOSTILE), "all.yml")
        await app.push_screen(SharedVarsEditor(app.session, site, SharedVars(path, "", "0" * 64)))
        await pilot.pause()
        found["editor"] = content(app.screen.query_one("#vars-path"))
        found["editor_seen"] = await look_and_click(app, pilot)

    drive(tmp_path / "home", scenario, start="inventory", size=SIZE)
    assert_column(found["address"], ["127.0.0.1", *SHOWN])
    assert_column(found["reachable"], ["yes", *SHOWN])
    assert_text(found["vars"], "variables every host shares", whole=False)
    for n, h in enumerate(HOSTILE):  # each value as JSON, which escapes ESC itself; the rest for the screen
        value = '"\\u001b[2Jclear"' if h.raw.startswith("\x1b") else f'"{h.shown}"'
        assert f"  note{n} = {value}" in found["vars"].plain.splitlines()
    assert_text(found["result"], f"FAIL: host gpu00: unreachable: {HOSTILE[0].shown} (and 6 more)")
    assert_harmless(found["seen"], tmp_path / SHOTS)
    shown_path = "/".join(["/site", *(h.shown.replace("/", "|") for h in HOSTILE), "all.yml"])
    assert_text(found["editor"], f"{shown_path} (every host's variables)")
    assert_harmless(found["editor_seen"], tmp_path / SHOTS, expect=())


# -- Deploy: the plan (an inventory's host names), an upgrade's plan, and the run's events ---------
def test_deploy_plan_upgrade_plan_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = [h.raw for h in HOSTILE]

    def plan_deploy(inv: ops.Invocation, **_: Any) -> DeployPlan:
        inventory = Inventory(Path("site"), hosts, {"monitoring": hosts}, hosts)
        return DeployPlan(inventory, SimpleNamespace(version=3), Path("ansible"), "r1")  # type: ignore[arg-type]

    def events() -> list[dict[str, Any]]:
        """What ansible-runner hears from the hosts; the last task started is named `[/]`."""
        out = []
        for h in reversed(HOSTILE):
            out.append(ev("playbook_on_task_start", task=h.raw, stdout=f"TASK [{h.raw}]"))
            out.append(ev("runner_on_start", h.raw, h.raw))
            out.append(ev("runner_on_ok", h.raw, h.raw, f"ok: {h.raw}", res={"changed": False}))
        return out

    def upgrade(inv: ops.Invocation, *, check: bool, events: Any = None, **_: Any) -> Outcome:
        changes = [Change(h.raw, h.raw, h.raw, "2", 3, h.raw) for h in HOSTILE]
        if check:
            files = {h.raw: [h.raw] for h in HOSTILE}
            return Outcome("u1", Path("runs/u1"), 4, changes, checked_only=True, files=files)
        for h in HOSTILE:
            inv.step(h.raw)
        for event in run_events:
            events.put(event)
        return Outcome("u1", Path("runs/u1"), 4, changes)

    run_events = events()
    monkeypatch.setattr(ops, "plan_deploy", plan_deploy)
    monkeypatch.setattr(ops, "upgrade", upgrade)
    found: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, DeployScreen)
        screen.query_one("#inventory", Input).value = "site"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: screen.plan is not None)  # it waits for the operator's answer
        found["plan"] = content(screen.query_one("#plan"))
        grid = screen.query_one("#grid", HostGrid)
        found["waiting"] = {key: grid.row_text(key)[0] for key in grid.keys}
        await pilot.press("ctrl+n")  # not this one
        await settle(app, pilot)
        screen.query_one("#action", Select).value = "upgrade"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: screen.outcome is not None)
        found["upgrade_plan"] = content(screen.query_one("#plan"))
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        found["grid"] = {key: grid.row_text(key) for key in grid.keys}
        found["status"] = content(screen.query_one("#status"))
        found["log"] = [line.text for line in screen.query_one("#log", RichLog).lines]
        found["result"] = screen.query_one("#result", ResultLine).text
        screen.query_one("#inventory", Input).value = ""
        found["seen"] = await look_and_click(app, pilot)

    drive(tmp_path / "home", scenario, start="deploy", size=SIZE)
    assert_text(found["plan"], f"monitoring: {', '.join(SHOWN)}", whole=False)
    assert sorted(found["waiting"].values()) == sorted(SHOWN)
    for h in HOSTILE:
        assert_text(found["upgrade_plan"], f"  {h.shown}: {h.shown} {h.shown} -> 2\n", whole=False)
    assert_text(found["status"], f"task {len(HOSTILE)}: [/]  |  ok {len(HOSTILE)}", whole=False)
    assert sorted(found["grid"]) == sorted(hosts)
    for h in HOSTILE:
        assert found["grid"][h.raw] == [h.shown, "1", "0", "0", "0", "0", h.shown]
        assert (
            h.shown in found["log"]
            and f"TASK [{h.shown}]" in found["log"]
            and f"ok: {h.shown}" in found["log"]
        )
    assert not any(ch in "".join(found["log"]) for ch in "\x1b\x9b\u202e")
    assert found["result"].startswith("OK: upgrade u1: site at bundle 4")
    assert_harmless(found["seen"], tmp_path / SHOTS)


# -- Reports: the store's index and a stored file's bytes -----------------------------------------
def test_reports_list_and_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [
        {"sha256": f"{n:064x}", "kind": h.raw, "period": h.raw, "generated": h.raw, "key_id": h.raw}
        for n, h in enumerate(HOSTILE)
    ]
    data = "\n".join(h.raw for h in HOSTILE).encode()  # not JSON: shown as the file's text
    stored = SimpleNamespace(kind=HOSTILE[1].raw, label=HOSTILE[0].raw, json_path=Path("r.json"))
    monkeypatch.setattr(ops, "report_list", lambda inv: entries)
    monkeypatch.setattr(ops, "report_show", lambda inv, ident: (stored, data))
    found: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await settle(app, pilot)
        table = app.screen.query_one("#reports", DataTable)
        found["columns"] = [cells(table, c) for c in range(1, 5)]
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        found["detail"] = content(app.screen.query_one("#detail"))
        found["result"] = content(app.screen.query_one("#result"))
        found["seen"] = await look_and_click(app, pilot)

    drive(tmp_path / "home", scenario, start="reports", size=SIZE)
    for column in found["columns"]:
        assert_column(column, SHOWN)
    assert_text(found["detail"], "\n".join(SHOWN))
    assert_text(found["result"], f"{HOSTILE[1].shown} report {HOSTILE[0].shown}: r.json")
    assert_harmless(found["seen"], tmp_path / SHOTS)


# -- Bundle (build host): a catalog directory's file names, a catalog's components, the build ------
def test_build_channels_components_and_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogs = tmp_path / "catalogs"
    catalogs.mkdir()
    named = [h for h in HOSTILE if h.in_a_file_name]  # `[/]` cannot be a file's name
    for h in named:
        (catalogs / f"{h.raw}.yaml").write_text("")
    components = [
        SimpleNamespace(name=h.raw, version=h.raw, license=h.raw, source=SimpleNamespace(kind=h.raw))
        for h in HOSTILE
    ]
    catalog = SimpleNamespace(components=components, arch=HOSTILE[0].raw)
    monkeypatch.setattr(
        build_screen,
        "read_channel",
        lambda d, c: ChannelView(catalog, None, HOSTILE[1].raw),  # type: ignore[arg-type]
    )
    release = threading.Event()
    bundle = tmp_path / "out" / "b.bundle"

    def build_bundle(inv: ops.Invocation, **_: Any) -> ops.Built:
        for h in HOSTILE:
            inv.step(f"fetch {h.raw}")
        release.wait(10)  # the screen is read while the build runs
        bundle.parent.mkdir()
        bundle.write_bytes(b"x")
        info = {"files": 1, "bytes": 1, "payload": {"sha256": HOSTILE[2].raw}, "version": 7}
        info |= {"channel": HOSTILE[3].raw, "arch": HOSTILE[5].raw, "expires": HOSTILE[0].raw}
        return ops.Built(bundle, info, [h.raw for h in HOSTILE])

    monkeypatch.setattr(ops, "load_keys", lambda keys, passphrase: [])
    monkeypatch.setattr(ops, "build_bundle", build_bundle)
    found: dict[str, Any] = {"details": []}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        screen.query_one("#catalogs", Input).value = str(catalogs)
        screen.query_one("#catalogs", Input).focus()
        await pilot.press("enter")
        await settle(app, pilot)
        await settle(app, pilot)
        options = screen.query_one("#channels", OptionList)
        found["channels"] = [options.get_option_at_index(i).prompt for i in range(options.option_count)]
        table = screen.query_one("#components", DataTable)
        found["columns"] = [cells(table, c) for c in (0, 1, 5)]
        found["licences"] = cells(table, 4)
        found["note"] = content(screen.query_one("#channel-note"))
        found["info"] = content(screen.query_one("#result"))
        for row in range(table.row_count):
            table.move_cursor(row=row)
            await pilot.pause()
            found["details"].append(content(screen.query_one("#component-detail")))
        for name, value in (("version", "7"), ("out", str(bundle.parent)), ("keys", "k")):
            screen.query_one(f"#{name}", Input).value = value
        await pilot.press("ctrl+g")
        await pilot.pause(0.3)
        found["step"] = content(screen.query_one("#step"))
        release.set()
        await settle(app, pilot)
        found["built"] = content(screen.query_one("#built"))
        found["result"] = content(screen.query_one("#result"))
        for name in ("catalogs", "out", "split-bundle"):
            screen.query_one(f"#{name}", Input).value = ""
        found["seen"] = await look_and_click(app, pilot)

    drive(tmp_path / "home", scenario, start="bundle", size=SIZE)
    assert_column(found["channels"], [h.shown for h in named])
    for column in found["columns"]:
        assert_column(column, SHOWN)
    # a long licence is cut in the table (the highlighted row's line has it whole)
    assert_column(
        found["licences"], [h.shown if len(h.raw) <= LICENCE_WIDTH else h.raw[:27] + "…" for h in HOSTILE]
    )
    channel = found["channels"][0].plain
    assert_text(found["note"], f"{channel}: {len(HOSTILE)} components ({HOSTILE[0].shown})")
    assert_text(found["info"], HOSTILE[1].shown)
    for value, h in zip(found["details"], HOSTILE, strict=True):
        assert_text(value, f"{h.shown} {h.shown} ({h.shown}): licence {h.shown}; not locked")
    assert_text(found["step"], f"fetch {HOSTILE[-1].shown}")
    assert_text(found["built"], f"payload sha256 {HOSTILE[2].shown}\n", whole=False)
    assert_text(found["built"], f"signers {', '.join(SHOWN)}", whole=False)
    assert_text(found["result"], f"OK: b.bundle: 1 files, 1 bytes, signed by {', '.join(SHOWN)}")
    assert_harmless(found["seen"], tmp_path / SHOTS)
