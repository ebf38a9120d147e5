"""The site lock: one deploy, upgrade or rollback at a time per admin home; never stale after a crash;
never follows a link an attacker planted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.cli import REPO
from vigil.installer.deploy.artifacts import DeployError
from vigil.installer.deploy.site import SiteLock, lock_path


def test_a_second_holder_is_refused_with_the_first_ones_name(tmp_path: Path) -> None:
    with SiteLock(tmp_path, "upgrade 20261201T000000Z-abcd-upgrade"), pytest.raises(DeployError) as exc:
        SiteLock(tmp_path, "deploy x").acquire()
    msg = str(exc.value)
    assert msg.startswith("site: busy: upgrade 20261201T000000Z-abcd-upgrade (pid ")
    assert f"(pid {os.getpid()}, since " in msg
    assert "wait for it to finish" in msg
    assert oct(lock_path(tmp_path).stat().st_mode & 0o777) == "0o600"


def test_released_it_can_be_taken_again_and_holds_no_name(tmp_path: Path) -> None:
    lock = SiteLock(tmp_path, "deploy a").acquire()
    lock.release()
    lock.release()  # twice is harmless: a run's thread and its waiter may both release
    assert lock_path(tmp_path).read_text() == ""
    with SiteLock(tmp_path, "deploy b"):
        assert lock_path(tmp_path).read_text().startswith("deploy b (pid ")


def test_a_holder_killed_with_sigkill_leaves_no_stale_lock(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from vigil.installer.deploy.site import SiteLock
        SiteLock(Path({str(tmp_path)!r}), "upgrade killed").acquire()
        print("held", flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(DeployError, match="busy: upgrade killed"):
            SiteLock(tmp_path, "deploy").acquire()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    with SiteLock(tmp_path, "deploy after the crash"):  # the kernel dropped the dead holder's lock
        assert "after the crash" in lock_path(tmp_path).read_text()


def test_a_symlink_planted_at_the_lock_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    lock_path(tmp_path).parent.mkdir(parents=True)
    lock_path(tmp_path).symlink_to(target)
    with pytest.raises(DeployError, match="cannot open the site lock"):
        SiteLock(tmp_path, "deploy").acquire()
    assert target.read_text() == "keep me\n"


def test_a_lock_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    lock_path(tmp_path).parent.mkdir(parents=True)
    os.mkfifo(lock_path(tmp_path))
    with pytest.raises(DeployError, match="not a regular file"):
        SiteLock(tmp_path, "deploy").acquire()


def test_a_hostile_holder_name_is_shown_printable_and_short(tmp_path: Path) -> None:
    lock_path(tmp_path).parent.mkdir(parents=True)
    with SiteLock(tmp_path, "x"):
        fd = os.open(lock_path(tmp_path), os.O_WRONLY)
        os.write(fd, b"\x1b[2J evil \x00" + b"A" * 4000)
        os.close(fd)
        with pytest.raises(DeployError) as exc:
            SiteLock(tmp_path, "deploy").acquire()
    msg = str(exc.value)
    assert "\x1b" not in msg and "\x00" not in msg
    assert len(msg) < 700
