"""Bundle (build host): a channel's components from its catalog and lock, then ``bundle build`` with
progress per component, signed with the keys given (passphrase at a masked prompt), and ``bundle split``
of the result for removable media.

Reading the catalogs changes nothing and is no command of the CLI: it is not recorded. Build and
split are ``bundle.build`` and ``bundle.split``, with the CLI's records. The passphrase goes to the
key loader and nowhere else: not in the command line recorded, not in the details, not kept after
the action (the field is emptied when the action starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Button, Input, Label, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from vigil.basics.errors import VigilError
from vigil.bundle.catalog import (
    CATALOG_DIR,
    Catalog,
    Lock,
    catalog_path,
    check_lock_current,
    load_catalog,
    load_lock,
)
from vigil.installer import ops
from vigil.tui.screens._base import VigilScreen
from vigil.tui.session import Outcome, perform
from vigil.tui.untrusted import plain
from vigil.tui.widgets import EventRelay, ResultLine, to_ui
from vigil.tui.widgets.bundle import ComponentTable, component_rows


def channels(catalog_dir: Path) -> list[str]:
    """The channels of a catalog directory: each ``CHANNEL.yaml`` but the locks."""
    return sorted(
        p.name.removesuffix(".yaml") for p in catalog_dir.glob("*.yaml") if not p.name.endswith(".lock.yaml")
    )


@dataclass(frozen=True)
class ChannelView:
    """A channel as the screen shows it: its catalog, its lock (None: not locked), and what is wrong."""

    catalog: Catalog
    lock: Lock | None
    note: str = ""


def read_channel(catalog_dir: Path, channel: str) -> ChannelView:
    """The catalog and lock the build would read; a stale or missing lock is said (the build refuses it)."""
    catalog = load_catalog(catalog_path(channel, catalog_dir))
    if not catalog.lock_path.exists():
        return ChannelView(
            catalog, None, f"{catalog.lock_path}: no lock file; run `vigil bundle lock --channel {channel}`"
        )
    lock = load_lock(catalog.lock_path)
    try:
        check_lock_current(catalog, lock)
    except VigilError as exc:
        return ChannelView(catalog, lock, f"{exc}")
    return ChannelView(catalog, lock)


def built_line(built: ops.Built) -> str:
    """``vigil bundle build``'s OK line."""
    info = built.info
    return (
        f"OK: {built.path.name}: {info['files']} files, {info['bytes']} bytes, "
        f"signed by {', '.join(built.signers)}"
    )


def built_summary(built: ops.Built) -> str:
    """The result: where, how big, its digest, who signed it."""
    info = built.info
    return "\n".join(
        [
            f"bundle  {built.path}  ({built.path.stat().st_size} bytes)",
            f"payload sha256 {info['payload']['sha256']}",
            f"version {info['version']}  channel {info['channel']}  arch {info['arch']}  "
            f"expires {info['expires']}",
            "signers " + ", ".join(built.signers),
        ]
    )


def split_line(path: Path, split: ops.Split) -> str:
    """``vigil bundle split``'s OK line."""
    return f"OK: {path.name}: {split.parts} part(s) of at most {split.part_size} bytes; index {split.index}"


def key_paths(text: str) -> list[Path]:
    """Signing keys, comma-separated (``--key`` each)."""
    return [Path(p.strip()).expanduser() for p in text.split(",") if p.strip()]


