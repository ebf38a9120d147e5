"""A killed vigil takes its playbook with it: real ansible-runner, real ansible-playbook, a task that
writes nothing for minutes (the case where the terminal's hang-up alone never reached Ansible)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
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


HOSTS = ("h1", "h2", "h3")


def sleepy_site(tmp_path: Path, seconds: int, hosts: tuple[str, ...] = HOSTS) -> tuple[Path, Path]:
    """Ansible content whose one task sleeps SECONDS on local HOSTS at once (a task that writes
    nothing for minutes), and its inventory."""
    ansible = tmp_path / "ansible"
    (ansible / "playbooks").mkdir(parents=True)
    (ansible / "roles").mkdir()
    (ansible / "playbooks" / "site.yml").write_text(
        textwrap.dedent(f"""
        - name: A task that sleeps on every host
          hosts: all
          gather_facts: false
          tasks:
            - name: Sleep
              ansible.builtin.command: /bin/sleep {seconds}
              changed_when: false
        """)
    )
    inventory = tmp_path / "hosts"
    inventory.write_text(
        "".join(f"{h} ansible_connection=local ansible_python_interpreter={sys.executable}\n" for h in hosts)
    )
    return ansible, inventory


def wait_for_sleeps(seconds: int) -> None:
    deadline = time.monotonic() + 90
    while len(processes_matching(f"/bin/sleep {seconds}")) < len(HOSTS):
        assert time.monotonic() < deadline, "the task never started on every host"
        time.sleep(0.2)


def test_ansible_playbook_and_its_task_end_when_vigil_is_killed(tmp_path: Path) -> None:
    seconds = 900 + secrets.randbelow(99)  # a sleep no other process on the machine runs
    ansible, inventory = sleepy_site(tmp_path, seconds, hosts=("h1",))
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


# --- a cancelled run (ctrl+b in the console, ctrl+c in the CLI) ------------------------------------------


def test_a_cancelled_run_ends_every_process_it_started(tmp_path: Path) -> None:
    """The run's processes (ansible-playbook, one worker per host in a session of its own, the task's
    programs) are counted by the run's environment marker before the cancel, and none may be left
    after it."""
    from vigil.installer.deploy.reap import run_processes
    from vigil.installer.deploy.runner import start_playbook

    seconds = 900 + secrets.randbelow(99)
    ansible, inventory = sleepy_site(tmp_path, seconds)
    run = start_playbook(runs_dir=tmp_path / "runs", ansible_dir=ansible, inventory=inventory, extravars={})
    try:
        wait_for_sleeps(seconds)
        before = run_processes(run.run_dir)
        sessions = {os.getsid(p) for p in before if Path(f"/proc/{p}").exists()}
        # ansible-playbook, its workers (one per host, each its own session) and the three sleeps
        assert len(before) >= 1 + 2 * len(HOSTS), before
        assert len(sessions) > len(HOSTS), sessions
        started = time.monotonic()
        run.cancel()
        result = run.wait(120)
        took = time.monotonic() - started
    finally:
        left = run_processes(run.run_dir) + processes_matching(f"/bin/sleep {seconds}")
        for pid in left:
            subprocess.run(["kill", "-9", str(pid)], check=False)
    assert result.status == "canceled", result.status
    assert left == [], f"still running after the cancel: {left}"
    assert took < 30, took


def test_control_ansible_runners_cancel_alone_leaves_the_workers(tmp_path: Path) -> None:
    """What the test above guards against, so that it can fail: ansible-runner's own cancel (SIGKILL
    to ansible-playbook's process group) leaves the workers, in sessions of their own, and their
    sleeps."""
    import ansible_runner

    from vigil.installer.deploy.reap import end_run_processes, marker, run_processes

    seconds = 900 + secrets.randbelow(99)
    ansible, inventory = sleepy_site(tmp_path, seconds)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cancel = threading.Event()
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(run_dir),
        project_dir=str(ansible),
        playbook="playbooks/site.yml",
        inventory=str(inventory),
        envvars={
            **marker(run_dir),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        },
        cancel_callback=cancel.is_set,
        quiet=True,
        process_isolation=False,
    )
    try:
        wait_for_sleeps(seconds)
        cancel.set()
        thread.join(60)
        assert not thread.is_alive() and runner.status == "canceled", runner.status
        time.sleep(2)
        left = run_processes(run_dir)
        assert len(processes_matching(f"/bin/sleep {seconds}")) == len(HOSTS)
        assert left, "ansible-runner's cancel ended every process: the reaping would not be needed"
    finally:
        end_run_processes(run_dir, grace=1.0)
        for pid in processes_matching(f"/bin/sleep {seconds}"):
            subprocess.run(["kill", "-9", str(pid)], check=False)
