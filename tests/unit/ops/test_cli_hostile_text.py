"""The command line prints what hosts, bundles and the audit trail hand it with its escapes visible.

Each test feeds text holding terminal escapes (``\\x1b[2K\\r`` erases the line, ``\\x1b[1A`` moves up
to rewrite the one before), a carriage return, a bidirectional override and a newline followed by a
forged ``OK:`` line through one command's real data path, run by ``vigil``'s own ``main``, and reads
what reached the terminal: none of those characters, each shown as an escape, and the FAIL line (or
the command's own lines) still there and alone on their lines. Only Ansible's run is stood in for
(the host's answer is the file its playbook would have written); everything from there is vigil's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.factories import craft_bundle, make_key, make_trust
from tests.unit.deploy.test_upgrade_plan import MON, _doc
from vigil.basics.printable import visible
from vigil.installer.cli import main
from vigil.installer.deploy.runner import Progress, RunResult

#: what a hostile host, service or bundle puts in a field that is shown on one line
HOSTILE = "ok\x1b[2K\r\x1b[1Aall good \u202eevil\u202c\nOK: status: 1 hosts as deployed"
SHOWN = "ok\\x1b[2K\\x0d\\x1b[1Aall good \\u202eevil\\u202c\\x0aOK: status: 1 hosts as deployed"
#: characters that must never reach the terminal from such a field
RAW = ("\x1b", "\r", "\u202e", "\u202c")


def _clean(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"{ch!r} reached the terminal: {text!r}"


def _forged_ok(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("OK: status")]


def test_visible_escapes_controls_bidi_surrogates_and_newlines() -> None:
    assert visible(HOSTILE) == SHOWN
    assert visible("a\x9bb\x7fc\ud800") == "a\\x9bb\\x7fc\\ud800"
    assert visible("line one\nline\ttwo\x1b", newlines=True) == "line one\nline\ttwo\\x1b"
    assert visible("tab\there") == "tab\\x09here"
    assert visible("plain [bold]text[/] é ✓") == "plain [bold]text[/] é ✓"


def _site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], Path, list[str]]:
    key = make_key(tmp_path / "keys", "release")
    trust = tmp_path / "trust.json"
    make_trust(trust, [key])
    home = tmp_path / "home"
    bundle = craft_bundle(tmp_path / "out", [key], version=2).path
    assert main(["--home", str(home), "bundle", "import", str(bundle), "--trust", str(trust)]) == 0
    inventory = tmp_path / "site"
    inventory.mkdir()
    hosts = {"all": {"children": {"monitoring": {"hosts": {"mon01": {"ansible_host": "198.18.0.10"}}}}}}
    (inventory / "hosts.yml").write_text(json.dumps(hosts))
    ansible = tmp_path / "ansible"  # the playbook Ansible would run (stood in for below)
    (ansible / "playbooks").mkdir(parents=True)
    (ansible / "playbooks" / "status.yml").write_text("[]\n")
    capsys.readouterr()
    return ["--home", str(home)], inventory, ["--ansible-dir", str(ansible), "--trust", str(trust)]


def _host_answers(monkeypatch: pytest.MonkeyPatch, doc: dict[str, Any], unreachable: str = "") -> None:
    """mon01's status playbook writes DOC (or the host is unreachable with that message)."""
    from vigil.installer.deploy import upgrade as upgrade_mod

    monkeypatch.setattr(upgrade_mod, "ping_hosts", lambda **_: {"mon01": unreachable} if unreachable else {})

    def play(self: Any, bundle: Any, playbook: str, name: str, **kw: Any) -> RunResult:
        out = Path(kw["extra"]["vigil_status_dir"])
        (out / "mon01.json").write_text(json.dumps(doc))
        run = self.run_dir / f"01-{name}"
        run.mkdir()
        return RunResult(run_id=run.name, run_dir=run, status="successful", rc=0, progress=Progress())

    monkeypatch.setattr(upgrade_mod.Rollout, "_play", play)


def test_status_shows_a_hosts_escapes_and_its_fail_line_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base, inventory, opts = _site(tmp_path, capsys)
    doc = _doc("mon01", MON, drift=[{"component": "victoria-metrics", "path": "/etc/x", "reason": HOSTILE}])
    doc["facts"]["bundle_channel"] = HOSTILE
    doc["facts"]["components"]["victoria-metrics"]["version"] = HOSTILE
    _host_answers(monkeypatch, doc)
    assert main([*base, "status", "-i", str(inventory), "--no-replicas", *opts]) == 1
    out, err = capsys.readouterr()
    _clean(out + err)
    assert f"mon01: bundle 1 ({SHOWN})" in out.splitlines()
    assert f"  victoria-metrics {SHOWN} (bundle 1) vigil-victoriametrics active" in out.splitlines()
    assert f"  DRIFT victoria-metrics: /etc/x: {SHOWN}" in out.splitlines()
    assert not _forged_ok(out) and not _forged_ok(err)
    assert err.splitlines()[-1] == "FAIL: status: mon01 not as deployed"


def test_the_fail_line_shows_a_hosts_message_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base, inventory, opts = _site(tmp_path, capsys)
    _host_answers(monkeypatch, {}, unreachable=HOSTILE)
    assert main([*base, "status", "-i", str(inventory), "--no-replicas", *opts]) == 1
    out, err = capsys.readouterr()
    _clean(out + err)
    assert err.splitlines() == [f"FAIL: host mon01: unreachable: {SHOWN}"]
    assert not _forged_ok(out)


def test_inspect_shows_an_unverified_bundles_names_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = make_key(tmp_path / "keys", "release")

    def edit(manifest: dict[str, Any]) -> None:
        manifest["channel"] = HOSTILE
        manifest["components"][0].update(name="demo" + HOSTILE, version=HOSTILE, license=HOSTILE)

    bundle = craft_bundle(tmp_path / "out", [key], edit=edit).path
    assert main(["--home", str(tmp_path / "home"), "bundle", "inspect", str(bundle)]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
    assert "\\x1b[2K\\x0d" in out and "\\u202e" in out
    assert not [ln for ln in out.splitlines() if ln.startswith("OK:")]


def test_audit_show_and_fail_line_show_a_recorded_name_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--home", str(tmp_path / "home")]
    missing = tmp_path / f"x{HOSTILE}.bundle"  # a file name is whatever its maker chose
    assert main([*home, "bundle", "inspect", str(missing)]) == 1
    out, err = capsys.readouterr()
    _clean(out + err)
    assert len(err.splitlines()) == 1 and err.startswith("FAIL: ") and SHOWN in err
    assert main([*home, "audit", "show"]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
    shown = [ln for ln in out.splitlines() if SHOWN in ln]
    assert len(shown) == 1 and "bundle.inspect" in shown[0], out
    assert not [ln for ln in out.splitlines() if ln.startswith("OK:")]
