"""The audit role's scripts that run on the hosts (roles/audit/files/): the rules checker and the probe.

The rules checker is what stands between a template and `augenrules --load` (auditctl has no dry
run): each refusal below is a line that would make auditctl fail or do more than add vigil's rules.
Both run on the hosts' python3 (3.9 or newer): tests/integration/test_host_python39.py runs these
tests under Python 3.9 as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.roles.facts_helpers import load_module
from tests.unit.roles.rendering import ROLES

FILES = ROLES / "audit" / "files"

checker = load_module(FILES / "check_audit_rules.py")


# --- the rules checker --------------------------------------------------------------------------

GOOD = """\
# comment
-w /etc/vigil -p wa -k vigil-config
-a always,exit -F path=/usr/bin/systemctl -F perm=x -k vigil-service-control
-a always,exit -F arch=b64 -S adjtimex,settimeofday -F key=time-change
-b 8192
-e 2
"""


def test_checker_accepts_vigils_forms() -> None:
    assert checker.check_text(GOOD) == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("-D", "-D deletes every rule"),
        ("-w etc/vigil -p wa -k k", "path 'etc/vigil' is not absolute"),
        ("-w /etc/vi gil -p wa -k k", "-w takes -p and -k, not 'gil'"),
        ("-w /etc/../vigil -p wa -k k", "'.' or '..' components"),
        ("-w /etc/vigil -p wz -k k", "-p 'wz' must be made of r, w, x, a"),
        ("-w /etc/vigil -p wa", "has no key"),
        ("-w /etc/vigil -p wa -k " + "k" * 32, "1-31 of"),
        ("-w /etc/vigil -p wa -k bad/key", "1-31 of"),
        ("-a always,exit -F path=/usr/bin/systemctl -F perm=x", "rule has no key"),
        ("-a exit,sometimes -F path=/x -F perm=x -k k", "must be list,action"),
        ("-a always,exit -F pth=/x -k k", "-F field 'pth' is not one vigil uses"),
        ("-a always,exit -F path>/x -k k", "-F path takes = or !="),
        ("-a always,exit -F perm=x -k k", "-F perm needs -F path= or -F dir="),
        ("-a always,exit -S openat -k k", "needs -F arch=b64 or b32"),
        ("-a always,exit -F arch=b63 -S openat -k k", "-F arch='b63' must be b32 or b64"),
        ("-a always,exit -F arch=b64 -S open;rm -k k", "is not a system call name"),
        ("-e 3", "-e takes 0, 1 or 2"),
        ("-x /etc", "unknown option '-x'"),
        ('-w "/etc/vigil -p wa', "cannot be split into words"),
    ],
)
def test_checker_refuses(line: str, reason: str) -> None:
    problems = checker.check_text(f"-w /etc/vigil -p wa -k ok\n{line}\n", "f.rules")
    assert problems and problems[0].startswith("f.rules:2: ") and reason in problems[0], problems


def test_checker_refuses_rules_after_the_lock_and_exits_non_zero(tmp_path: Path) -> None:
    path = tmp_path / "vigil.rules"
    path.write_text("-e 2\n-w /etc/vigil -p wa -k vigil-config\n")
    res = subprocess.run(
        [sys.executable, str(FILES / "check_audit_rules.py"), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 1
    assert res.stderr == f"{path}:2: rule after -e on line 1: -e must come last\n"
    path.write_text(GOOD)
    ok = subprocess.run(
        [sys.executable, str(FILES / "check_audit_rules.py"), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")


# --- the probe ------------------------------------------------------------------------------------


def test_probe_prints_one_json_object() -> None:
    res = subprocess.run(
        [sys.executable, str(FILES / "audit_probe.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    data = json.loads(res.stdout)
    assert set(data) == {"available", "enabled", "reason"}
    assert data["available"] is (data["enabled"] is not None)
