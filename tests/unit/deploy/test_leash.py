"""The leash: a program started through it dies with the process that wrote it, however that ends.

The stand-in for ansible-playbook ignores SIGHUP, as ansible-runner starts it, and sleeps; a control
run without the leash must outlive its killed parent, or these tests could not fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vigil.installer.deploy import DeployError
from vigil.installer.deploy.leash import TOOLS, write_leash

#: a fake ansible-playbook: SIGHUP ignored (as under ansible-runner), its pid and argv recorded
FAKE = """#!/bin/sh
trap '' HUP
echo $$ > "{out}/pid"
for a in "$@"; do printf '%s\\n' "$a"; done > "{out}/argv"
exec /bin/sleep 120
"""


def _fake_tools(tmp_path: Path) -> tuple[Path, Path]:
    real = tmp_path / "real bin's"  # a quote and a space in the path the leash must name
    real.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    for name in TOOLS:
        (real / name).write_text(FAKE.format(out=out))
        (real / name).chmod(0o755)
    return real, out


#: the parent: writes the leash (or not), starts the tool by name from PATH, reports, then waits
PARENT = """
import os, subprocess, sys, time
from pathlib import Path
from vigil.installer.deploy.leash import write_leash
run_dir, real, leashed = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
path = f"{write_leash(run_dir, real)}:{real}" if leashed else real
proc = subprocess.Popen(["ansible-playbook", "site.yml", "a b", "--extra-vars", "x='y z'"],
                        env={**os.environ, "PATH": path}, start_new_session=True)
print(proc.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by init) counts as gone
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_then_kill_parent(tmp_path: Path, leashed: bool) -> int:
    """Start the parent, wait for the tool to run, SIGKILL the parent; the tool's pid."""
    real, out = _fake_tools(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(run_dir), str(real), "1" if leashed else "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    parent.stdout.readline()
    deadline = time.monotonic() + 15
    while not (out / "pid").exists():
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    pid = int((out / "pid").read_text())
    assert _alive(pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    return pid


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_tool_dies_with_its_killed_parent(tmp_path: Path) -> None:
    pid = _start_then_kill_parent(tmp_path, leashed=True)
    assert _gone_within(pid, 5), f"pid {pid} outlived its killed parent"
    argv = (tmp_path / "out" / "argv").read_text().splitlines()
    assert argv == ["site.yml", "a b", "--extra-vars", "x='y z'"]  # passed through untouched


def test_without_the_leash_the_tool_outlives_its_parent(tmp_path: Path) -> None:
    """The control: what the leash prevents does happen without it."""
    pid = _start_then_kill_parent(tmp_path, leashed=False)
    try:
        assert not _gone_within(pid, 2), "the stand-in died without the leash: this test proves nothing"
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_tool_started_by_another_process_refuses_to_run(tmp_path: Path) -> None:
    """The parent died before the child asked for its death signal: the child is init's, and runs nothing."""
    real, out = _fake_tools(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    leash = write_leash(run_dir, str(real), parent=os.getpid() + 1_000_000)
    res = subprocess.run(
        [str(leash / "ansible-playbook"), "site.yml"], capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 1
    assert "ended before the run began; nothing was run" in res.stderr
    assert not (out / "pid").exists()


def test_the_leash_is_private_to_the_run(tmp_path: Path) -> None:
    real, _ = _fake_tools(tmp_path)
    leash = write_leash(tmp_path, str(real))
    assert sorted(p.name for p in leash.iterdir()) == sorted(TOOLS)
    assert (leash.stat().st_mode & 0o777) == 0o700
    for p in leash.iterdir():
        assert (p.stat().st_mode & 0o777) == 0o700


def test_a_missing_tool_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DeployError) as err:
        write_leash(tmp_path, str(empty))
    assert str(err.value).startswith("ansible-playbook: not found on PATH")


def test_a_python_that_cannot_be_named_on_a_shebang_line_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, _ = _fake_tools(tmp_path)
    monkeypatch.setattr(sys, "executable", "/opt/my python/bin/python3")
    with pytest.raises(DeployError) as err:
        write_leash(tmp_path, str(real))
    assert "cannot name this Python on a #! line" in str(err.value)
    assert not (tmp_path / "bin").exists() or not any((tmp_path / "bin").iterdir())


def test_the_script_is_what_python_compiles(tmp_path: Path) -> None:
    real, _ = _fake_tools(tmp_path)
    leash = write_leash(tmp_path, str(real))
    for p in leash.iterdir():
        compile(p.read_text(), str(p), "exec")
        assert textwrap.dedent(p.read_text()).startswith(f"#!{sys.executable} -I\n")
