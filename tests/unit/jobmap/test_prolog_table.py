"""The prolog against hostile input: each row runs the real script and asserts the exact files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import SHELLS, info_line, label, need

BASE = {
    "SLURM_JOB_USER": "alice",
    "SLURM_JOB_ACCOUNT": "physics",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURMD_NODENAME": "gpu01",
}
OK_INFO = info_line("12", "alice", "physics", "gpu", "gpu01")

# id, SLURM_JOB_GPUS, extra env, expected job map, expected log substring (None: no log line)
GPU_ROWS = [
    ("list", "0,1", {}, {"0": "12\n", "1": "12\n"}, None),
    ("range", "0-3", {}, {str(i): "12\n" for i in range(4)}, None),
    ("range-and-list", "0-1,3", {}, {"0": "12\n", "1": "12\n", "3": "12\n"}, None),
    ("spaces", " 0 , 2 ", {}, {"0": "12\n", "2": "12\n"}, None),
    ("mig", "1.2,3.0", {}, {"1.2": "12\n", "3.0": "12\n"}, None),
    ("leading-zeros", "01,002", {}, {"1": "12\n", "2": "12\n"}, None),
    ("duplicates", "0,0-1,1", {}, {"0": "12\n", "1": "12\n"}, None),
    ("empty-items", "0,,1,", {}, {"0": "12\n", "1": "12\n"}, None),
    ("cuda-fallback", None, {"CUDA_VISIBLE_DEVICES": "2,3"}, {"2": "12\n", "3": "12\n"}, None),
    ("slurm-wins", "1", {"CUDA_VISIBLE_DEVICES": "0"}, {"1": "12\n"}, None),
    ("no-gpus", None, {}, {}, "job 12: no GPUs"),
    ("empty-gpus", "", {"CUDA_VISIBLE_DEVICES": ""}, {}, "job 12: no GPUs"),
    ("nodevfiles", None, {"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, {}, "job 12: no GPUs"),
    (
        "cuda-uuid",
        None,
        {"CUDA_VISIBLE_DEVICES": "GPU-8a3b1c2d-0000"},
        {},
        "CUDA_VISIBLE_DEVICES is not a list",
    ),
    ("dotdot", "../../etc/passwd", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("dot-slash", "./0", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("semicolon", "0;touch pwned", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("command-subst", "$(touch pwned)", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("glob", "*", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("newline", "0\n1", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("partly-garbage", "0,x", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("reversed-range", "3-1", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("open-range", "2-", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("negative", "-1", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("double-range", "0-1-2", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("mig-range", "1.0-2", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("mig-three-parts", "1.2.3", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("huge-range", "0-5000", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("huge-index", "123456", {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("very-long-list", ",".join(["0"] * 3000), {}, {}, "SLURM_JOB_GPUS is not a list"),
    ("space-inside", "1 2", {}, {}, "SLURM_JOB_GPUS is not a list"),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("gpus", "extra", "want_map", "want_log"), [r[1:] for r in GPU_ROWS], ids=[r[0] for r in GPU_ROWS]
)
def test_gpu_lists(make_jobmap, shell, gpus, extra, want_map, want_log) -> None:
    jm = make_jobmap(shell)
    cp = jm.prolog(12, gpus, **BASE, **extra)
    assert jm.job_map() == want_map
    # the job is real whatever its GPU list says: its info is published
    assert jm.textfiles() == {"slurm_job_12.prom": OK_INFO}
    log = jm.log()
    if want_log is None:
        assert log == [], cp.stderr
    else:
        assert len(log) == 1 and want_log in log[0], log
        assert log[0].startswith("-t vigil-jobmap -p daemon.")
    assert jm.leftovers() == []
    assert not (jm.base / "pwned").exists() and not (jm.map_dir / "pwned").exists()


BAD_JOB_IDS = [
    ("unset", None),
    ("empty", ""),
    ("letters", "12a"),
    ("dotdot", "../12"),
    ("slash", "12/../../x"),
    ("negative", "-1"),
    ("space", "1 2"),
    ("newline", "12\n13"),
    ("zero", "0"),
    ("leading-zero", "012"),
    ("eleven-digits", "12345678901"),
    ("command-subst", "$(touch pwned)"),
    ("glob", "*"),
    ("array-notation", "12_3"),
    ("het-notation", "12+0"),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("job", [r[1] for r in BAD_JOB_IDS], ids=[r[0] for r in BAD_JOB_IDS])
@pytest.mark.parametrize("phase", ["prolog", "epilog"])
def test_garbage_job_id_writes_nothing(make_jobmap, shell, job, phase) -> None:
    jm = make_jobmap(shell)
    (jm.map_dir / "0").write_text("7\n")
    (jm.tf_dir / "slurm_job_7.prom").write_bytes(info_line("7"))
    before = (jm.job_map(), jm.textfiles())
    cp = jm.run(phase, {"SLURM_JOB_ID": job, "SLURM_JOB_GPUS": "0,1", **BASE})
    assert cp.returncode == 0
    assert (jm.job_map(), jm.textfiles()) == before
    assert sorted(p.name for p in jm.map_dir.iterdir()) == ["0"]  # not even a lock file
    log = jm.log()
    assert len(log) == 1 and "SLURM_JOB_ID is missing or not a job id" in log[0], log
    assert not (jm.base / "pwned").exists()


def test_slurm_jobid_fallback(make_jobmap) -> None:
    jm = make_jobmap()
    cp = jm.run("prolog", {"SLURM_JOBID": "12", "SLURM_JOB_GPUS": "0", **BASE})
    assert cp.returncode == 0
    assert jm.job_map() == {"0": "12\n"}


# label values: user, account, partition, node
LABEL_ROWS = [
    ("quotes", 'al"ice'),
    ("backslash", "al\\ice"),
    ("backslash-quote", 'a\\"b'),
    ("trailing-backslash", "alice\\"),
    ("newline", "al\nice"),
    ("trailing-newlines", "alice\n\n"),
    ("only-newline", "\n"),
    ("spaces", "  a l i c e  "),
    ("braces", 'x"} 1\nevil_metric{a="b'),
    ("printf-format", "%s%d%n%%"),
    ("dollar", "$(touch pwned)`touch pwned`$HOME"),
    ("dotdot", "../../etc/passwd"),
    ("utf8", "zoë-日本"),
    ("tab-cr", "a\tb\rc"),
    ("very-long", "a" * 100_000),
    ("very-long-specials", '"\\\n' * 30_000),
    ("cut-inside-utf8", "a" + "é" * 200),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("value", [r[1] for r in LABEL_ROWS], ids=[r[0] for r in LABEL_ROWS])
@pytest.mark.parametrize(
    "var", ["SLURM_JOB_USER", "SLURM_JOB_ACCOUNT", "SLURM_JOB_PARTITION", "SLURMD_NODENAME"]
)
def test_label_values_escaped(make_jobmap, shell, var, value) -> None:
    promtool = need("promtool", "prometheus")
    jm = make_jobmap(shell)
    jm.prolog(12, "0", **{**BASE, var: value})
    values = {
        "SLURM_JOB_USER": "alice",
        "SLURM_JOB_ACCOUNT": "physics",
        "SLURM_JOB_PARTITION": "gpu",
        "SLURMD_NODENAME": "gpu01",
    }
    values[var] = label(value)
    want = info_line(
        "12",
        values["SLURM_JOB_USER"],
        values["SLURM_JOB_ACCOUNT"],
        values["SLURM_JOB_PARTITION"],
        values["SLURMD_NODENAME"],
    )
    got = jm.textfiles()["slurm_job_12.prom"]
    assert got == want
    assert len(label(value).encode()) <= 2 * 256
    check = subprocess.run([promtool, "check", "metrics"], input=got, capture_output=True, check=False)
    assert check.returncode == 0, check
    assert jm.job_map() == {"0": "12\n"}
    assert not (jm.base / "pwned").exists() and not (jm.tf_dir.parent / "etc").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_invalid_utf8_dropped(make_jobmap, shell) -> None:
    promtool = need("promtool", "prometheus")
    jm = make_jobmap(shell)
    jm.prolog(
        12, "0", **{**BASE, "SLURM_JOB_USER": b"bad\xff\xfename\xc3", "SLURM_JOB_ACCOUNT": b"\xe2\x82phys"}
    )
    got = jm.textfiles()["slurm_job_12.prom"]
    assert got == info_line("12", "badname", "phys", "gpu", "gpu01")
    assert subprocess.run([promtool, "check", "metrics"], input=got, capture_output=True).returncode == 0


def test_missing_labels_are_empty(make_jobmap) -> None:
    jm = make_jobmap()
    jm.prolog(12, "0", SLURMD_NODENAME="gpu01")
    assert jm.textfiles() == {"slurm_job_12.prom": info_line("12", node="gpu01")}


def test_node_defaults_to_the_host_name(make_jobmap) -> None:
    jm = make_jobmap()
    jm.prolog(12, "0", SLURM_JOB_USER="alice")
    host = Path("/proc/sys/kernel/hostname").read_text().strip()
    assert jm.textfiles() == {"slurm_job_12.prom": info_line("12", "alice", node=label(host))}


def test_prolog_twice_adds_one_line(make_jobmap) -> None:
    jm = make_jobmap()
    jm.prolog(12, "0,1", **BASE)
    jm.prolog(12, "0,1", **BASE)  # a requeued job's prolog, or slurmd retrying
    assert jm.job_map() == {"0": "12\n", "1": "12\n"}


def test_jobs_sharing_a_gpu(make_jobmap) -> None:
    jm = make_jobmap()
    jm.prolog(12, "0,1", **BASE)
    jm.prolog(13, "1,2", **BASE)
    jm.prolog(14, "1", **BASE)
    assert jm.job_map() == {"0": "12\n", "1": "12\n13\n14\n", "2": "13\n"}
    assert sorted(jm.textfiles()) == ["slurm_job_12.prom", "slurm_job_13.prom", "slurm_job_14.prom"]


def test_config_file_parsed_env_wins(make_jobmap, tmp_path) -> None:
    jm = make_jobmap()
    conf_map = tmp_path / "conf map"
    conf_tf = tmp_path / "conf tf"
    conf = tmp_path / "jobmap.conf"
    conf.write_text(
        "# comment\n"
        "$(touch pwned)\n"
        "rm -rf /\n"
        "EVIL=$(touch pwned)\n"
        f'VIGIL_JOBMAP_DIR="{conf_map}"\n'
        f"VIGIL_TEXTFILE_DIR='{conf_tf}'\n"
        "VIGIL_JOBMAP_LOCK_TIMEOUT=garbage\n"
    )
    cp = jm.run(
        "prolog",
        {
            "VIGIL_JOBMAP_CONF": str(conf),
            "VIGIL_JOBMAP_DIR": None,
            "VIGIL_TEXTFILE_DIR": None,
            "SLURM_JOB_ID": "12",
            "SLURM_JOB_GPUS": "0",
            **BASE,
        },
    )
    assert cp.returncode == 0
    assert (conf_map / "0").read_text() == "12\n"
    assert (conf_tf / "slurm_job_12.prom").read_bytes() == OK_INFO
    assert jm.job_map() == {}
    # the environment overrides the file
    cp = jm.run(
        "prolog", {"VIGIL_JOBMAP_CONF": str(conf), "SLURM_JOB_ID": "13", "SLURM_JOB_GPUS": "0", **BASE}
    )
    assert jm.job_map() == {"0": "13\n"}
    assert (conf_map / "0").read_text() == "12\n"
    for where in (tmp_path, jm.base, conf_map):
        assert not (where / "pwned").exists()


@pytest.mark.parametrize("bad", ["relative/dir", "/tmp/../etc", "/x/./y", "/x/.."])
def test_unusable_dir_setting(make_jobmap, tmp_path, bad) -> None:
    jm = make_jobmap()
    conf = tmp_path / "bad.conf"
    conf.write_text(f"VIGIL_JOBMAP_DIR={bad}\n")
    cp = jm.run(
        "prolog",
        {
            "VIGIL_JOBMAP_CONF": str(conf),
            "VIGIL_JOBMAP_DIR": None,
            "SLURM_JOB_ID": "12",
            "SLURM_JOB_GPUS": "0",
            **BASE,
        },
    )
    assert cp.returncode == 0
    assert jm.textfiles() == {} and jm.job_map() == {}
    assert len(jm.log()) == 1 and "must be absolute paths" in jm.log()[0]
