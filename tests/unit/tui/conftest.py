"""Fixtures for the TUI's tests (helpers in tui_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import Signed, make_signed


@pytest.fixture
def signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Signed:
    """A bundle (version 3) signed by the one key of a trust root; VIGIL_HOME set for CLI runs to compare."""
    s = make_signed(tmp_path)
    monkeypatch.setenv("VIGIL_HOME", str(s.home))
    return s
