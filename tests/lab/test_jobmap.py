"""The job map on the lab's real Slurm: the role wires the prolog/epilog in, real jobs fill and empty it.

gpu01 is wired through slurm.conf's Prolog=/Epilog= lines (the role sets them and reloads slurmd);
gpu02 the way many sites run several prologs: Prolog=/etc/slurm/prolog.d/* (the role drops a link
there). A second script in gpu02's prolog.d records the environment Slurm really gives a prolog.
The lab is shared with the other lab modules: gpu02's slurm.conf is put back at the end.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
MAP = "/run/vigil/jobmap"
TEXTFILES = "/var/lib/vigil/node_exporter/textfile"
PLAY = """- name: The Slurm job map only
  hosts: gpu_nodes
  gather_facts: false
  roles:
    - role: slurm_jobmap
"""
ENV_DUMP = "/etc/slurm/prolog.d/10-vigil-test-env"
#: gpu02's slurm.conf as it was before the module rewired it
SAVED = "/etc/slurm/slurm.conf.vigil-test-saved"
JOB_SCRIPT = """#!/bin/sh
echo "SLURM_JOB_GPUS=$SLURM_JOB_GPUS"
for g in $(echo "$SLURM_JOB_GPUS" | tr ',' ' '); do echo "map $g: $(cat /run/vigil/jobmap/$g)"; done
sleep "${1:-1}"
"""


def _playbook(lab, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    play = tmp_path / "jobmap.yml"
    play.write_text(PLAY)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
    )
    cp = subprocess.run(
        ["ansible-playbook", "-i", str(lab.hosts_file), str(play)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cp.returncode == 0, cp.stdout[-6000:] + cp.stderr[-3000:]
    return cp


def _recap_changed(out: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", out, re.M)}


def _idx(text: str) -> list[int]:
    """GPU indices from `scontrol -d show job`'s GRES=gpu:2(IDX:0-1) / (IDX:0,2)."""
    m = re.search(r"GRES=\S*?\(IDX:([0-9,\-]+)\)", text)
    assert m, text
    out: list[int] = []
    for part in m.group(1).split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def _job_map(lab, host: str) -> dict[str, list[str]]:
    cp = lab.ssh(
        host, f'cd {MAP} && for f in *; do [ -f "$f" ] && printf \'== %s\\n\' "$f" && cat "$f"; done; true'
    )
    out: dict[str, list[str]] = {}
    cur = None
    for line in cp.stdout.splitlines():
        if line.startswith("== "):
            cur = line[3:]
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    # an epilog empties a GPU's file (never removes it: a scrape in flight must find every file it
    # listed); an empty file maps no job
    return {k: v for k, v in out.items() if v}


def _textfiles(lab, host: str) -> dict[str, str]:
    cp = lab.ssh(
        host,
        f"cd {TEXTFILES} 2>/dev/null && "
        'for f in slurm_job_*.prom; do [ -f "$f" ] && printf \'== %s\\n\' "$f" && cat "$f"; done; true',
    )
    return {blk.split("\n", 1)[0]: blk.split("\n", 1)[1] for blk in cp.stdout.split("== ")[1:]}


def _sbatch(lab, user: str, account: str, gpus: int, node: str, seconds: int, wait: bool = False) -> str:
    flags = "--wait " if wait else ""
    cp = lab.ssh(
        "ctl01",
        f"su {user} -s /bin/sh -c 'cd /tmp && sbatch --parsable {flags}-A {account} "
        f"--gres=gpu:{gpus} -w {node} -o /tmp/vigil-jobmap-%j.out /tmp/vigil-jobmap-job.sh {seconds}'",
        timeout=180,
    )
    return cp.stdout.strip().splitlines()[0].split(";")[0]


def _wait_for(fn, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="module")
def wired(lab, tmp_path_factory):
    """The role applied to the GPU nodes, gpu02 with prolog.d/epilog.d globs and an env recorder.

    The lab is shared by the session: at the end gpu02's slurm.conf is put back as it was (the
    deployed stack's, or the lab's own) and the links the role made for the globs go.
    """
    lab.ssh(
        "gpu02",
        f"set -e; c=/etc/slurm/slurm.conf; [ -e {SAVED} ] || cp -p $c {SAVED}; "
        "sed -i '/^[Pp]rolog *=/d; /^[Ee]pilog *=/d' $c; "
        "printf 'Prolog=/etc/slurm/prolog.d/*\\nEpilog=/etc/slurm/epilog.d/*\\n' >>$c; "
        "mkdir -p /etc/slurm/prolog.d /etc/slurm/epilog.d; "
        f"printf '#!/bin/sh\\nenv >/tmp/vigil-test-prolog-env.$SLURM_JOB_ID\\n' >{ENV_DUMP}; "
        f"chmod 755 {ENV_DUMP}; "
        "systemctl reload slurmd",
    )
    lab.ssh(
        "ctl01", f"cat >/tmp/vigil-jobmap-job.sh <<'EOF'\n{JOB_SCRIPT}EOF\nchmod 755 /tmp/vigil-jobmap-job.sh"
    )
    tmp = tmp_path_factory.mktemp("jobmap-play")
    first = _playbook(lab, tmp)
    yield first
    lab.ssh("gpu02", f"rm -f {ENV_DUMP} /tmp/vigil-test-prolog-env.*", check=False)
    lab.ssh(
        "gpu02",
        f"set -e; mv {SAVED} /etc/slurm/slurm.conf; "
        "rm -f /etc/slurm/prolog.d/50-vigil-jobmap /etc/slurm/epilog.d/50-vigil-jobmap; "
        "rmdir /etc/slurm/prolog.d /etc/slurm/epilog.d 2>/dev/null || true; "
        "systemctl reload slurmd",
    )


