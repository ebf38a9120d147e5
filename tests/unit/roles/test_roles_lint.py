"""ansible-lint, production profile, over roles/ and playbooks/ — offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IGNORE = Path(__file__).with_name("ansible-lint-ignore.txt")


def test_ansible_lint_production_profile_passes(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "ANSIBLE_LINT_SKIP_SCHEMA_UPDATE": "1",
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "NO_COLOR": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    res = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-lint"),
            "--offline",
            "--profile",
            "production",
            "--nocolor",
            "-f",
            "pep8",
            "-i",
            str(IGNORE),
            "roles",
            "playbooks",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in res.stderr
