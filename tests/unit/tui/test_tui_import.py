"""The Import screen over real bundles: verify with progress, inspect, import; a refusal in the CLI's
words."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_helpers import Signed, audit_lines, cli_fail_line, drive, settle

from vigil.tui import VigilApp
from vigil.tui.widgets import ResultLine


def result(app: VigilApp) -> ResultLine:
    return app.screen.query_one("#result", ResultLine)


async def fill(app: VigilApp, bundle: Path, trust: Path | None) -> None:
    app.screen.query_one("#bundle", Input).value = str(bundle)
    app.screen.query_one("#trust", Input).value = str(trust) if trust else ""


def test_verify_shows_ok_progress_and_the_inspection(signed: Signed) -> None:
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await fill(app, signed.bundle, signed.trust)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["result"] = result(app).text
        seen["classes"] = set(result(app).classes)
        table = app.screen.query_one("#components", DataTable)
        seen["rows"] = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        seen["summary"] = str(app.screen.query_one("#summary").render())
        seen["events"] = app.screen.events_shown  # type: ignore[attr-defined]

    drive(signed.home, scenario)
    assert str(seen["result"]).startswith(f"OK: {signed.bundle.name}: version 3, 3 files, ")
    assert "--deep checks each file); signed by " + signed.key.key.id_hex in str(seen["result"])
    assert "-ok" in seen["classes"]  # type: ignore[operator]
    assert seen["events"] >= 1  # type: ignore[operator] # the byte count reached the screen
    assert seen["rows"] == [["demo", "1.0", "2", str(1000 + 170), "file", "Apache-2.0"]]
    assert f"signer {signed.key.key.id_hex}  test bundle v3" in str(seen["summary"])
    # each action left the record the CLI's would: same action and object, the operator, the argv
    verify, inspect = audit_lines(signed.home)[-2:]
    assert verify["action"] == "bundle.verify" and verify["outcome"] == "ok"
    assert verify["object"] == str(signed.bundle)
    assert verify["actor"]["operator"] == "alice"  # type: ignore[index]
    assert verify["details"]["argv"] == ["bundle", "verify", str(signed.bundle), "--trust", str(signed.trust)]  # type: ignore[index]
    assert verify["details"]["front_end"] == "tui"  # type: ignore[index]
    assert inspect["action"] == "bundle.inspect" and inspect["outcome"] == "ok"


def test_a_tampered_bundle_shows_the_cli_fail_line(
    signed: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = signed.tampered()
    expected = cli_fail_line(capsys, "bundle", "verify", str(bad), "--trust", str(signed.trust))
    assert expected.startswith(f"FAIL: {bad.name}") or expected.startswith(f"FAIL: {bad}")
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await fill(app, bad, signed.trust)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["lines"] = result(app).lines
        seen["classes"] = set(result(app).classes)
        seen["rows"] = app.screen.query_one("#components", DataTable).row_count

    drive(signed.home, scenario)
    assert seen["lines"] == [expected]
    assert "-fail" in seen["classes"]  # type: ignore[operator]
    assert seen["rows"] == 0  # nothing inspected after a failed verify
    last = audit_lines(signed.home)[-1]
    assert last["action"] == "bundle.verify" and last["outcome"] == "refused"
    assert f"FAIL: {last['reason']}" == expected  # the record's reason is the error's line


def test_import_by_keyboard_then_a_downgrade_is_refused_as_the_cli_says(
    signed: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.factories import craft_bundle

    older = craft_bundle(signed.tmp / "older", [signed.key], version=2).path
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        # tabbed and pressed: no mouse (the paths are set, not typed key by key: that is slow)
        await fill(app, signed.bundle, signed.trust)
        assert app.focused is app.screen.query_one("#bundle", Input)
        await pilot.press("tab", "tab", "tab", "tab", "enter")  # trust, Verify, Inspect, Import
        await settle(app, pilot)
        seen["imported"] = result(app).text
        app.screen.query_one("#bundle", Input).value = str(older)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["refused"] = result(app).lines

    drive(signed.home, scenario)
    assert seen["imported"] == (
        f"OK: {signed.bundle.name}: version 3 imported into {signed.home / 'bundles' / '3'}"
    )
    assert sorted(p.name for p in (signed.home / "bundles").iterdir() if p.name.isdigit()) == ["3"]
    expected = cli_fail_line(capsys, "bundle", "import", str(older), "--trust", str(signed.trust))
    assert "older" in expected or "downgrade" in expected
    assert seen["refused"] == [expected]
    assert sorted(p.name for p in (signed.home / "bundles").iterdir() if p.name.isdigit()) == ["3"]


def test_no_path_and_no_trust_root_are_one_line_each(
    signed: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    no_root = cli_fail_line(capsys, "bundle", "verify", str(signed.bundle))
    missing = cli_fail_line(capsys, "bundle", "inspect", str(signed.tmp / "missing.bundle"))
    seen: list[list[str]] = []

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        seen.append(result(app).lines)
        await fill(app, signed.bundle, None)  # no trust root installed, none given
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen.append(result(app).lines)
        await fill(app, signed.tmp / "missing.bundle", None)
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        seen.append(result(app).lines)

    drive(signed.home, scenario)
    assert seen[0] == ["FAIL: bundle: no path given"]
    assert no_root.endswith(": no trust root installed; pass --trust or run `vigil trust install`")
    assert seen[1] == [no_root]
    assert missing.startswith("FAIL: ") and seen[2] == [missing]


def _split(signed: Signed) -> Path:
    from vigil.installer.cli import main

    media = signed.tmp / "media"
    argv = ["bundle", "split", str(signed.bundle), "--key", str(signed.key.key_path), "--size", "1K"]
    assert main([*argv, "--out", str(media)]) == 0
    return media / f"{signed.bundle.name}.parts.json"


def test_a_parts_index_is_joined_then_verified_and_imported(signed: Signed) -> None:
    index = _split(signed)
    joined = index.parent / signed.bundle.name
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await fill(app, index, signed.trust)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        seen["verified"] = result(app).text
        seen["field"] = app.screen.query_one("#bundle", Input).value
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["imported"] = result(app).text

    drive(signed.home, scenario)
    assert joined.is_file() and joined.read_bytes() == signed.bundle.read_bytes()
    assert str(seen["verified"]).startswith(f"OK: {joined.name}: version 3, 3 files, ")
    assert seen["field"] == str(joined)  # the joined bundle takes the index's place
    assert seen["imported"] == f"OK: {joined.name}: version 3 imported into {signed.home / 'bundles' / '3'}"
    actions = [(r["action"], r["object"]) for r in audit_lines(signed.home)]
    assert ("bundle.join", str(index)) in actions and actions[-1] == ("bundle.import", str(joined))


def test_an_altered_part_is_refused_in_the_cli_words_and_nothing_is_imported(
    signed: Signed, capsys: pytest.CaptureFixture[str]
) -> None:
    index = _split(signed)
    part = sorted(index.parent.glob("*.part*"))[1]
    data = bytearray(part.read_bytes())
    data[10] ^= 0x01
    part.write_bytes(bytes(data))
    expected = cli_fail_line(capsys, "bundle", "join", str(index), "--trust", str(signed.trust))
    seen: dict[str, object] = {}

    async def scenario(app: VigilApp, pilot: Pilot[None]) -> None:
        await fill(app, index, signed.trust)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        seen["result"] = result(app).lines

    drive(signed.home, scenario)
    assert seen["result"] == [expected]
    assert part.name in expected
    assert not (signed.home / "bundles" / "3").exists()
    assert not (index.parent / signed.bundle.name).exists()