def test_role_wires_each_node_and_is_idempotent(lab, wired, tmp_path) -> None:
    for host in ("gpu01", "gpu02"):
        lab.ssh(
            host,
            "test -x /usr/local/libexec/vigil/jobmap-prolog -a -x /usr/local/libexec/vigil/jobmap-epilog",
        )
        st = lab.ssh(
            host, f"stat -c '%U %a' /usr/local/libexec/vigil/jobmap-prolog /etc/vigil/jobmap.conf {MAP}"
        ).stdout
        assert st.split("\n")[:3] == ["root 755", "root 644", "root 755"], st
        conf = lab.ssh(host, "cat /etc/vigil/jobmap.conf").stdout
        assert f"VIGIL_JOBMAP_DIR={MAP}\n" in conf and f"VIGIL_TEXTFILE_DIR={TEXTFILES}\n" in conf
        assert MAP in lab.ssh(host, "cat /etc/tmpfiles.d/vigil-jobmap.conf").stdout
    conf1 = lab.ssh("gpu01", "grep -iE '^(prolog|epilog) *=' /etc/slurm/slurm.conf").stdout
    assert (
        conf1
        == "Prolog=/usr/local/libexec/vigil/jobmap-prolog\nEpilog=/usr/local/libexec/vigil/jobmap-epilog\n"
    )
    conf2 = lab.ssh("gpu02", "grep -iE '^(prolog|epilog) *=' /etc/slurm/slurm.conf").stdout
    assert conf2 == "Prolog=/etc/slurm/prolog.d/*\nEpilog=/etc/slurm/epilog.d/*\n"  # left as the site has it
    links = lab.ssh(
        "gpu02", "readlink /etc/slurm/prolog.d/50-vigil-jobmap /etc/slurm/epilog.d/50-vigil-jobmap"
    ).stdout
    assert links == "/usr/local/libexec/vigil/jobmap-prolog\n/usr/local/libexec/vigil/jobmap-epilog\n"
    again = _playbook(lab, tmp_path)
    assert _recap_changed(again.stdout) == {"gpu01": 0, "gpu02": 0}, again.stdout[-3000:]


