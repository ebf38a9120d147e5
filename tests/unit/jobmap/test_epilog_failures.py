"""Epilog exactness, and every failure path: still exit 0, one logged line, nothing half-written."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import PROLOG, SHELLS, info_line

BASE = {
    "SLURM_JOB_USER": "alice",
    "SLURM_JOB_ACCOUNT": "physics",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURMD_NODENAME": "gpu01",
}


@pytest.mark.parametrize("shell", SHELLS)
def test_epilog_removes_exact_lines_only(make_jobmap, shell) -> None:
    jm = make_jobmap(shell)
    (jm.map_dir / "0").write_text("123\n12\n112\n1234\n12\n")
    (jm.map_dir / "1").write_text("12\n")
    (jm.map_dir / "2").write_text("123\n")
    (jm.map_dir / "3").write_text("not-a-job\n12")  # a foreign line, no final newline
    (jm.map_dir / "1.1").write_text("12\n4\n")
    for job in (12, 123):
        (jm.tf_dir / f"slurm_job_{job}.prom").write_bytes(info_line(str(job)))
    jm.epilog(12, "0")  # its GPU list need not match: every file is cleaned
    assert jm.files() == {"0": "123\n112\n1234\n", "1": "", "2": "123\n", "3": "not-a-job\n", "1.1": "4\n"}
    assert jm.textfiles() == {"slurm_job_123.prom": info_line("123")}
    assert jm.log() == [] and jm.leftovers() == []


def test_epilog_of_unknown_job_changes_nothing(make_jobmap) -> None:
    jm = make_jobmap()
    (jm.map_dir / "0").write_text("123\n")
    before = (jm.map_dir / "0").stat().st_ino
    jm.epilog(12)
    assert jm.job_map() == {"0": "123\n"} and (jm.map_dir / "0").stat().st_ino == before
    assert jm.log() == []


def test_sharing_then_epilogs(make_jobmap) -> None:
    jm = make_jobmap()
    jm.prolog(1, "0,1", **BASE)
    jm.prolog(2, "1", **BASE)
    jm.epilog(1, "0,1")
    assert jm.job_map() == {"1": "2\n"}
    jm.epilog(2, "1")
    # emptied, never removed: a dcgm-exporter scrape that listed the dir a moment before must find
    # every file it listed (one it cannot open fails the whole scrape with HTTP 500)
    assert jm.files() == {"0": "", "1": ""}
    assert all((jm.map_dir / g).stat().st_mode & 0o7777 == 0o644 for g in ("0", "1"))
    assert jm.textfiles() == {} and jm.leftovers() == []
    jm.prolog(3, "1", **BASE)  # an empty file takes the next job as a missing one would
    assert jm.files() == {"0": "", "1": "3\n"}


def test_epilog_without_job_map_dir(make_jobmap) -> None:
    jm = make_jobmap()
    jm.map_dir.rmdir()
    (jm.tf_dir / "slurm_job_12.prom").write_bytes(info_line("12"))
    jm.epilog(12)
    assert not jm.map_dir.exists() and jm.textfiles() == {} and jm.log() == []


@pytest.mark.parametrize("shell", SHELLS)
def test_missing_dirs_are_created(make_jobmap, shell) -> None:
    jm = make_jobmap(shell)
    jm.map_dir.rmdir()
    jm.tf_dir.rmdir()
    jm.prolog(12, "0", **BASE)
    assert jm.job_map() == {"0": "12\n"}
    assert jm.textfiles() == {"slurm_job_12.prom": info_line("12", "alice", "physics", "gpu", "gpu01")}
    assert (jm.map_dir.stat().st_mode & 0o777, jm.tf_dir.stat().st_mode & 0o777) == (0o755, 0o755)
    assert (jm.map_dir / "0").stat().st_mode & 0o777 == 0o644
    log = jm.log()
    assert len(log) == 2 and all("created the missing directory" in line for line in log), log


def _read_only(path: Path):
    """Make PATH read-only for real (root ignores modes): a read-only bind mount, or chmod if not root."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        return lambda: subprocess.run(["umount", str(path)], check=True)
    path.chmod(0o555)
    return lambda: path.chmod(0o755)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("phase", ["prolog", "epilog"])
def test_read_only_dirs(make_jobmap, shell, phase) -> None:
    jm = make_jobmap(shell)
    (jm.map_dir / "0").write_text("12\n")
    (jm.tf_dir / "slurm_job_12.prom").write_bytes(b"old\n")
    undo = [_read_only(jm.map_dir), _read_only(jm.tf_dir)]
    try:
        cp = jm.run(
            phase, {"SLURM_JOB_ID": "12" if phase == "epilog" else "13", "SLURM_JOB_GPUS": "0,1", **BASE}
        )
    finally:
        for u in undo:
            u()
    assert cp.returncode == 0
    assert jm.job_map() == {"0": "12\n"} and jm.textfiles() == {"slurm_job_12.prom": b"old\n"}
    log = jm.log()
    assert len(log) == 2, log
    assert "read-only" in log[0] and "read-only" in log[1]


