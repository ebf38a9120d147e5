"""The commands the demo prints at its end work as printed, on a state made as the demo makes it:
its trust root installed, its bundle imported, no `--trust` anywhere."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.helpers.release import Release, import_release
from vigil.installer.cli.demo import next_commands

pytestmark = pytest.mark.integration


def test_the_printed_next_commands_work(release: Release, vigil_cache: Path, tmp_path: Path) -> None:
    imported = import_release(release, tmp_path / "home", vigil_cache)
    for cmd in next_commands(imported.home, release.bundle, lab=False):
        res = imported.vigil(*shlex.split(cmd), check=False)
        assert res.returncode == 0, (cmd, res.stdout[-2000:], res.stderr[-2000:])
        assert "FAIL" not in res.stderr, (cmd, res.stderr)
