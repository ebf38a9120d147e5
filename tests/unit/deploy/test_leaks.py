"""The scan of a run's artifacts for the site's secrets (installer/deploy/leaks.py): it finds a key
leaked whole, in part, JSON-escaped or across a read boundary, names the secret's file and never
the secret, and neither follows links nor takes public certificates or short values for secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vigil.installer import pki
from vigil.installer.deploy import leaks


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    pki.init_ca(home)
    pki.issue(home, "mon01", ips=["198.18.0.10"])
    secrets = home / "secrets"
    (secrets / "grafana-admin-password-mon01").write_text("Zq8s0dKfP2mLx7Vb\n")
    (secrets / "grafana-admin-password-mon01").chmod(0o600)
    (secrets / "short").write_text("abc123\n")
    (secrets / "short").chmod(0o600)
    (secrets / "quoted").write_text('pa"ss\\word-long-enough\n')
    (secrets / "quoted").chmod(0o600)
    return home


def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "artifacts" / "job_events").mkdir(parents=True)
    (run / "artifacts" / "stdout").write_text("PLAY RECAP ok=3 changed=0\n")
    return run


def test_nothing_found_in_a_clean_run(home: Path, tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "artifacts" / "job_events" / "1.json").write_text(json.dumps({"event": "runner_on_ok"}))
    # the public certificates may appear anywhere: they are not secrets
    (run / "artifacts" / "cert").write_bytes((home / "secrets" / "pki" / "ca.crt").read_bytes())
    assert leaks.find_leaks(home, run) == []


def test_a_key_whole_in_part_or_json_escaped_is_found_and_named(home: Path, tmp_path: Path) -> None:
    key_path = home / "secrets" / "pki" / "issued" / "mon01" / "server.key"
    pem = key_path.read_text()
    run = run_dir(tmp_path)
    events = run / "artifacts" / "job_events"
    (events / "1.json").write_text(json.dumps({"event_data": {"res": {"msg": pem}}}))
    (events / "2.json").write_text("..." + pem.splitlines()[1] + "...")
    (events / "3.json").write_text(json.dumps({"msg": "Zq8s0dKfP2mLx7Vb"}))
    (events / "4.json").write_text(json.dumps({"msg": 'pa"ss\\word-long-enough'}))
    (events / "5.json").write_text(json.dumps({"msg": "abc123"}))  # too short to tell from chance
    found = leaks.find_leaks(home, run)
    assert [(leak.found_in.name, leak.secret.name) for leak in found] == [
        ("1.json", "server.key"),
        ("2.json", "server.key"),
        ("3.json", "grafana-admin-password-mon01"),
        ("4.json", "quoted"),
    ]
    for leak in found:
        assert "Zq8s0dKfP2mLx7Vb" not in leak.line() and pem.splitlines()[1] not in leak.line()
        assert str(leak.secret) in leak.line() and str(leak.found_in) in leak.line()


def test_a_secret_across_the_read_boundary_is_found(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leaks, "CHUNK", 64)
    run = run_dir(tmp_path)
    (run / "artifacts" / "stdout").write_text("x" * 60 + "Zq8s0dKfP2mLx7Vb" + "y" * 200)
    assert [leak.found_in.name for leak in leaks.find_leaks(home, run)] == ["stdout"]


def test_links_are_not_followed_and_public_or_oversized_files_are_not_secrets(
    home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.write_text("not-a-secret-but-long-enough\n")
    outside.chmod(0o600)
    (home / "secrets" / "link").symlink_to(outside)
    (home / "secrets" / "public").write_text("world-readable-long-value\n")
    (home / "secrets" / "public").chmod(0o644)
    assert b"not-a-secret-but-long-enough" not in leaks.needles(home)
    assert b"world-readable-long-value" not in leaks.needles(home)
    run = run_dir(tmp_path)
    (run / "artifacts" / "linked").symlink_to(home / "secrets" / "grafana-admin-password-mon01")
    (run / "artifacts" / "text").write_text("not-a-secret-but-long-enough world-readable-long-value")
    assert leaks.find_leaks(home, run) == []
