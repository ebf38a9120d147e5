"""The lab for tests: real systemd hosts, brought up once per test session.

Any test under tests/lab asks for the session fixture ``lab``::

    def test_something(lab):
        lab.inventory            # directory with hosts.yml, for `vigil deploy --inventory`
        lab.hosts                # {"mon01": "198.18.0.10", ...}
        lab.ssh("gpu01", "systemctl is-active slurmd")   # CompletedProcess; raises on non-zero
        lab.ssh("gpu01", "false", check=False).returncode

The lab is brought up (a running one is reused) before the first such test and taken down at the
end of the session; set VIGIL_LAB_KEEP=1 to leave it running. A missing prerequisite (not root, no
debootstrap or systemd-nspawn) fails the tests with a message saying what to install; nothing is
skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vigil.installer import lab as lab_api
from vigil.installer.lab import HOSTS, LabPaths
from vigil.installer.lab._proc import TOOLS


def _missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "the lab tests need root (they create a bridge and boot containers); run `make test` as root"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        return f"the lab needs {' '.join(missing)}; run `bash scripts/system-deps.sh` as root"
    return None


@dataclass
class Lab:
    """A running lab, as tests see it."""

    paths: LabPaths
    #: directory holding hosts.yml (pass it as `--inventory`)
    inventory: Path
    #: host name -> address
    hosts: dict[str, str] = field(default_factory=lambda: {h.name: h.ip for h in HOSTS})
    #: the last `up()` result
    result: lab_api.UpResult | None = None

    @property
    def hosts_file(self) -> Path:
        return self.inventory / "hosts.yml"

    def ip(self, host: str) -> str:
        return self.hosts[host]

    def ssh(
        self, host: str, cmd: str, *, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run CMD as root on HOST; with CHECK, a non-zero exit fails the test with its output."""
        cp = lab_api.ssh(self.paths, self.hosts[host], cmd, timeout=timeout)
        if check and cp.returncode != 0:
            pytest.fail(f"{host}: `{cmd}` exited {cp.returncode}\nstdout: {cp.stdout}\nstderr: {cp.stderr}")
        return cp

    def up(self) -> lab_api.UpResult:
        """Bring the lab up (again); hosts already running are left alone."""
        self.result = lab_api.up(self.paths, inventory_dir=self.inventory)
        return self.result

    def down(self) -> dict[str, str]:
        return lab_api.down(self.paths)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    why = _missing_prerequisite()
    if why:
        pytest.fail(why, pytrace=False)
    the_lab = Lab(paths=LabPaths.from_env(), inventory=tmp_path_factory.mktemp("lab-inventory"))
    try:
        the_lab.up()
    except BaseException:
        the_lab.down()  # never leave half a lab behind
        raise
    yield the_lab
    if os.environ.get("VIGIL_LAB_KEEP") != "1":
        the_lab.down()


@dataclass
class DeployedStack:
    """The stack deployed on the lab from a real signed bundle (build → import → `vigil deploy`)."""

    #: environment of the vigil CLI runs (VIGIL_HOME, VIGIL_CACHE, PYTHONPATH)
    env: dict[str, str]
    #: `vigil deploy --json` of the first deploy
    first: dict[str, object]
    tmp: Path


def deploy_stack_from_bundle(lab: Lab, tmp: Path, cache: str) -> DeployedStack:
    """Build and import a debian-channel bundle as a release would, and deploy it on the lab.

    The same steps as tests/lab/test_deploy_stack.py's ``stack`` fixture, for modules that need the
    deployed stack without repeating them.
    """
    import json
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "VIGIL_HOME": str(tmp / "home"), "VIGIL_CACHE": cache, "PYTHONPATH": str(repo)}

    def vigil(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "vigil.installer.cli", *args], capture_output=True, text=True,
                             env=env, cwd=repo, timeout=1500, check=False)
        if res.returncode != 0:
            pytest.fail(f"vigil {' '.join(args)} exited {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
        return res.stdout

    vigil("keys", "generate", "--out", str(tmp / "release"))
    vigil("trust", "init", "--key", str(tmp / "release.pub"), "--threshold", "1", "--out", str(tmp / "trust.json"))
    vigil("trust", "install", str(tmp / "trust.json"))
    vigil("bundle", "build", "--channel", "debian", "--version", "1", "--key", str(tmp / "release.key"),
          "--out", str(tmp / "out"))
    vigil("bundle", "import", str(tmp / "out" / "vigil-1-amd64.bundle"))
    first = json.loads(vigil("deploy", "-i", str(lab.inventory), "--json"))
    return DeployedStack(env=env, first=first, tmp=tmp)


@pytest.fixture(scope="module")
def deployed_stack(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> DeployedStack:
    """Module-scoped: the stack deployed from a fresh bundle (see ``deploy_stack_from_bundle``)."""
    tmp = tmp_path_factory.mktemp("deployed-stack")
    cache = os.environ.get("VIGIL_CACHE", str(tmp_path_factory.getbasetemp() / "vigil-cache"))
    return deploy_stack_from_bundle(lab, tmp, cache)
