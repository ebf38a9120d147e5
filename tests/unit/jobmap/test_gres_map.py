"""MIG: Slurm's GRES index -> the job map file dcgm-exporter reads for a MIG instance (``<gpu>.<GI id>``).

Slurm hands a prolog MIG slices as plain GRES indices (SLURM_JOB_GPUS=0,2); dcgm-exporter 4.8.2 tags
a MIG instance's series only from the file named ``<gpu>.<GPU instance id>``. The role writes the
GRES map (``/etc/vigil/jobmap-gres.conf``) from ``slurm_jobmap_gres_devices``; the prolog reads it
(root's file, parsed strictly) and names the files through it. Every test runs the real scripts.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import SHELLS, info_line

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the scripts check the GRES map belongs to root")

BASE = {"SLURM_JOB_USER": "alice", "SLURM_JOB_ACCOUNT": "physics", "SLURM_JOB_PARTITION": "gpu"}
INFO = info_line("12", "alice", "physics", "gpu", "gpu01")
#: a node whose GPU 0 is split into two 3g instances (GI 1, 2), GPU 1 whole, GPU 2 in 1g slices
MAP = "# slurm index -> job map file\n0 0.1\n1 0.2\n\n2 1\n3\t2.7\n4 2.8\n"


def _map(jm, text: str, mode: int = 0o644) -> Path:
    jm.gres_map.write_text(text)
    jm.gres_map.chmod(mode)
    return jm.gres_map


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("gpus", "want"),
    [
        ("0,2", {"0.1": "12\n", "1": "12\n"}),
        ("3-4", {"2.7": "12\n", "2.8": "12\n"}),
        ("01, 1", {"0.2": "12\n"}),  # one index given twice
        ("2.9,0", {"2.9": "12\n", "0.1": "12\n"}),  # <gpu>.<instance> is taken as it is
    ],
)
def test_slurm_indices_become_mig_files(make_jobmap, shell, gpus, want) -> None:
    jm = make_jobmap(shell)
    _map(jm, MAP)
    jm.prolog(12, gpus, SLURMD_NODENAME="gpu01", **BASE)
    assert jm.job_map() == want
    assert jm.textfiles() == {"slurm_job_12.prom": INFO}
    assert jm.log() == [] and jm.leftovers() == []


def test_cuda_visible_devices_goes_through_the_map_and_the_epilog_empties_mig_files(make_jobmap) -> None:
    jm = make_jobmap()
    _map(jm, MAP)
    jm.prolog(12, None, CUDA_VISIBLE_DEVICES="1,3", SLURMD_NODENAME="gpu01", **BASE)
    jm.prolog(13, "1", SLURMD_NODENAME="gpu01", **BASE)
    assert jm.job_map() == {"0.2": "12\n13\n", "2.7": "12\n"}
    jm.epilog(12)  # the epilog needs no map: it cleans every file
    assert jm.files() == {"0.2": "13\n", "2.7": ""}
    assert jm.log() == []


def test_compute_instances_of_one_gpu_instance_share_its_file(make_jobmap) -> None:
    """Two Slurm devices (two compute instances of GPU instance 1 of GPU 2) are one job map file:
    dcgm-exporter keys it by GPU instance, so two jobs there give two series of that instance."""
    jm = make_jobmap()
    _map(jm, "0 0\n1 1\n2 2.1\n3 2.1\n")
    jm.prolog(12, "2", SLURMD_NODENAME="gpu01", **BASE)
    jm.prolog(13, "3", SLURMD_NODENAME="gpu01", **BASE)
    jm.prolog(14, "2,3", SLURMD_NODENAME="gpu01", **BASE)  # both: one line
    assert jm.job_map() == {"2.1": "12\n13\n14\n"} and jm.log() == []


def test_an_index_the_map_lacks_is_logged_and_left_out(make_jobmap) -> None:
    jm = make_jobmap()
    _map(jm, MAP)
    jm.prolog(12, "0,5,9", SLURMD_NODENAME="gpu01", **BASE)
    assert jm.job_map() == {"0.1": "12\n"}
    assert jm.log() == [
        f"-t vigil-jobmap -p daemon.warning -- prolog: job 12: Slurm GPU index(es) 5 9 not in the GRES map "
        f"{jm.gres_map}; not mapped"
    ]
    jm.prolog(14, "7", SLURMD_NODENAME="gpu01", **BASE)  # nothing left to map: the dir is not touched
    assert jm.job_map() == {"0.1": "12\n"} and "slurm_job_14.prom" in jm.textfiles()


@pytest.mark.parametrize(
    "text",
    [
        "",  # no entries: Slurm's indices are GPU indices
        "# MIG off on this node\n\n",
    ],
)
def test_no_map_or_an_empty_one_keeps_gpu_indices(make_jobmap, text) -> None:
    jm = make_jobmap()
    _map(jm, text)
    jm.prolog(12, "0,2", SLURMD_NODENAME="gpu01", **BASE)
    assert jm.job_map() == {"0": "12\n", "2": "12\n"} and jm.log() == []


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("0 0.1\n1\n", 2),  # no name
        ("0 0.1 x\n", 1),  # a third field
        ("a 0.1\n", 1),
        ("0 0.1.2\n", 1),
        ("0 .1\n", 1),
        ("0 1.\n", 1),
        ("0 -1\n", 1),
        ("0 12345\n", 1),  # over 4 digits
        ("0 0.1\n0 0.2\n", 2),  # an index twice
        ("0 0.1\n1 $(touch /tmp/pwned)\n", 2),
        ("0 0.1\n1 *\n", 2),
        ("0 0.1\r\n", 1),
    ],
)
def test_a_bad_line_maps_no_gpu_logs_one_line_and_the_job_runs(make_jobmap, shell, text, line) -> None:
    jm = make_jobmap(shell)
    _map(jm, text)
    jm.prolog(12, "0,1", SLURMD_NODENAME="gpu01", **BASE)
    assert jm.files() == {}
    assert jm.textfiles() == {"slurm_job_12.prom": INFO}  # the job is real: its info is written
    assert jm.log() == [
        f"-t vigil-jobmap -p daemon.err -- prolog: job 12: line {line} of the GRES map {jm.gres_map} is not "
        '"<Slurm GPU index> <gpu>[.<GPU instance id>]" (or repeats an index); no GPU mapped'
    ]
    assert not Path("/tmp/pwned").exists()


def _refused(jm, why: str) -> None:
    jm.log_file.unlink(missing_ok=True)
    jm.prolog(12, "0", SLURMD_NODENAME="gpu01", **BASE)
    assert jm.files() == {} and jm.textfiles() == {"slurm_job_12.prom": INFO}
    log = jm.log()
    assert len(log) == 1 and why in log[0] and log[0].endswith("; no GPU mapped"), log


def test_a_map_others_could_write_is_not_read(make_jobmap) -> None:
    jm = make_jobmap()
    _map(jm, MAP, 0o664)
    _refused(jm, f"the GRES map {jm.gres_map} is not a regular file that only root can write")
    _map(jm, MAP, 0o646)
    _refused(jm, "is not a regular file that only root can write")


def test_a_map_of_another_user_is_not_read(make_jobmap) -> None:
    jm = make_jobmap()
    _map(jm, MAP)
    os.chown(jm.gres_map, 65534, 65534)
    _refused(jm, "is not a regular file that only root can write")


def test_a_link_in_place_of_the_map_is_not_followed(make_jobmap) -> None:
    jm = make_jobmap()
    target = jm.base / "elsewhere.conf"
    target.write_text(MAP)
    jm.gres_map.symlink_to(target)
    _refused(jm, "is not a regular file that only root can write")


def test_a_map_in_a_dir_others_can_change_is_not_read(make_jobmap) -> None:
    jm = make_jobmap()
    _map(jm, MAP)
    jm.gres_map.parent.chmod(0o777)
    _refused(jm, f"the GRES map dir {jm.gres_map.parent} is writable by its group or by others")


def test_the_map_path_comes_from_jobmap_conf(make_jobmap) -> None:
    jm = make_jobmap()
    other = jm.gres_map.parent / "other.conf"
    other.write_text("0 3.2\n")
    conf = jm.base / "jobmap.conf"
    conf.write_text(f"VIGIL_JOBMAP_GRES_MAP={other}\n")
    jm.prolog(
        12, "0", VIGIL_JOBMAP_CONF=str(conf), VIGIL_JOBMAP_GRES_MAP=None, SLURMD_NODENAME="gpu01", **BASE
    )
    assert jm.job_map() == {"3.2": "12\n"}
    jm.prolog(13, "0", VIGIL_JOBMAP_GRES_MAP="etc/relative", SLURMD_NODENAME="gpu01", **BASE)
    assert "must be absolute paths" in jm.log()[-1]


def test_the_roles_gres_map_template_is_what_the_prolog_reads(make_jobmap) -> None:
    """roles/slurm_jobmap/templates/jobmap-gres.conf.j2 with a host's slurm_jobmap_gres_devices."""
    import jinja2

    root = Path(__file__).resolve().parents[3] / "roles" / "slurm_jobmap" / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        trim_blocks=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - a config file, not HTML
    )
    env.filters["comment"] = lambda text: "#\n# " + text + "\n#"
    text = env.get_template("jobmap-gres.conf.j2").render(
        ansible_managed="Ansible managed",
        _slurm_jobmap_scripts={"prolog": "/usr/local/libexec/vigil/jobmap-prolog"},
        slurm_jobmap_gres_devices=["0.1", "0.2", "1", "2.7"],
    )
    assert [ln for ln in text.splitlines() if not ln.startswith("#")] == ["0 0.1", "1 0.2", "2 1", "3 2.7"]
    jm = make_jobmap()
    _map(jm, text)
    jm.prolog(12, "1,3", SLURMD_NODENAME="gpu01", **BASE)
    assert jm.job_map() == {"0.2": "12\n", "2.7": "12\n"} and jm.log() == []
