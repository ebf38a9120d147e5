"""Many prologs and epilogs at once on one node, and the scripts' POSIX-sh hygiene."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import EPILOG, PROLOG, SHELLS, need

GPUS = 8


def _expected(jobs: dict[int, list[int]]) -> dict[str, set[str]]:
    want: dict[str, set[str]] = {}
    for job, gpus in jobs.items():
        for g in gpus:
            want.setdefault(str(g), set()).add(str(job))
    return want


def _actual(jm) -> dict[str, set[str]]:
    got = {}
    for name, text in jm.job_map().items():
        lines = text.splitlines()
        assert len(lines) == len(set(lines)), f"GPU {name}: a job twice: {lines}"
        assert text.endswith("\n")
        got[name] = set(lines)
    return got


@pytest.mark.parametrize("lock", ["flock", "mkdir"])
def test_200_parallel_jobs_on_8_gpus(make_jobmap, lock) -> None:
    jm = make_jobmap()
    rng = random.Random(4)  # noqa: S311 - a fixed, reproducible job mix, not a secret
    jobs = {j: sorted(rng.sample(range(GPUS), rng.randint(1, 4))) for j in range(1000, 1300)}
    # The scripts wait at most VIGIL_JOBMAP_LOCK_TIMEOUT seconds (10 by default) for the node-wide
    # lock, then log that they gave up and leave the map alone: by design, and tested on its own in
    # test_epilog_failures.py. That bound is sized for a node, not for 32 jobs queued behind one lock
    # on a busy two-core build machine, where a mkdir-lock waiter could wait it out and give up, and
    # the exact map below would then fail one run in a few. Raised here, no job gives up (the empty
    # log at the end says so), so every job lands and the exact map is what the design owes.
    # The bound stays under the runner's own timeout, so a job that still gives up is logged, not killed.
    env = {
        "VIGIL_JOBMAP_LOCK": lock,
        "VIGIL_JOBMAP_LOCK_TIMEOUT": "240",
        "SLURM_JOB_USER": "u",
        "SLURMD_NODENAME": "n",
    }

    def run(phase: str, job: int) -> int:
        gpus = ",".join(map(str, jobs[job]))
        cp = jm.run(phase, {"SLURM_JOB_ID": str(job), "SLURM_JOB_GPUS": gpus, **env}, timeout=300)
        return cp.returncode

    first = list(range(1000, 1200))
    with ThreadPoolExecutor(32) as pool:
        # 1 200 prologs at once
        assert set(pool.map(lambda j: run("prolog", j), first)) == {0}
        assert _actual(jm) == _expected({j: jobs[j] for j in first})
        # 2 100 epilogs and 100 new prologs interleaved
        mixed = [("epilog", j) for j in range(1000, 1100)] + [("prolog", j) for j in range(1200, 1300)]
        rng.shuffle(mixed)
        assert set(pool.map(lambda pj: run(*pj), mixed)) == {0}
        live = range(1100, 1300)
        assert _actual(jm) == _expected({j: jobs[j] for j in live})
        assert sorted(jm.textfiles()) == sorted(f"slurm_job_{j}.prom" for j in live)
        # 3 every remaining epilog: nothing stale
        assert set(pool.map(lambda j: run("epilog", j), list(live))) == {0}
    assert jm.job_map() == {} and jm.textfiles() == {} and jm.leftovers() == []
    assert jm.log() == []


def _common_block(text: str) -> str:
    m = re.search(
        r"^# ---- vigil-jobmap common: begin.*?^# ---- vigil-jobmap common: end ----$", text, re.S | re.M
    )
    assert m, "common block markers missing"
    return m.group(0)


def test_common_block_identical() -> None:
    assert _common_block(PROLOG.read_text()) == _common_block(EPILOG.read_text())


@pytest.mark.parametrize("script", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_shellcheck_posix_sh(script) -> None:
    shellcheck = need("shellcheck", "shellcheck")
    cp = subprocess.run([shellcheck, "-s", "sh", "-S", "style", str(script)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("script", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_parses_as_posix_sh(shell, script) -> None:
    cp = subprocess.run([*SHELLS[shell], "-n", str(script)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr


@pytest.mark.parametrize("script", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_checkbashisms(script) -> None:
    tool = shutil.which("checkbashisms")
    if tool is None:
        pytest.skip(
            "checkbashisms (Debian devscripts) is not installed; "
            "shellcheck -s sh, dash and bash --posix cover it"
        )
    cp = subprocess.run([tool, "--posix", "--extra", str(script)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.mark.parametrize("script", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_plain_executable_files(script) -> None:
    assert script.read_text().startswith("#!/bin/sh\n")
    assert script.stat().st_mode & 0o111
    assert "{{" not in script.read_text()  # not a template