def test_jobs_under_two_accounts_fill_and_empty_the_map(lab, wired) -> None:
    jobs = {
        _sbatch(lab, "alice", "physics", 2, "gpu01", 300): ("alice", "physics", "gpu01"),
        _sbatch(lab, "bob", "chemistry", 1, "gpu01", 300): ("bob", "chemistry", "gpu01"),
        _sbatch(lab, "bob", "chemistry", 3, "gpu02", 300): ("bob", "chemistry", "gpu02"),
        _sbatch(lab, "alice", "physics", 1, "gpu02", 300): ("alice", "physics", "gpu02"),
    }
    ids = ",".join(jobs)
    try:
        _wait_for(
            lambda: lab.ssh("ctl01", f"squeue -h -j {ids} -o %T").stdout.split() == ["RUNNING"] * 4,
            "the four jobs to run",
        )
        gpus = {j: _idx(lab.ssh("ctl01", f"scontrol -d show job {j}").stdout) for j in jobs}
        for host in ("gpu01", "gpu02"):
            want: dict[str, list[str]] = {}
            for j, (_, _, node) in jobs.items():
                if node == host:
                    for g in gpus[j]:
                        want.setdefault(str(g), []).append(j)
            # the prolog may still be finishing while the job is reported RUNNING
            _wait_for(
                lambda host=host, want=want: (
                    {k: sorted(v) for k, v in _job_map(lab, host).items()}
                    == {k: sorted(v) for k, v in want.items()}
                ),
                f"the job map on {host}",
                30,
            )
            tf = _textfiles(lab, host)
            assert tf == {
                f"slurm_job_{j}.prom": (
                    "# HELP slurm_job_info Slurm job on this node (vigil prolog); the value is always 1.\n"
                    "# TYPE slurm_job_info gauge\n"
                    f'slurm_job_info{{hpc_job="{j}",user="{u}",account="{a}",partition="gpu",node="{n}"}} 1\n'
                )
                for j, (u, a, n) in jobs.items()
                if n == host
            }
        # what Slurm 22.05 really hands a prolog
        first_gpu02 = next(j for j, v in jobs.items() if v[2] == "gpu02")
        env = lab.ssh("gpu02", f"cat /tmp/vigil-test-prolog-env.{first_gpu02}").stdout
        seen = dict(
            line.split("=", 1)
            for line in env.splitlines()
            if line.startswith(("SLURM_JOB_", "CUDA_", "SLURMD_"))
        )
        print(f"\nprolog env of job {first_gpu02} (3 GPUs): {sorted(seen.items())}")
        assert seen["SLURM_JOB_ACCOUNT"] == "chemistry" and seen["SLURM_JOB_USER"] == "bob"
        assert sorted(int(g) for g in seen["SLURM_JOB_GPUS"].split(",")) == gpus[first_gpu02]
        # one job ends: only its lines and its textfile go
        gone = next(iter(jobs))
        lab.ssh("ctl01", f"scancel {gone}")
        _wait_for(
            lambda: (
                all(gone not in v for v in _job_map(lab, "gpu01").values())
                and f"slurm_job_{gone}.prom" not in _textfiles(lab, "gpu01")
            ),
            "the epilog of the cancelled job",
        )
        rest = [j for j in jobs if j != gone and jobs[j][2] == "gpu01"]
        assert sorted(sum(_job_map(lab, "gpu01").values(), [])) == sorted(rest * len(gpus[rest[0]]))
    finally:
        lab.ssh("ctl01", f"scancel {ids}", check=False)
    for host in ("gpu01", "gpu02"):
        _wait_for(
            lambda host=host: _job_map(lab, host) == {} and _textfiles(lab, host) == {},
            f"{host} to be empty again",
        )
    log = lab.ssh(
        "gpu01",
        "journalctl -t vigil-jobmap --no-pager -q --since=-10min | grep -v 'created the missing' || true",
    )
    assert log.stdout.strip() == "", log.stdout


def test_sbatch_wait_job_sees_its_map_and_leaves_nothing(lab, wired) -> None:
    job = _sbatch(lab, "bob", "chemistry", 2, "gpu01", 1, wait=True)
    out = lab.ssh("gpu01", f"cat /tmp/vigil-jobmap-{job}.out").stdout
    lines = out.splitlines()
    assert lines[0].startswith("SLURM_JOB_GPUS=") and len(lines) == 3, out
    for line in lines[1:]:
        assert re.fullmatch(rf"map \d: {job}", line), out
    _wait_for(lambda: _job_map(lab, "gpu01") == {} and _textfiles(lab, "gpu01") == {}, "the epilog", 30)


# MIG: the GRES map written by the role, the prolog naming <gpu>.<GPU instance id> files, the
# deployed GPU simulator put in MIG mode, and GpuMigInstanceContention's expression in VictoriaMetrics.
# Needs the deployed stack (VictoriaMetrics scraping gpu01's vigil-gpusim and node_exporter, vmalert's
# rules). Slurm in the lab has no MIG devices: its 4 plain GPU indices on gpu01 stand for the MIG
# devices of the map below (Slurm index 2 and 3 = two compute instances of GPU instance 1 of GPU 2).
MIG_DEVICES = '["0", "1", "2.1", "2.1"]'
MIG_DROPIN = "/run/systemd/system/vigil-gpusim.service.d/50-vigil-test-mig.conf"
MIG_CONTENTION = (
    '(DCGM_FI_PROF_DRAM_ACTIVE{GPU_I_ID!="", hpc_job!=""} > 0.8'
    " and on (instance, gpu, GPU_I_ID) count by (instance, gpu, GPU_I_ID)"
    ' (DCGM_FI_PROF_DRAM_ACTIVE{GPU_I_ID!="", hpc_job!=""}) > 1'
    " and on (instance, gpu, GPU_I_ID, hpc_job)"
    ' DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!="", hpc_job!=""} < 0.5)'
    " * on (instance, hpc_job) group_left (user, account, node)"
    " max by (instance, hpc_job, user, account, node) (last_over_time(slurm_job_info[10m]))"
)


