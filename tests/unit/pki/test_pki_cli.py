"""`vigil pki init|issue|status`: one line each, JSON where it is data, an audit record for every call,
and exit 1 with the certificate named when one is not the site CA's."""

from __future__ import annotations

import json
import os
import shutil
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


def _mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def test_init_makes_secrets_private_even_first_and_under_umask_0(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = os.umask(0)  # the most an operator's shell can leave open
    try:
        assert main(["pki", "init"]) == 0
        assert main(["pki", "issue", "--name", "mon01", "--ip", "198.18.0.10"]) == 0
    finally:
        os.umask(old)
    paths = pki.PkiPaths.of(home)
    issued = paths.issued("mon01")
    assert _mode(home / "secrets") == 0o700
    assert _mode(paths.root) == _mode(issued.parent) == _mode(issued) == 0o700
    assert _mode(paths.ca_key) == _mode(issued / "server.key") == 0o600
    assert _mode(paths.ca_cert) == _mode(issued / "server.crt") == 0o644


def test_a_secrets_dir_others_may_read_is_closed_one_they_may_write_or_a_link_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secrets = home / "secrets"
    # 0755, as an earlier `pki init` left it: closed to 0700, the CA made
    secrets.mkdir(parents=True)
    secrets.chmod(0o755)
    assert main(["pki", "init"]) == 0
    assert _mode(secrets) == 0o700 and pki.PkiPaths.of(home).ca_key.is_file()

    def refused(reason: str) -> None:
        capsys.readouterr()
        assert main(["pki", "init"]) == 1
        err = capsys.readouterr().err
        assert err == f"FAIL: {secrets}: {reason}\n", err
        assert not (secrets / "pki").exists() or secrets.is_symlink()

    for open_mode in (0o775, 0o757, 0o777):
        shutil.rmtree(secrets)
        secrets.mkdir()
        secrets.chmod(open_mode)
        refused(f"is writable by others (mode {open_mode:o}); check it, then chmod 700 it")
        assert _mode(secrets) == open_mode
    # another user's
    shutil.rmtree(secrets)
    secrets.mkdir(mode=0o700)
    os.chown(secrets, 65534, 65534)
    refused("is not a directory of this user")
    # a link to a directory of the attacker's choosing: nothing is written there
    secrets.rmdir()
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    secrets.symlink_to(target)
    refused("is a link; the site's secrets must not lead elsewhere")
    assert list(target.iterdir()) == []
    # a file in its place
    secrets.unlink()
    secrets.write_text("")
    capsys.readouterr()
    assert main(["pki", "init"]) == 1
    assert capsys.readouterr().err.startswith(f"FAIL: {secrets}: cannot be opened as a directory: ")
