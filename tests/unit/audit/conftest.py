"""Fixtures for the audit log tests: a vigil home, the CLI in-process, a real log to tamper with."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from audit_helpers import LogFiles, Result, unprotect

from vigil.installer.audit import AuditPaths
from vigil.installer.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    h = tmp_path / "vigil"
    monkeypatch.setenv("VIGIL_HOME", str(h))
    monkeypatch.delenv("VIGIL_OPERATOR", raising=False)
    yield h
    paths = AuditPaths.under(h)
    unprotect(paths.log, paths.checkpoints)


@pytest.fixture
def vigil(capsys: pytest.CaptureFixture[str], home: Path) -> Callable[..., Result]:
    """Run the real ``vigil`` CLI in this process; return exit code, stdout and stderr."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)

    return run


#: the commands that make the log the tamper tests start from: 8 records, one per command
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("audit", "verify"),
    ("audit", "checkpoint"),
    ("--bogus-option", "audit", "show"),
    ("--operator", "alice", "audit", "show", "--json"),
    ("audit", "show", "--since", "not-a-date"),
    ("audit", "checkpoint"),
    ("audit", "show", "--action", "audit.verify", "--csv"),
    ("audit", "verify"),
)


@pytest.fixture
def real_log(vigil: Callable[..., Result], home: Path) -> LogFiles:
    """A log of 8 records written by real vigil commands, with their checkpoints."""
    for argv in COMMANDS:
        vigil(*argv)
    files = LogFiles(home)
    assert [r["seq"] for r in files.records()] == list(range(1, len(COMMANDS) + 1))
    return files
