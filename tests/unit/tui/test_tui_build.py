"""The Bundle screen: channels and components from real catalogs and locks, a real (small, offline)
build signed with a passphrase-protected key, a split for media, and a bad key in the CLI's words."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from textual.pilot import Pilot
from textual.widgets import Input, OptionList
from tui_helpers import audit_lines, cli_fail_line, drive, settle

from tests.factories import make_key, make_trust
from vigil.bundle.catalog import CATALOG_DIR, load_lock, lock_channel
from vigil.installer import ops
from vigil.tui import VigilApp
from vigil.tui.screens import BuildScreen
from vigil.tui.widgets import ResultLine
from vigil.tui.widgets.bundle import ComponentTable

PASSPHRASE = "correct horse battery staple"


def make_catalogs(root: Path) -> Path:
    """Two channels: `mini` (two local files, locked offline) and `draft` (not locked)."""
    root.mkdir(parents=True)
    comps = []
    for name, size in (("alpha", 3000), ("beta", 5000)):
        blob = root / f"{name}.bin"
        blob.write_bytes(name.encode() * (size // len(name)))
        comps.append(
            {
                "name": name,
                "version": "1.0",
                "license": "MIT" if name == "alpha" else "Apache-2.0",
                "source": {
                    "kind": "file",
                    "path": blob.name,
                    "sha256": hashlib.sha256(blob.read_bytes()).hexdigest(),
                },
                "files": {blob.name: f"share/{blob.name}"},
            }
        )
    (root / "mini.yaml").write_text(yaml.safe_dump({"channel": "mini", "arch": "amd64", "components": comps}))
    lock_channel(root / "mini.yaml")
    (root / "draft.yaml").write_text(
        yaml.safe_dump({"channel": "draft", "arch": "amd64", "components": comps[:1]})
    )
    return root


def table_rows(app: VigilApp) -> list[list[str]]:
    table = app.screen.query_one("#components", ComponentTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def open_catalogs(app: VigilApp, pilot: Pilot[None], catalogs: Path) -> None:
    await pilot.press("f6")
    await settle(app, pilot)
    field = app.screen.query_one("#catalogs", Input)
    field.value = str(catalogs)
    field.focus()
    await pilot.press("enter")
    await settle(app, pilot)
    await settle(app, pilot)  # the channel highlighted, then its lock read


def test_build_and_split_a_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_CACHE", str(tmp_path / "cache"))
    catalogs = make_catalogs(tmp_path / "catalogs")
    key = make_key(tmp_path / "keys", "release", PASSPHRASE.encode())
    home, out = tmp_path / "home", tmp_path / "out"
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await open_catalogs(app, pilot, catalogs)
        screen = app.screen
        assert isinstance(screen, BuildScreen)
        seen["channels"] = [str(o.prompt) for o in screen.query_one("#channels", OptionList).options]
        seen["rows"] = table_rows(app)  # draft: the catalog's components, not locked yet
        seen["draft"] = screen.query_one("#result", ResultLine).text
        screen.query_one("#channels", OptionList).focus()
        await pilot.press("down")  # mini
        await settle(app, pilot)
        seen["mini"] = table_rows(app)
        seen["detail"] = str(screen.query_one("#component-detail").render())
        screen.query_one("#version", Input).value = "7"
        screen.query_one("#out", Input).value = str(out)
        screen.query_one("#keys", Input).value = str(key.key_path)
        screen.query_one("#passphrase", Input).value = PASSPHRASE
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["result"] = screen.query_one("#result", ResultLine).text
        seen["built"] = str(screen.query_one("#built").render())
        seen["after"] = table_rows(app)
        seen["history"] = screen.query_one("#components", ComponentTable).history
        seen["events"] = screen.events_shown
        seen["passphrase_left"] = screen.query_one("#passphrase", Input).value
        seen["split_bundle"] = screen.query_one("#split-bundle", Input).value
        # split for media: the passphrase is asked again (it is not kept)
        screen.query_one("#size", Input).value = "64K"
        screen.query_one("#passphrase", Input).value = PASSPHRASE
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        seen["split"] = screen.query_one("#result", ResultLine).text

    drive(home, scenario, start="import")
    assert seen["channels"] == ["draft", "mini"]
    assert seen["rows"] == [["alpha", "1.0", "?", "", "MIT", "file"]]
    assert "draft.lock.yaml: no lock file; run `vigil bundle lock --channel draft`" in seen["draft"]
    assert seen["mini"] == [
        ["alpha", "1.0", "2.9 KiB", "", "MIT", "file"],
        ["beta", "1.0", "4.9 KiB", "", "Apache-2.0", "file"],
    ]
    assert seen["detail"] == "alpha 1.0 (file): licence MIT; 1 artifact(s), 2.9 KiB"
    bundle = out / "vigil-7-amd64.bundle"
    assert bundle.is_file()
    signer = key.key.id_hex
    assert seen["result"].startswith(f"OK: {bundle.name}: ") and seen["result"].endswith(
        f"signed by {signer}"
    )
    built = seen["built"]
    assert f"bundle  {bundle}  ({bundle.stat().st_size} bytes)" in built
    assert f"signers {signer}" in built and "payload sha256 " in built
    assert [r[3] for r in seen["after"]] == ["signed", "signed"]
    # each component's own stages, then the bundle's: the build's steps as they came
    stages = ["waiting", "fetching", "checked", "staged", "compressing", "signing", "signed"]
    assert seen["history"] == {"alpha": stages, "beta": stages}
    assert seen["events"] >= 9  # fetch, check, stage per component, build, compress, sign
    assert seen["passphrase_left"] == ""
    assert seen["split_bundle"] == str(bundle)
    assert (
        seen["split"].startswith(f"OK: {bundle.name}: ")
        and "part(s) of at most 65536 bytes; index " in seen["split"]
    )
    # what was built verifies with the real verifier against a root holding the key
    make_trust(tmp_path / "trust.json", [key])
    inv = ops.Invocation(home=tmp_path / "other")
    assert ops.verify_bundle(inv, bundle, tmp_path / "trust.json").signers == [signer]
    # the records are the CLI's: actions, objects, argv; the passphrase is nowhere in the log
    build, split = audit_lines(home)[-2:]
    assert (build["action"], build["outcome"], build["object"]) == ("bundle.build", "ok", str(bundle))
    assert build["details"]["argv"] == [  # type: ignore[index]
        "bundle", "build", "--channel", "mini", "--version", "7", "--out", str(out),
        "--key", str(key.key_path), "--catalog-dir", str(catalogs),
    ]  # fmt: skip
    assert build["details"]["signers"] == [signer]  # type: ignore[index]
    assert (split["action"], split["outcome"], split["object"]) == ("bundle.split", "ok", str(bundle))
    assert PASSPHRASE not in (home / "audit" / "log.jsonl").read_text()


def test_a_bad_key_is_refused_in_the_cli_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_CACHE", str(tmp_path / "cache"))
    catalogs = make_catalogs(tmp_path / "catalogs")
    home, out, missing = tmp_path / "home", tmp_path / "out", tmp_path / "no-such.key"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    argv = ["bundle", "build", "--channel", "mini", "--version", "2", "--out", str(out)]
    argv += ["--key", str(missing), "--catalog-dir", str(catalogs)]
    expected = cli_fail_line(capsys, *argv)
    cli_record = audit_lines(home)[-1]
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await open_catalogs(app, pilot, catalogs)
        app.screen.query_one("#channels", OptionList).highlighted = 1
        await settle(app, pilot)
        app.screen.query_one("#version", Input).value = "2"
        app.screen.query_one("#out", Input).value = str(out)
        app.screen.query_one("#keys", Input).value = str(missing)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["result"] = app.screen.query_one("#result", ResultLine).lines
        seen["classes"] = set(app.screen.query_one("#result", ResultLine).classes)

    drive(home, scenario)
    assert expected.startswith(f"FAIL: {missing}: ")
    assert seen["result"] == [expected]
    assert "-fail" in seen["classes"]
    record = audit_lines(home)[-1]
    for field in ("action", "object", "outcome", "reason"):
        assert record[field] == cli_record[field], field
    assert record["details"]["argv"] == argv  # type: ignore[index]
    assert not out.exists() or not any(out.iterdir())


def test_the_packaged_debian_lock_in_the_table(tmp_path: Path) -> None:
    lock = load_lock(CATALOG_DIR / "debian.lock.yaml")
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f6")
        await settle(app, pilot)
        await settle(app, pilot)
        options = app.screen.query_one("#channels", OptionList)
        names = [str(o.prompt) for o in options.options]
        options.highlighted = names.index("debian")
        await settle(app, pilot)
        seen["rows"] = table_rows(app)
        seen["note"] = str(app.screen.query_one("#channel-note").render())

    drive(tmp_path / "home", scenario)
    assert [r[0] for r in seen["rows"]] == [c.name for c in lock.components]
    auditd = next(c for c in lock.components if c.name == "auditd")
    row = next(r for r in seen["rows"] if r[0] == "auditd")
    size = f"{sum(a.size or 0 for a in auditd.artifacts) / 1024:.1f} KiB"
    assert row == ["auditd", auditd.version, size, "", auditd.license, "deb"]
    # vigil's own wheel is built at build time: its size, and so the total, is not known before
    assert seen["note"] == f"debian: {len(lock.components)} components (amd64)"
    # reading catalogs is not an action: nothing recorded
    assert not (tmp_path / "home" / "audit" / "log.jsonl").exists()
    json.dumps(seen)  # plain strings only


def test_the_packaged_channels_and_every_state_are_shown_whole(tmp_path: Path) -> None:
    """At 80x24 the channel list showed "debian-n" and the state column "waiti"."""
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("f6")
        await settle(app, pilot)
        await settle(app, pilot)
        screen = app.screen
        channels = screen.query_one("#channels", OptionList)
        seen["channels"] = [str(o.prompt) for o in channels.options]
        seen["room"] = channels.scrollable_content_region.width
        table = screen.query_one("#components", ComponentTable)
        table.start()
        await pilot.pause()
        seen["state_width"] = table.columns["state"].get_render_width(table) - 2 * table.cell_padding
        seen["rendered"] = [str(table.get_cell_at((r, 3))) for r in range(table.row_count)]

    drive(tmp_path / "home", scenario, size=(80, 24))
    assert "debian-next" in seen["channels"], seen["channels"]
    assert seen["room"] >= max(map(len, seen["channels"])), seen
    assert seen["state_width"] >= len("compressing"), seen
    assert set(seen["rendered"]) == {"waiting"}


def test_a_bad_catalogs_path_empties_the_components_too(tmp_path: Path) -> None:
    """The channel list went empty and the last channel's components stayed, as if still chosen."""
    catalogs = make_catalogs(tmp_path / "catalogs")
    seen: dict[str, Any] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await open_catalogs(app, pilot, catalogs)
        seen["before"] = len(table_rows(app))
        await open_catalogs(app, pilot, tmp_path / "nowhere")
        seen["channels"] = app.screen.query_one("#channels", OptionList).option_count
        seen["after"] = table_rows(app)
        seen["result"] = app.screen.query_one("#result", ResultLine).text

    drive(tmp_path / "home", scenario)
    assert seen["before"] > 0
    assert (seen["channels"], seen["after"]) == (0, [])
    assert seen["result"] == f"FAIL: {tmp_path / 'nowhere'}: not a directory of catalogs"
