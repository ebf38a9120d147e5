"""`vigil pki init|issue|status`: one line each, JSON where it is data, an audit record for every call,
and exit 1 with the certificate named when one is not the site CA's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vigil.installer import pki
from vigil.installer.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    return home


def records(home: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (home / "audit" / "log.jsonl").read_text().splitlines()]


def test_init_issue_status(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pass_file = tmp_path / "pass"
    pass_file.write_text("a passphrase\n")
    assert main(["pki", "init", "--passphrase-file", str(pass_file)]) == 0
    ca = pki.PkiPaths.of(home).ca_cert
    assert capsys.readouterr().out == f"OK: {ca}: site CA made\n"
    assert main(["pki", "init", "--passphrase-file", str(pass_file)]) == 0
    assert capsys.readouterr().out == f"OK: {ca}: site CA already there; nothing changed\n"
    argv = ["pki", "issue", "--name", "mon01", "--ip", "198.18.0.10", "--passphrase-file", str(pass_file)]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] is True and out["reason"] == "missing" and out["usage"] == "server"
    assert main(argv) == 0
    assert capsys.readouterr().out == f"OK: {out['cert']}: valid; nothing changed\n"
    assert main(["pki", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    (cert,) = status["certificates"]
    assert (cert["name"], cert["state"], cert["names"]) == ("mon01", "ok", ["mon01", "198.18.0.10"])
    assert 390 <= cert["days_left"] <= 397
    actions = [(r["action"], r["outcome"]) for r in records(home)]
    assert actions == [
        ("pki.init", "ok"),
        ("pki.init", "ok"),
        ("pki.issue", "ok"),
        ("pki.issue", "ok"),
        ("pki.status", "ok"),
    ]
    assert "a passphrase" not in (home / "audit" / "log.jsonl").read_text()


def test_status_fails_on_a_certificate_of_another_ca(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pki", "init"]) == 0
    other = tmp_path / "other"
    pki.init_ca(other)
    foreign = pki.issue(other, "evil")
    where = pki.PkiPaths.of(home).issued("evil")
    where.mkdir(mode=0o700, parents=True)
    os.replace(foreign.cert, where / "server.crt")
    capsys.readouterr()
    assert main(["pki", "status"]) == 1
    cap = capsys.readouterr()
    assert "  invalid  evil (server)" in cap.out
    assert cap.err.strip() == f"FAIL: {where / 'server.crt'}: invalid: not issued by the site CA"


def test_issue_without_a_ca_says_what_to_run(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pki", "issue", "--name", "mon01"]) == 1
    assert "no site CA; run `vigil pki init` first" in capsys.readouterr().err