def test_uncreatable_dir(make_jobmap) -> None:
    jm = make_jobmap()
    jm.map_dir.rmdir()
    undo = _read_only(jm.map_dir.parent)
    try:
        cp = jm.run("prolog", {"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "0", **BASE})
    finally:
        undo()
    assert cp.returncode == 0 and not jm.map_dir.exists()
    assert jm.textfiles() == {"slurm_job_12.prom": info_line("12", "alice", "physics", "gpu", "gpu01")}
    assert len(jm.log()) == 1 and "is missing and cannot be created" in jm.log()[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="a full file system needs a tmpfs mount (root)")
@pytest.mark.parametrize("shell", SHELLS)
def test_full_disk(make_jobmap, shell, tmp_path) -> None:
    jm = make_jobmap(shell)
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=64", "tmpfs", str(mnt)], check=True)
    try:
        (mnt / "map").mkdir()
        (mnt / "tf").mkdir()
        (mnt / "map" / "0").write_text("7\n")
        with open(mnt / "filler", "wb") as f, contextlib.suppress(OSError):
            f.write(b"x" * 1024 * 1024)
        env = {
            "VIGIL_JOBMAP_DIR": str(mnt / "map"),
            "VIGIL_TEXTFILE_DIR": str(mnt / "tf"),
            "SLURM_JOB_ID": "12",
            "SLURM_JOB_GPUS": "0,1",
            **BASE,
        }
        cp = jm.run("prolog", env)
        assert cp.returncode == 0
        assert sorted(p.name for p in (mnt / "map").iterdir() if not p.name.startswith(".")) == ["0"]
        assert (mnt / "map" / "0").read_text() == "7\n"
        stage = mnt / "map" / ".stage"
        assert not stage.exists() or list(stage.iterdir()) == []
        assert list((mnt / "tf").iterdir()) == []
        log = jm.log()
        assert len(log) == 2 and all("full" in line for line in log), log
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_logger_failing_falls_back_to_stderr(make_jobmap) -> None:
    jm = make_jobmap()
    cp = jm.run("prolog", {"SLURM_JOB_ID": "x", "JM_FAKE_LOGGER_RC": "1"})
    assert cp.returncode == 0
    assert cp.stderr == b"vigil-jobmap: prolog: SLURM_JOB_ID is missing or not a job id; nothing written\n"


@pytest.mark.parametrize("phase", ["prolog", "epilog"])
def test_real_logger_exits_0(make_jobmap, phase) -> None:
    jm = make_jobmap(fake_logger=False)
    cp = jm.run(phase, {"SLURM_JOB_ID": "../x", "SLURM_JOB_GPUS": "0"})
    assert cp.returncode == 0 and jm.job_map() == {} and jm.textfiles() == {}
    assert not jm.log_file.exists()


def test_flock_timeout(make_jobmap) -> None:
    jm = make_jobmap()
    with open(jm.map_dir / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        t0 = time.monotonic()
        cp = jm.run(
            "prolog", {"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "0", "VIGIL_JOBMAP_LOCK_TIMEOUT": "1", **BASE}
        )
        waited = time.monotonic() - t0
    assert cp.returncode == 0 and 0.9 < waited < 5
    assert jm.job_map() == {}
    assert "slurm_job_12.prom" in jm.textfiles()  # the job's info does not need the lock
    assert len(jm.log()) == 1 and "still held after 1s" in jm.log()[0]


def test_mkdir_lock_timeout_on_a_live_holder(make_jobmap) -> None:
    jm = make_jobmap()
    (jm.map_dir / ".lock.d").mkdir()
    (jm.map_dir / ".lock.d" / "pid").write_text(f"{os.getpid()}\n")
    cp = jm.run(
        "prolog",
        {
            "SLURM_JOB_ID": "12",
            "SLURM_JOB_GPUS": "0",
            "VIGIL_JOBMAP_LOCK": "mkdir",
            "VIGIL_JOBMAP_LOCK_TIMEOUT": "1",
            **BASE,
        },
    )
    assert cp.returncode == 0 and jm.job_map() == {}
    assert (jm.map_dir / ".lock.d" / "pid").read_text() == f"{os.getpid()}\n"
    assert len(jm.log()) == 1 and "still held after 1s" in jm.log()[0]


@pytest.mark.parametrize("shell", SHELLS)
def test_mkdir_lock_stale_is_broken(make_jobmap, shell) -> None:
    jm = make_jobmap(shell)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (jm.map_dir / ".lock.d").mkdir()
    (jm.map_dir / ".lock.d" / "pid").write_text(f"{dead.pid}\n")
    jm.prolog(12, "0", VIGIL_JOBMAP_LOCK="mkdir", **BASE)
    jm.epilog(13, VIGIL_JOBMAP_LOCK="mkdir")
    assert jm.job_map() == {"0": "12\n"}
    assert not (jm.map_dir / ".lock.d").exists() and not (jm.map_dir / ".lock.d.break").exists()
    log = jm.log()
    assert len(log) == 1 and f"removed a stale lock {jm.map_dir}/.lock.d left by process {dead.pid}" in log[0]


def test_terminated_prolog_exits_0(make_jobmap) -> None:
    """SIGTERM (Slurm's PrologEpilogTimeout) while waiting for a lock: exit 0, the holder's lock untouched."""
    jm = make_jobmap()
    (jm.map_dir / ".lock.d").mkdir()
    (jm.map_dir / ".lock.d" / "pid").write_text(f"{os.getpid()}\n")
    env = jm.env({"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "0", "VIGIL_JOBMAP_LOCK": "mkdir", **BASE})
    p = subprocess.Popen(["dash", str(PROLOG)], env=env)
    time.sleep(0.3)
    p.terminate()
    assert p.wait(10) == 0
    assert (jm.map_dir / ".lock.d" / "pid").read_text() == f"{os.getpid()}\n"  # not ours: untouched
    assert jm.job_map() == {}
