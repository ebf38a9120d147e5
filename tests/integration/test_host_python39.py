"""The host-side code's tests under a real Python 3.9, the oldest python3 the roles accept.

The interpreter is Debian 11's, made once by scripts/host_python39.py in $VIGIL_CACHE (else
/var/cache/vigil): the first run downloads its packages and pytest for 3.9, later runs reuse them.
The tests that HOST_SIDE_TESTS names (tests/helpers/host_python.py) run under it, unchanged:

- the roles' Ansible modules, loaded into this 3.9 process (with Ansible's module_utils from the
  venv, as AnsiballZ ships them to a host), and run by the venv's ansible-playbook on local hosts
  whose interpreter is this 3.9 (ansible_python3_interpreter: tests/unit/roles/playbook_runs.py),
  as is the `python3` on their PATH (`python3 - unpack_wheel.py` runs on it);
- the scripts the roles copy to the hosts, run as `sys.executable`: this 3.9;
- the exporters, imported from the wheel's layout (vigil/exporters) on PYTHONPATH, as a unit runs
  them; the wheel itself is built here, by the admin side, for the unpack tests.

A construct newer than 3.9 in any of that code fails one of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import ansible.module_utils
import pytest

from tests.helpers.host_python import HOST_SIDE_TESTS, PREPARE, REPO
from tests.helpers.measured import FIGURES
from vigil.bundle.fetchers._project import build_project_wheel

pytestmark = pytest.mark.integration

#: pytest under 3.9: the test tools (site/) and the Ansible stub go on this process's sys.path
#: only; the environment's PYTHONPATH reaches ansible-playbook (the venv's 3.11), which must not
#: read either.
BOOT = (
    "import sys\n"
    "assert sys.version_info[:2] == (3, 9), sys.version\n"
    "sys.path[:0] = sys.argv[1:3]\n"
    "import pytest\n"
    "sys.exit(pytest.main(sys.argv[3:]))\n"
)
#: what AnsiballZ puts first in a module's payload: `ansible` is a stub, module_utils the real ones
ANSIBLE_STUB = "from pkgutil import extend_path\n__path__ = extend_path(__path__, __name__)\n"


@pytest.fixture(scope="module")
def python39(request: pytest.FixtureRequest) -> Path:
    """The launcher of the 3.9 interpreter (made on first use)."""
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, str(PREPARE)], capture_output=True, text=True, check=False, timeout=900
    )
    FIGURES.add("python 3.9 prepared (or found whole)", time.monotonic() - started, request.node.nodeid)
    assert res.returncode == 0, res.stderr
    return Path(res.stdout.strip())


def test_the_interpreter_is_debians_python_3_9_with_its_libraries(python39: Path) -> None:
    code = "import sys, ssl, hashlib, json, ctypes, decimal; print(sys.version_info[:2], ssl.OPENSSL_VERSION)"
    res = subprocess.run([str(python39), "-I", "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("(3, 9) OpenSSL 1.1.1"), res.stdout


def lane(tmp: Path, python39: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run HOST_SIDE_TESTS under 3.9."""
    stub = tmp / "stub" / "ansible"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(ANSIBLE_STUB)
    (stub / "module_utils").symlink_to(Path(ansible.module_utils.__file__).parent, target_is_directory=True)
    # the wheel's layout: vigil/ (a namespace package) holding exporters/
    tree = tmp / "wheel-tree"
    (tree / "vigil").mkdir(parents=True)
    (tree / "vigil" / "exporters").symlink_to(REPO / "exporters", target_is_directory=True)
    # the venv's Ansible, and a `python3` that is 3.9 for the hosts of the playbooks
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    venv_bin = Path(sys.executable).parent
    for tool in venv_bin.glob("ansible*"):
        (bin_dir / tool.name).symlink_to(tool)
    for name in ("python3", "python"):
        (bin_dir / name).symlink_to(python39)
    wheel = build_project_wheel(REPO / "exporters", tmp / "dist")
    env = dict(
        os.environ,
        VIGIL_TEST_BIN=str(bin_dir),
        VIGIL_EXPORTERS_WHEEL=str(wheel),
        PYTHONPATH=str(tree),
    )
    site = python39.parent / "site"
    argv = [str(python39), "-s", "-c", BOOT, str(site), str(tmp / "stub")]
    # tests/conftest.py is the admin side's (it loads the release helpers): not read, nor needed
    argv += ["-q", "-p", "no:cacheprovider", "--confcutdir", "tests/unit", *HOST_SIDE_TESTS]
    return argv, env


def test_the_host_side_tests_pass_under_python_3_9(
    tmp_path: Path, python39: Path, measured: Callable[[str, float], None]
) -> None:
    argv, env = lane(tmp_path, python39)
    started = time.monotonic()
    res = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=900)
    measured("host-side tests under python 3.9", time.monotonic() - started)
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    assert res.returncode == 0, res.stdout[-12000:] + res.stderr[-3000:]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
