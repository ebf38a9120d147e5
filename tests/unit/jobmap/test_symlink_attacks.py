"""A hostile user on the node against the root prolog/epilog (issue 11, finding 1 and the lock part of 11).

Each test plants what an attacker would (links under the names the scripts write, a directory
others can change, the other lock mode) and asserts the safe outcome: the victim file untouched,
one log line naming the place and the reason, exit 0, and the job map still kept where it is safe.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import SHELLS, info_line

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the scripts run as root; the attacks need chown")

NOBODY = 65534
SECRET = b"root:secret:0600\n"
BASE = {"SLURM_JOB_USER": "alice", "SLURMD_NODENAME": "gpu01"}


def _victim(path: Path) -> Path:
    path.write_bytes(SECRET)
    os.chown(path, 0, 0)
    path.chmod(0o600)
    return path


def _untouched(path: Path) -> None:
    st = path.lstat()
    assert path.is_file() and not path.is_symlink(), path
    assert path.read_bytes() == SECRET and (st.st_mode & 0o7777) == 0o600 and st.st_uid == 0


def _next_pids(count: int) -> range:
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    return range(last + 1, last + 1 + count)


# (a) links under the names the scripts write their new files to


@pytest.mark.parametrize("shell", SHELLS)
def test_planted_textfile_temp_links_are_not_followed(make_jobmap, shell) -> None:
    jm = make_jobmap(shell)
    victim = _victim(jm.base / "victim")
    # every name the old scheme (.slurm_job_<id>.prom.tmp.<pid>) could use for the next few thousand PIDs
    for pid in _next_pids(3000):
        (jm.tf_dir / f".slurm_job_12.prom.tmp.{pid}").symlink_to(victim)
    jm.prolog(12, "0", **BASE)
    _untouched(victim)
    textfile = jm.tf_dir / "slurm_job_12.prom"
    assert textfile.is_file() and not textfile.is_symlink()
    assert textfile.read_bytes() == info_line("12", user="alice", node="gpu01")
    assert (textfile.stat().st_mode & 0o777) == 0o644
    assert jm.job_map() == {"0": "12\n"}
    assert jm.log() == []


@pytest.mark.parametrize("shell", SHELLS)
def test_planted_stage_links_are_not_followed(make_jobmap, shell) -> None:
    jm = make_jobmap(shell)
    victim = _victim(jm.base / "victim")
    (jm.map_dir / ".stage").mkdir()
    for g in ("0", "1"):
        (jm.map_dir / ".stage" / g).symlink_to(victim)
    jm.prolog(12, "0,1", **BASE)
    _untouched(victim)
    assert jm.job_map() == {"0": "12\n", "1": "12\n"}
    assert not any((jm.map_dir / g).is_symlink() for g in ("0", "1"))
    assert jm.leftovers() == [] and jm.log() == []


# (b) a textfile dir (or job map dir) that someone besides root can change


def _group_writable(jm) -> Path:
    jm.tf_dir.chmod(0o775)
    return jm.tf_dir


def _world_writable_sticky(jm) -> Path:
    jm.tf_dir.chmod(0o1777)
    return jm.tf_dir


def _not_root_owned(jm) -> Path:
    os.chown(jm.tf_dir, NOBODY, NOBODY)
    return jm.tf_dir


def _parent_not_root_owned(jm) -> Path:
    # today's layout: the textfile dir inside node_exporter's data dir, which its user owned
    parent = jm.base / "node_exporter"
    (parent / "textfile").mkdir(parents=True)
    os.chown(parent, NOBODY, NOBODY)
    return parent / "textfile"


UNSAFE = {
    "group-writable": (_group_writable, "is writable by its group or by others"),
    "world-writable-sticky": (_world_writable_sticky, "is writable by its group or by others"),
    "not-root-owned": (_not_root_owned, f"belongs to uid {NOBODY}, not root"),
    "parent-not-root-owned": (_parent_not_root_owned, f"node_exporter above it belongs to uid {NOBODY}"),
}


@pytest.mark.parametrize("case", UNSAFE)
def test_textfile_dir_others_can_change_is_refused(make_jobmap, case) -> None:
    jm = make_jobmap()
    make_unsafe, reason = UNSAFE[case]
    tf_dir = make_unsafe(jm)
    before = sorted(p.name for p in tf_dir.iterdir())
    cp = jm.prolog(12, "0", VIGIL_TEXTFILE_DIR=str(tf_dir), **BASE)
    assert cp.returncode == 0
    assert sorted(p.name for p in tf_dir.iterdir()) == before  # nothing written, not even a temp file
    assert jm.job_map() == {"0": "12\n"}  # the job map does not depend on it
    log = jm.log()
    assert len(log) == 1, log
    assert f"the textfile dir {tf_dir}" in log[0] and reason in log[0] and "nothing written there" in log[0]


@pytest.mark.parametrize("phase", ["prolog", "epilog"])
def test_job_map_dir_others_can_change_is_left_alone(make_jobmap, phase) -> None:
    jm = make_jobmap()
    (jm.map_dir / "0").write_text("13\n12\n")
    jm.map_dir.chmod(0o775)
    cp = jm.run(phase, {"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "1", **BASE})
    assert cp.returncode == 0
    assert jm.job_map() == {"0": "13\n12\n"} and not (jm.map_dir / ".lock").exists()
    log = jm.log()
    assert len(log) == 1, log
    assert f"the job map dir {jm.map_dir} is writable by its group or by others" in log[0]
    if phase == "prolog":
        assert "slurm_job_12.prom" in jm.textfiles()  # the textfile dir is safe: written


# (c) links in place of the lock and staging entries of the job map dir


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("phase", ["prolog", "epilog"])
@pytest.mark.parametrize("entry", [".lock", ".lock.d", ".stage"])
def test_lock_and_stage_links_are_not_followed(make_jobmap, phase, entry) -> None:
    jm = make_jobmap()
    env = {"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "0", **BASE}
    if phase == "epilog":
        (jm.map_dir / "0").write_text("12\n13\n")  # GPU 0 stays shared: the epilog stages its new content
    if entry == ".lock":
        victim = _victim(jm.base / "victim")
        (jm.map_dir / entry).symlink_to(victim)
        check = [victim]
    else:
        # a root-owned dir holding a 0600 file under the name the script would use there
        target = jm.base / "victim-dir"
        target.mkdir()
        check = [_victim(target / ("pid" if entry == ".lock.d" else "0"))]
        if entry == ".lock.d":
            # a "stale" lock: the old script broke it by removing <link>/pid
            check[0].write_text(f"{_dead_pid()}\n")
            check[0].chmod(0o600)
            env["VIGIL_JOBMAP_LOCK"] = "mkdir"
        (jm.map_dir / entry).symlink_to(target)
    before = {p: p.read_bytes() for p in check}
    cp = jm.run(phase, env)
    assert cp.returncode == 0
    for p, data in before.items():
        assert p.is_file() and p.read_bytes() == data and (p.stat().st_mode & 0o777) == 0o600
    assert (jm.map_dir / entry).is_symlink()
    assert jm.job_map() == ({} if phase == "prolog" else {"0": "12\n13\n"})  # job map not changed
    log = jm.log()
    assert len(log) == 1, log
    assert f"{jm.map_dir}/{entry} is a symbolic link" in log[0] and "not followed" in log[0]


def test_job_map_file_link_is_not_read_through(make_jobmap) -> None:
    """A GPU file that is a link to a secret: its lines never land in the world-readable map."""
    jm = make_jobmap()
    victim = _victim(jm.base / "victim")
    (jm.map_dir / "0").symlink_to(victim)
    jm.prolog(12, "0", **BASE)
    _untouched(victim)
    assert jm.job_map() == {"0": "12\n"} and not (jm.map_dir / "0").is_symlink()
    assert len(jm.log()) == 1 and "was a symbolic link, not followed" in jm.log()[0]


# (d) the flock and the mkdir lock modes on one node


def test_mkdir_mode_waits_for_a_flock_holder(make_jobmap) -> None:
    jm = make_jobmap()
    with open(jm.map_dir / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
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
    assert not (jm.map_dir / ".lock.d").exists()
    log = jm.log()
    assert len(log) == 1 and f"{jm.map_dir}/.lock still held after 1s" in log[0]


def test_flock_mode_waits_for_a_mkdir_lock_holder(make_jobmap) -> None:
    jm = make_jobmap()
    (jm.map_dir / ".lock.d").mkdir()
    (jm.map_dir / ".lock.d" / "pid").write_text(f"{os.getpid()}\n")  # alive: a holder without flock
    cp = jm.run(
        "prolog",
        {
            "SLURM_JOB_ID": "12",
            "SLURM_JOB_GPUS": "0",
            "VIGIL_JOBMAP_LOCK": "flock",
            "VIGIL_JOBMAP_LOCK_TIMEOUT": "1",
            **BASE,
        },
    )
    assert cp.returncode == 0 and jm.job_map() == {}
    assert (jm.map_dir / ".lock.d" / "pid").read_text() == f"{os.getpid()}\n"
    log = jm.log()
    assert len(log) == 1 and f"{jm.map_dir}/.lock.d still held after 1s" in log[0]


def test_mixed_lock_modes_lose_no_update(make_jobmap) -> None:
    jm = make_jobmap()
    jobs = range(2000, 2120)
    env = {"VIGIL_JOBMAP_LOCK_TIMEOUT": "240", **BASE}

    def run(phase: str, job: int) -> int:
        lock = "flock" if job % 2 else "mkdir"
        cp = jm.run(
            phase,
            {"SLURM_JOB_ID": str(job), "SLURM_JOB_GPUS": "0,1", "VIGIL_JOBMAP_LOCK": lock, **env},
            timeout=300,
        )
        return cp.returncode

    with ThreadPoolExecutor(24) as pool:
        assert set(pool.map(lambda j: run("prolog", j), jobs)) == {0}
        got = {g: sorted(text.split()) for g, text in jm.job_map().items()}
        assert got == {g: sorted(map(str, jobs)) for g in ("0", "1")}
        assert set(pool.map(lambda j: run("epilog", j), jobs)) == {0}
    assert jm.job_map() == {} and jm.textfiles() == {} and jm.leftovers() == []
    assert jm.log() == []
