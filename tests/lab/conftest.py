"""The lab for tests: real systemd hosts, brought up once per test session.

Any test under tests/lab asks for the session fixture ``lab``::

    def test_something(lab):
        lab.inventory            # directory with hosts.yml, for `vigil deploy --inventory`
        lab.hosts                # {"mon01": "198.18.0.10", ...}
        lab.ssh("gpu01", "systemctl is-active slurmd")   # CompletedProcess; raises on non-zero
        lab.ssh("gpu01", "false", check=False).returncode

The lab is brought up (a running one is reused) before the first such test and taken down at the
end of the session; set VIGIL_LAB_KEEP=1 to leave it running. Modules that need the whole stack
deployed ask for ``deployed_stack`` (session-wide: see there). A missing prerequisite (not root, no
debootstrap or systemd-nspawn) fails the tests with a message saying what to install; nothing is
skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.cli import Vigil
from tests.helpers.fixtures import cache_dir
from tests.helpers.measured import FIGURES
from tests.helpers.release import Imported
from tests.helpers.shared import Prefetch, shared_dir
from tests.lab import labhttp
from tests.lab.report_jobs import ReportJobs
from vigil.installer import lab as lab_api
from vigil.installer.lab import HOSTS, LabPaths, state
from vigil.installer.lab._proc import TOOLS
from vigil.installer.lab.hosts import DEFAULT_GPU_NODES


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
        """Bring the lab up (again) at its default size; hosts already running are left alone (a lab
        of another size running is refused: the tests are written for the default one)."""
        self.result = lab_api.up(self.paths, inventory_dir=self.inventory, gpu_nodes=DEFAULT_GPU_NODES)
        return self.result

    def down(self) -> dict[str, str]:
        return lab_api.down(self.paths)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    why = _missing_prerequisite()
    if why:
        pytest.fail(why, pytrace=False)
    the_lab = Lab(paths=LabPaths.from_env(), inventory=tmp_path_factory.mktemp("lab-inventory"))
    shared = shared_dir()
    if shared is not None:
        # the lanes of `make test`: the release (which the first deploy needs next) builds while
        # the hosts boot; the `release` fixture then finds it built, or waits for this build
        Prefetch(shared, cache_dir(tmp_path_factory))
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
    """The stack deployed on the lab from the session's signed bundle (build → import → `vigil deploy`)."""

    #: the imported release it was deployed from (its VIGIL_HOME holds the audit log and the secrets)
    imported: Imported
    #: `vigil deploy --json` of the first deploy on these hosts
    first: dict[str, object]
    #: how long that deploy took (a figure, listed at the end of the run)
    first_secs: float
    #: the hosts it went to: {name: (pid, start time)} of the lab when it was deployed
    boot: dict[str, tuple[int, int]]

    @property
    def env(self) -> dict[str, str]:
        """Environment of `vigil` runs against the deploy's home (VIGIL_HOME, VIGIL_CACHE, PYTHONPATH)."""
        return self.imported.env

    @property
    def vigil(self) -> Vigil:
        return self.imported.vigil

    @property
    def home(self) -> Path:
        return self.imported.home


def _boot(the_lab: Lab) -> dict[str, tuple[int, int]]:
    """Which hosts run now: a lab taken down and brought up again has new ones (with nothing deployed)."""
    return {n: (h.pid, h.starttime) for n, h in state.load(the_lab.paths.state_file).hosts.items()}


class _Stacks:
    """The session's deployed stack: deployed on first use, and again only if the lab was re-created."""

    def __init__(self, the_lab: Lab, imported: Imported) -> None:
        self.lab, self.imported = the_lab, imported
        self.current: DeployedStack | None = None

    def get(self) -> DeployedStack:
        boot = _boot(self.lab)
        if self.current is None or self.current.boot != boot:
            t0 = time.monotonic()
            first = self.imported.vigil.json("deploy", "-i", str(self.lab.inventory), "--json")
            secs = time.monotonic() - t0
            FIGURES.add("lab: first deploy of the stack", secs, "tests/lab (deployed_stack)")
            self.current = DeployedStack(imported=self.imported, first=first, first_secs=secs, boot=boot)
        labhttp.use_site(self.imported.home)
        return self.current


@pytest.fixture(scope="session")
def _stacks(lab: Lab, imported_release: Imported) -> _Stacks:
    return _Stacks(lab, imported_release)


@pytest.fixture(scope="session")
def report_jobs(_stacks: _Stacks) -> ReportJobs:
    """The report module's jobs, started by the first module to ask (tests/lab/report_jobs.py)."""
    return ReportJobs(lambda *args, **kw: _stacks.get().vigil(*args, **kw))


@pytest.fixture(scope="module")
def deployed_stack(_stacks: _Stacks) -> DeployedStack:
    """The stack deployed on the lab from the session's release, shared by every lab module.

    Deployed once per session (a bundle build and a deploy take minutes); deployed again only when
    a module re-created the lab hosts (test_lab.py's down/up). A module that changes what the deploy
    set up (faults, a stopped node, a role applied by itself, slurm.conf) puts it back when it ends.
    """
    return _stacks.get()


#: The lab modules' order. The deployed stack's own checks run first, on the stack as the deploy
#: left it; then the modules that inject faults or run jobs (each cleans up after itself, and the
#: alerts wait for a quiet Alertmanager, so they go before the exporters' and the BMCs' fault
#: injection); then the modules that apply a role by themselves; the lab's own down/up last. A
#: module not named here runs after FIRST, before LAST.
FIRST = (
    "test_deploy_stack.py",
    "test_gpu_accounting.py",
    "test_alerts.py",
    "test_exporters.py",
    "test_redfish.py",
)
LAST = (
    "test_audit_role.py",
    "test_jobmap.py",
    "test_upgrade.py",
    "test_lab.py",
    "test_pair.py",
    "test_sixteen_nodes.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if Path(item.path).parent == here]

    def rank(item: pytest.Item) -> int:
        name = Path(item.path).name
        if name in FIRST:
            return FIRST.index(name)
        if name in LAST:
            return len(FIRST) + 1 + LAST.index(name)
        return len(FIRST)

    ordered = sorted((items[i] for i in slots), key=rank)  # stable: a module's own order is kept
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item