def _playbook_vars(lab, tmp_path: Path, extra: str) -> subprocess.CompletedProcess[str]:
    play = tmp_path / "jobmap-mig.yml"
    play.write_text(PLAY)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
    )
    cp = subprocess.run(
        ["ansible-playbook", "-i", str(lab.hosts_file), "-l", "gpu01", "-e", extra, str(play)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cp.returncode == 0, cp.stdout[-6000:] + cp.stderr[-3000:]
    return cp


def test_mig_jobs_tag_their_instances_and_contention_shows(lab, deployed_stack, wired, tmp_path) -> None:
    from tests.lab.labhttp import query, wait_for

    # as JSON: `-e key=[...]` would hand the role a string, not a list
    _playbook_vars(lab, tmp_path, '{"slurm_jobmap_gres_devices": ' + MIG_DEVICES + "}")
    restarted = time.time()
    lab.ssh(
        "gpu01",
        f"mkdir -p {os.path.dirname(MIG_DROPIN)} && "
        f"printf '[Service]\\nEnvironment=VIGIL_GPUSIM_MIG=2:3g.40gb,3g.40gb\\n' >{MIG_DROPIN} && "
        "systemctl daemon-reload && systemctl restart vigil-gpusim",
    )
    jobs: list[str] = []
    try:
        gres = lab.ssh(
            "gpu01", "stat -c '%U %a' /etc/vigil/jobmap-gres.conf; grep -v '^#' /etc/vigil/jobmap-gres.conf"
        )
        assert gres.stdout.splitlines() == ["root 644", "0 0", "1 1", "2 2.1", "3 2.1"], gres.stdout
        jobs = [
            _sbatch(lab, user, account, 1, "gpu01", 600)
            for user, account in (
                ("alice", "physics"),
                ("bob", "chemistry"),
                ("alice", "physics"),
                ("bob", "chemistry"),
            )
        ]
        _wait_for(
            lambda: (
                lab.ssh("ctl01", f"squeue -h -j {','.join(jobs)} -o %T").stdout.split() == ["RUNNING"] * 4
            ),
            "the four MIG jobs to run",
        )
        idx = {j: _idx(lab.ssh("ctl01", f"scontrol -d show job {j}").stdout) for j in jobs}
        in_gi = sorted(j for j, g in idx.items() if g[0] in (2, 3))
        _wait_for(
            lambda: sorted(_job_map(lab, "gpu01").get("2.1", [])) == in_gi, "the map of GPU instance 2.1", 30
        )

        # the simulator's MIG series: two job series of GPU instance 1 (3g.40gb) of GPU 2
        def tagged() -> list[dict] | None:
            s = query('DCGM_FI_PROF_DRAM_ACTIVE{instance="gpu01",gpu="2",hpc_job!=""}')
            return s if sorted(x["metric"]["hpc_job"] for x in s) == in_gi else None

        series = wait_for("the jobs on GPU instance 2.1 in VictoriaMetrics", tagged, 90)
        assert {(x["metric"]["GPU_I_ID"], x["metric"]["GPU_I_PROFILE"]) for x in series} == {("1", "3g.40gb")}

        # GpuMigInstanceContention's expression (its `for: 15m` is the rule's business): both jobs. The
        # Slurm exporter's job series reach VictoriaMetrics on its own scrape, so one job can match a
        # scrape before the other: wait for both, not for the first answer.
        def contention() -> list[dict] | None:
            hits = query(MIG_CONTENTION)
            return hits if sorted(x["metric"]["hpc_job"] for x in hits) == in_gi else None

        hits = wait_for("both jobs in the contention expression", contention, 60)
        assert {x["metric"]["account"] for x in hits} == {"physics", "chemistry"}
        # NVML has no utilisation on a MIG GPU: no sample of it since the first one in MIG mode. Read by
        # the samples' own times: an instant query may still show the last one from before the
        # restart (VictoriaMetrics answers a query that recent as of its latency offset ago, and keeps
        # a series for up to 5 min unless a staleness mark ended it), which says nothing about MIG mode.
        window = f"[{int(time.time() - restarted) + 60}s]"
        first_mig = query(
            f'min(tfirst_over_time(DCGM_FI_PROF_DRAM_ACTIVE{{instance="gpu01",gpu="2",GPU_I_ID!=""}}{window}))',
            nocache=True,
        )
        assert first_mig, "no MIG instance series of GPU 2"
        util = query(
            f'tlast_over_time(DCGM_FI_DEV_GPU_UTIL{{instance="gpu01",gpu="2"}}{window})', nocache=True
        )
        since = float(first_mig[0]["value"][1])
        assert [u for u in util if float(u["value"][1]) >= since] == [], (since, util)
    finally:
        if jobs:
            lab.ssh("ctl01", "scancel " + " ".join(jobs), check=False)
        lab.ssh(
            "gpu01",
            f"rm -f {MIG_DROPIN}; systemctl daemon-reload; systemctl restart vigil-gpusim",
            check=False,
        )
        _playbook_vars(lab, tmp_path, '{"slurm_jobmap_gres_devices": []}')
    assert lab.ssh("gpu01", "test -e /etc/vigil/jobmap-gres.conf", check=False).returncode == 1
