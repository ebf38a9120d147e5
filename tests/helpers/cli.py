"""The `vigil` command for tests: run as its own process, as an operator runs it.

res = run_vigil("bundle", "inspect", str(path), "--json", env=env)   # fails the test on non-zero
res = run_vigil("lab", "fault", "xid", "ctl01", "0", check=False)    # the caller judges the exit
vigil = Vigil(env); info = vigil.json("bundle", "inspect", str(path), "--json")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: the repository root: the working directory of every run, and on PYTHONPATH for `vigil.*`
REPO = Path(__file__).resolve().parents[2]
#: how a test runs the CLI: this interpreter, so the tree under test is what runs
VIGIL = (sys.executable, "-m", "vigil.installer.cli")
#: a bundle build or a deploy on the lab takes minutes; a hung one fails the test after this
DEFAULT_TIMEOUT = 1500


def vigil_env(home: Path | str | None = None, **extra: str) -> dict[str, str]:
    """This process's environment with PYTHONPATH at the repository, VIGIL_HOME=HOME when given,
    and EXTRA on top."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if home is not None:
        env["VIGIL_HOME"] = str(home)
    env.update(extra)
    return env


def run_vigil(
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Run `vigil ARGS`; with CHECK, a non-zero exit fails the test with the command's output."""
    res = subprocess.run(
        [*VIGIL, *args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else vigil_env(),
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    if check and res.returncode != 0:
        pytest.fail(
            f"vigil {' '.join(args)} exited {res.returncode}\n"
            f"--- stdout (tail)\n{res.stdout[-4000:]}\n--- stderr (tail)\n{res.stderr[-4000:]}",
            pytrace=False,
        )
    return res


@dataclass(frozen=True)
class Vigil:
    """`vigil` bound to one environment (one VIGIL_HOME, one download cache)."""

    env: dict[str, str] = field(default_factory=vigil_env)

    def __call__(
        self, *args: str, check: bool = True, timeout: float = DEFAULT_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        return run_vigil(*args, env=self.env, check=check, timeout=timeout)

    def out(self, *args: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The standard output of a run that must succeed."""
        return self(*args, timeout=timeout).stdout

    def json(self, *args: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The standard output of a run that must succeed, parsed as JSON (pass `--json` in ARGS)."""
        return json.loads(self.out(*args, timeout=timeout))

    def with_env(self, **overrides: str) -> Vigil:
        return Vigil({**self.env, **overrides})