class BuildScreen(VigilScreen):
    MODE = "bundle"
    LABEL = "Bundle"
    HELP = "Build a channel's signed bundle on the build host, and split it for media"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+g", "build", "Build", id="bundle-build", tooltip="Fetch, stage, pack and sign the channel"
        ),
        Binding("ctrl+t", "split", "Split", id="bundle-split", tooltip="Cut the bundle into parts for media"),
        Binding("ctrl+r", "reload", "Channels", id="bundle-channels", tooltip="Read the catalogs again"),
    ]

    DEFAULT_CSS = """
    BuildScreen .row { height: 1; margin: 0 1; }
    BuildScreen .row Label { width: 9; }
    BuildScreen .row Label.short { width: 5; margin-left: 1; }
    BuildScreen .row Input { width: 1fr; }
    BuildScreen .row #version { width: 6; }
    BuildScreen .row #passphrase { width: 16; }
    BuildScreen .row #size { width: 8; }
    BuildScreen #buttons { height: 1; margin: 0 1; }
    BuildScreen #buttons Button { margin-right: 2; }
    BuildScreen #buttons #channel-note { width: 1fr; color: $text-muted; }
    BuildScreen #progress-row { height: 1; margin: 0 1; }
    BuildScreen #step { width: 1fr; color: $text-muted; }
    BuildScreen #lists { height: 1fr; margin: 0 1; }
    BuildScreen #channels { width: 16; height: 1fr; }
    BuildScreen #component-detail { height: 1; margin: 0 1; color: $text-muted; }
    BuildScreen #components { width: 1fr; height: 1fr; }
    BuildScreen #built { height: auto; max-height: 4; margin: 0 1; color: $text-muted; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.channel: str | None = None
        self.view: ChannelView | None = None
        self.built: ops.Built | None = None
        self._busy = False
        #: progress events that reached the screen (for the tests: progress is live)
        self.events_shown = 0

    def body(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Catalogs")
            yield Input(placeholder=f"the packaged ones ({CATALOG_DIR.name}/)", id="catalogs", compact=True)
            yield Label("Out", classes="short")
            yield Input(placeholder="directory for the bundle", id="out", compact=True)
        with Horizontal(classes="row"):
            yield Label("Version")
            yield Input(placeholder="N", id="version", compact=True, type="integer")
            yield Label("Keys", classes="short")
            yield Input(placeholder="release.key, second.key (k-of-n)", id="keys", compact=True)
            yield Label("Pass", classes="short")
            yield Input(placeholder="passphrase", id="passphrase", compact=True, password=True)
        with Horizontal(classes="row"):
            yield Label("Split")
            yield Input(placeholder="bundle to split (the one built)", id="split-bundle", compact=True)
            yield Label("Size", classes="short")
            yield Input(placeholder="e.g. 4G", id="size", compact=True)
        with Horizontal(id="buttons"):
            yield Button("Build", id="build", compact=True, variant="primary")
            yield Button("Split", id="split", compact=True)
            yield Label("", id="channel-note")
        with Horizontal(id="progress-row"):
            yield Label("", id="step")
            yield ProgressBar(id="bar", show_eta=False)
        yield ResultLine(id="result")
        with Horizontal(id="lists"):
            yield OptionList(id="channels")
            yield ComponentTable(id="components")
        yield Static("", id="component-detail", markup=False)
        yield Static("", id="built", markup=False)

    def on_mount(self) -> None:
        self.query_one("#bar", ProgressBar).display = False
        self.action_reload()
        self.query_one("#channels", OptionList).focus()

    # -- the catalogs --------------------------------------------------------------------------
    def _catalog_dir(self) -> Path | None:
        text = self.query_one("#catalogs", Input).value.strip()
        return Path(text).expanduser() if text else None

    @on(Input.Submitted, "#catalogs")
    def action_reload(self) -> None:
        self._list_channels(self._catalog_dir() or CATALOG_DIR)

    @work(thread=True, exclusive=True, group="catalog", exit_on_error=False)
    def _list_channels(self, catalog_dir: Path) -> None:
        to_ui(self.app, self._listed, catalog_dir, channels(catalog_dir) if catalog_dir.is_dir() else None)

    def _listed(self, catalog_dir: Path, names: list[str] | None) -> None:
        options = self.query_one("#channels", OptionList)
        options.clear_options()
        if not names:  # no channel to show: nor its components (the last channel's stayed)
            self.channel = None
            self.view = None
            self.query_one("#components", ComponentTable).show([])
            self.query_one("#channel-note", Label).update("")
        if names is None:
            self.query_one("#result", ResultLine).fail([f"FAIL: {catalog_dir}: not a directory of catalogs"])
            return
        if not names:
            self.query_one("#result", ResultLine).info(f"{catalog_dir}: no catalog (CHANNEL.yaml) here")
            return
        options.add_options([Option(plain(n), id=n) for n in names])  # a file's name: text
        keep = self.channel if self.channel in names else names[0]
        options.highlighted = names.index(keep)

    @on(OptionList.OptionHighlighted, "#channels")
    def _channel_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.channel = event.option.id
        if self.channel:
            self._read_channel(self._catalog_dir() or CATALOG_DIR, self.channel)

    @work(thread=True, exclusive=True, group="catalog-read", exit_on_error=False)
    def _read_channel(self, catalog_dir: Path, channel: str) -> None:
        try:
            view: ChannelView | str = read_channel(catalog_dir, channel)
        except VigilError as exc:
            view = f"FAIL: {exc}"
        to_ui(self.app, self._channel_read, channel, view)

    def _channel_read(self, channel: str, view: ChannelView | str) -> None:
        if channel != self.channel:
            return  # the operator moved on
        table = self.query_one("#components", ComponentTable)
        note = self.query_one("#channel-note", Label)
        if isinstance(view, str):
            self.view = None
            table.show([])
            note.update("")
            self.query_one("#result", ResultLine).fail([view])
            return
        self.view = view
        table.show(component_rows(view.catalog, view.lock))
        total = table.total_size()
        size = f", {total} bytes to fetch" if total is not None else ""
        note.update(plain(f"{channel}: {len(table.rows_shown)} components{size} ({view.catalog.arch})"))
        result = self.query_one("#result", ResultLine)
        if view.note:
            result.info(view.note)
        elif not result.lines or result.has_class("-info"):
            result.clear()

    @on(ComponentTable.RowHighlighted, "#components")
    def _component_highlighted(self, event: ComponentTable.RowHighlighted) -> None:
        table = self.query_one("#components", ComponentTable)
        self.query_one("#component-detail", Static).update(plain(table.detail(event.cursor_row)))

    # -- build ---------------------------------------------------------------------------------
    def _take_passphrase(self) -> bytes | None:
        """The passphrase typed, taken out of the field (an empty field: keys without one)."""
        field = self.query_one("#passphrase", Input)
        text = field.value
        field.value = ""
        return text.encode() if text else None

    def _keys(self) -> list[Path] | None:
        keys = key_paths(self.query_one("#keys", Input).value)
        if not keys:
            self.query_one("#result", ResultLine).fail(
                ["FAIL: --key: give the signing key(s), comma-separated"]
            )
            return None
        return keys

    @on(Button.Pressed, "#build")
    def action_build(self) -> None:
        result = self.query_one("#result", ResultLine)
        if self.busy:
            self.notify("a build or split is under way", severity="warning")
            return
        if not self.channel:
            result.fail(["FAIL: --channel: choose a channel from the list"])
            return
        version_text = self.query_one("#version", Input).value.strip()
        if not version_text.isdigit():
            result.fail(["FAIL: --version: give the bundle version, a whole number"])
            return
        out_text = self.query_one("#out", Input).value.strip()
        if not out_text:
            result.fail(["FAIL: --out: give the directory to write the bundle into"])
            return
        keys = self._keys()
        if keys is None:
            return
        passphrase = self._take_passphrase()
        self._start(f"building {self.channel} version {version_text}")
        self.query_one("#components", ComponentTable).start()
        self.query_one("#built", Static).update("")
        self._build(
            self.channel,
            int(version_text),
            keys,
            passphrase,
            Path(out_text).expanduser(),
            self._catalog_dir(),
        )

    @work(thread=True, exclusive=True, group="bundle-build", exit_on_error=False)
    def _build(
        self,
        channel: str,
        version: int,
        keys: list[Path],
        passphrase: bytes | None,
        out: Path,
        catalog_dir: Path | None,
    ) -> None:
        argv = ["bundle", "build", "--channel", channel, "--version", str(version), "--out", str(out)]
        argv += [a for k in keys for a in ("--key", str(k))]
        argv += ["--catalog-dir", str(catalog_dir)] if catalog_dir else []
        inv = self.session.invocation("bundle.build", argv, EventRelay(self.app, self._on_event))

        def build(inv: ops.Invocation) -> ops.Built:
            signing = ops.load_keys(keys, passphrase)
            return ops.build_bundle(
                inv, channel=channel, version=version, keys=signing, out_dir=out, catalog_dir=catalog_dir
            )

        outcome = perform(inv, build)
        to_ui(self.app, self._built, outcome)

    def _built(self, outcome: Outcome[ops.Built]) -> None:
        self._end()
        result = self.query_one("#result", ResultLine)
        table = self.query_one("#components", ComponentTable)
        if outcome.value is None:
            table.failed()
            result.fail(outcome.failures)
            return
        self.built = outcome.value
        table.all("signed")
        result.ok(built_line(self.built))
        self.query_one("#built", Static).update(plain(built_summary(self.built), newlines=True))
        self.query_one("#split-bundle", Input).value = str(self.built.path)

    # -- split ---------------------------------------------------------------------------------
    @on(Button.Pressed, "#split")
    def action_split(self) -> None:
        result = self.query_one("#result", ResultLine)
        if self.busy:
            self.notify("a build or split is under way", severity="warning")
            return
        text = self.query_one("#split-bundle", Input).value.strip()
        if not text:
            result.fail(["FAIL: bundle: give the bundle to split (build one, or type its path)"])
            return
        size = self.query_one("#size", Input).value.strip()
        if not size:
            result.fail(["FAIL: --size: give the largest part, e.g. 4G or 700M"])
            return
        keys = self._keys()
        if keys is None:
            return
        passphrase = self._take_passphrase()
        self._start(f"splitting into parts of {size}")
        self._split(Path(text).expanduser(), size, keys, passphrase)

    @work(thread=True, exclusive=True, group="bundle-build", exit_on_error=False)
    def _split(self, path: Path, size: str, keys: list[Path], passphrase: bytes | None) -> None:
        argv = ["bundle", "split", str(path), "--size", size, *[a for k in keys for a in ("--key", str(k))]]
        inv = self.session.invocation("bundle.split", argv, EventRelay(self.app, self._on_event))

        def split(inv: ops.Invocation) -> ops.Split:
            return ops.split_bundle(inv, path, size, ops.load_keys(keys, passphrase))

        outcome = perform(inv, split)
        to_ui(self.app, self._splitted, path, outcome)

    def _splitted(self, path: Path, outcome: Outcome[ops.Split]) -> None:
        self._end()
        result = self.query_one("#result", ResultLine)
        if outcome.value is None:
            result.fail(outcome.failures)
        else:
            result.ok(split_line(path, outcome.value))

    # -- progress ------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A build or split runs (one at a time)."""
        return self._busy

    def _start(self, what: str) -> None:
        self._busy = True
        self.query_one("#result", ResultLine).info(f"{what} …")
        self.query_one("#step", Label).update(plain(what))
        bar = self.query_one("#bar", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True

    def _end(self) -> None:
        self._busy = False
        self.query_one("#bar", ProgressBar).display = False
        self.query_one("#step", Label).update("")

    def _on_event(self, event: ops.Event) -> None:
        self.events_shown += 1
        table = self.query_one("#components", ComponentTable)
        if isinstance(event, ops.Step):
            self.query_one("#step", Label).update(plain(event.text))
            words = event.text.split()
            step, name = (words + ["", ""])[:2]
            if step == "fetch" and name:
                table.fetching(name)
            elif step == "check" and name:
                table.set_state(name, "checked")
            elif step == "stage" and name:
                table.set_state(name, "staged")
            elif step == "compress":
                table.all("compressing")
            elif step == "sign":
                table.all("signing")
        else:
            self.query_one("#step", Label).update(plain(event.label))
            self.query_one("#bar", ProgressBar).update(total=event.total, progress=event.done)
