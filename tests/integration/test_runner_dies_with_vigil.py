"""A killed vigil takes its playbook with it: real ansible-runner, real ansible-playbook, a task that
writes nothing for minutes (the case where the terminal's hang-up alone never reached Ansible)."""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers.procs import processes_matching

pytestmark = pytest.mark.integration

CHILD = """
import sys, time
from pathlib import Path
from vigil.installer.deploy.runner import start_playbook
start_playbook(runs_dir=Path(sys.argv[1]), ansible_dir=Path(sys.argv[2]), inventory=Path(sys.argv[3]),
               extravars={"marker": 1}, run_id="leashed")
time.sleep(600)
"""


def test_ansible_playbook_and_its_task_end_when_vigil_is_killed(tmp_path: Path) -> None:
    seconds = 900 + secrets.randbelow(99)  # a sleep no other process on the machine runs
    ansible = tmp_path / "ansible"
    (ansible / "playbooks").mkdir(parents=True)
    (ansible / "roles").mkdir()
    (ansible / "playbooks" / "site.yml").write_text(
        textwrap.dedent(f"""
        - name: A task that writes nothing for minutes
          hosts: all
          gather_facts: false
          tasks:
            - name: Sleep
              ansible.builtin.command: /bin/sleep {seconds}
              changed_when: false
        """)
    )
    inventory = tmp_path / "hosts"
    inventory.write_text(f"h1 ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    runs = tmp_path / "runs"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(runs), str(ansible), str(inventory)])
    try:
        deadline = time.monotonic() + 90
        while not processes_matching(f"/bin/sleep {seconds}"):
            assert child.poll() is None, f"vigil's stand-in exited {child.returncode}"
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.2)
        assert processes_matching(str(runs / "leashed")), "no ansible-playbook working for the run"
        time.sleep(1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    deadline = time.monotonic() + 20
    while (processes_matching(str(runs / "leashed")) or processes_matching(f"/bin/sleep {seconds}")) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    left = processes_matching(str(runs / "leashed")) + processes_matching(f"/bin/sleep {seconds}")
    for pid in left:  # leave nothing behind, whatever the outcome
        subprocess.run(["kill", "-9", str(pid)], check=False)
    assert left == [], f"still running 20 s after vigil was killed: {left}"
