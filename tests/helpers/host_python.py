"""The code that runs on the hosts' python3 (3.9 or newer), and the tests that run it under 3.9.

The roles accept hosts whose python3 is 3.9 (`common_min_python_version`): the roles' Ansible
modules, the scripts the roles copy to the hosts and the exporters' wheel run there. `make lint`
checks them for newer syntax and library calls (`lint-host-python`, vermin);
tests/integration/test_host_python39.py runs the tests below under a real Python 3.9.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: the preparer of the 3.9 interpreter (Debian 11's packages)
PREPARE = REPO / "scripts" / "host_python39.py"


def host_side_files() -> list[Path]:
    """Every Python file that runs on a host: as `make lint-host-python` lists them."""
    roles = REPO / "roles"
    return sorted(
        [*roles.glob("*/library/*.py"), *roles.glob("*/files/**/*.py"), *(REPO / "exporters").rglob("*.py")]
    )


#: the tests of that code, run under 3.9 as they are (paths from the repository root). Each loads
#: nothing of the admin side at import (vigil.exporters only, as the wheel lays it out on a host).
HOST_SIDE_TESTS = (
    "tests/unit/roles/test_vigil_files.py",
    "tests/unit/roles/test_install_state.py",
    "tests/unit/roles/test_deployed_facts.py",
    "tests/unit/roles/test_tls_expiry.py",
    "tests/unit/roles/test_vm_backup_script.py",
    "tests/unit/roles/test_unpack_wheel.py",
    "tests/unit/roles/test_audit_files.py",
    "tests/unit/roles/test_fingerprint.py",
    "tests/unit/exporters/test_gpusim.py",
    "tests/unit/exporters/test_gpusim_dcgm482.py",
    "tests/unit/exporters/test_http_abuse.py",
    "tests/unit/exporters/test_http_tls_auth.py",
    "tests/unit/exporters/test_slurm_exporter.py",
    "tests/unit/redfish",
)
