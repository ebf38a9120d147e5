"""The Slurm exporter against real Slurm 22.05 output from the lab and against failing commands.

The fixtures are what squeue and sinfo printed in the lab with ``|`` between the fields (none of
their values holds one). The stand-in commands below print those records through the format string
the exporter passes, as Slurm does: each field's value in place of its ``%x`` (squeue ``-o``) or
``Name:0`` (sinfo ``-O``), every other character as it is.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.unit.exporters.expo_helpers import FIXTURES, parse_exposition, promtool_check
from vigil.exporters.slurm import SlurmCollector
from vigil.exporters.slurm.commands import SINFO_FIELDS, SQUEUE_FIELDS, Marks, commands, new_marks
from vigil.exporters.slurm.parse import (
    gpu_count,
    parse_sdiag,
    parse_sinfo,
    parse_squeue,
    split_state,
    tres_gpus,
)

FIX = FIXTURES / "slurm"
MARKS = Marks("|VTEST|", "|VTEST.")

#: squeue -o / sinfo -O as Slurm reads them, for the fields the exporter asks for
_FORMATTER = r"""
import json, re, sys
fields, records = json.load(open(sys.argv[1]))
fmt = sys.argv[sys.argv.index("-o" if "-o" in sys.argv else "-O") + 1]
if "-O" in sys.argv:  # Name:0suffix,Name:0suffix
    parts = [t.split(":0", 1) for t in fmt.split(",")]
    out = [(lambda r, n=n, sfx=sfx: r[fields.index(n)] + sfx) for n, sfx in parts]
    line = lambda r: "".join(f(r) for f in out)
else:  # %x between literal text
    line = lambda r: re.sub(r"%([A-Za-z])", lambda m: r[fields.index("%" + m.group(1))], fmt)
sys.stdout.write("".join(line(r) + "\n" for r in records))
"""


def _records(cmd: str) -> list[list[str]]:
    return [ln.split("|") for ln in (FIX / f"{cmd}.txt").read_text().splitlines()]


def _fake_slurm(tmp_path: Path, *, extra_jobs: Sequence[list[str]] = (), **behaviour: str) -> dict[str, str]:
    """squeue/sinfo/sdiag on PATH: the captured fixture (and EXTRA_JOBS, in squeue's field order)
    printed through the exporter's format string, or what BEHAVIOUR says."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    formatter = bindir / "formatter.py"
    formatter.write_text(_FORMATTER)
    for cmd, fields, extra in (
        ("squeue", SQUEUE_FIELDS, list(extra_jobs)),
        ("sinfo", SINFO_FIELDS, []),
    ):
        data = bindir / f"{cmd}.json"
        data.write_text(json.dumps([list(fields), _records(cmd) + extra]))
        behaviour.setdefault(cmd, f'exec {sys.executable} {formatter} {data} "$@"')
    behaviour.setdefault("sdiag", f"cat {FIX / 'sdiag.txt'}")
    for cmd, body in behaviour.items():
        script = bindir / cmd
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def _text(cmd: str, marks: Marks = MARKS) -> str:
    """The fixture as the exporter's format string with MARKS makes Slurm print it."""
    return "".join(marks.field.join(r) + marks.end + "\n" for r in _records(cmd))


def _values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(lbl.items())): v for lbl, v in parse_exposition(text)[name]}


def test_squeue_fixture_from_the_lab():
    jobs = parse_squeue(_text("squeue"), MARKS)
    assert jobs.bad_lines == 0 and jobs.lines == 8
    assert jobs.by_state == {
        ("pending", "chemistry", "gpu"): 1,
        ("pending", "physics", "gpu"): 5,  # an array of 5 held tasks, counted one by one
        ("running", "physics", "gpu"): 1,
        ("running", "chemistry", "gpu"): 1,
    }
    assert jobs.pending_reasons == {("Resources", "gpu"): 1, ("JobHeldUser", "gpu"): 5}
    assert jobs.account_gpus == {"physics": 2, "chemistry": 3}
    assert jobs.account_cpus == {"physics": 1, "chemistry": 1}


def test_sinfo_fixture_from_the_lab():
    nodes, bad = parse_sinfo(_text("sinfo"), MARKS)
    assert bad == 0 and sorted(nodes) == ["gpu01", "gpu02"]
    g1 = nodes["gpu01"]
    assert (
        g1.state,
        g1.cpus_alloc,
        g1.cpus_idle,
        g1.cpus_total,
        g1.gpus_total,
        g1.gpus_alloc,
        g1.partitions,
    ) == ("mixed", 1, 7, 8, 4, 2, ("gpu",))


def test_sdiag_fixture_from_the_lab():
    v = parse_sdiag((FIX / "sdiag.txt").read_text())
    assert v["server_threads"] == 3 and v["jobs_submitted"] == 8
    assert {
        "main_last_cycle_us",
        "main_mean_cycle_us",
        "main_cycles",
        "backfill_cycles",
        "backfill_last_cycle_us",
    } <= set(v)


def test_gres_strings():
    assert gpu_count("gpu:4") == 4
    assert gpu_count("gpu:a100:2(S:0-1)") == 2
    assert gpu_count("gpu:2(IDX:0,2),gpu:v100:1(IDX:3),shard:0") == 3
    assert gpu_count("(null)") == 0
    assert tres_gpus("gres:gpu:2") == 2 and tres_gpus("gres/gpu:a100:1") == 1 and tres_gpus("N/A") == 0
    assert split_state("idle*") == ("idle", "*") and split_state("mixed+drain") == ("mixed+drain", "")


def test_sinfo_node_in_two_partitions_counted_once():
    text = "n1|idle|0/8/0/8|gpu:4|gpu:0|a*\nn1|idle|0/8/0/8|gpu:4|gpu:0|b\nn2|down*|0/0/8/8|(null)|gpu:0|a\n"
    nodes, bad = parse_sinfo(text.replace("|", MARKS.field).replace("\n", MARKS.end + "\n"), MARKS)
    assert bad == 0 and nodes["n1"].partitions == ("a", "b") and nodes["n2"].flags == "*"


def test_scrape_renders_the_lab_fixtures(tmp_path):
    text = SlurmCollector(env=_fake_slurm(tmp_path)).scrape()
    promtool_check(text)  # our own names follow the conventions: no lint accepted here
    jobs = _values(text, "slurm_jobs")
    assert jobs[(("account", "physics"), ("partition", "gpu"), ("state", "pending"))] == 5
    assert jobs[(("account", "chemistry"), ("partition", "gpu"), ("state", "running"))] == 1
    gpus = _values(text, "slurm_gpus")
    assert gpus[(("state", "allocated"),)] == 5 and gpus[(("state", "idle"),)] == 3
    assert _values(text, "slurm_gpus_configured")[()] == 8
    assert _values(text, "slurm_nodes")[(("state", "mixed"),)] == 2
    assert _values(text, "slurm_account_gpus_allocated")[(("account", "physics"),)] == 2
    assert all(v == 1 for v in _values(text, "slurm_up").values())
    assert _values(text, "slurm_scheduler_last_cycle_seconds")[()] < 1


def test_failing_and_hanging_commands_give_up_0_not_a_crash(tmp_path, caplog):
    env = _fake_slurm(
        tmp_path,
        squeue="echo 'squeue: error: slurm_load_jobs: Unable to contact' >&2; exit 1",
        sinfo="sleep 30",
    )
    col = SlurmCollector(env=env, timeout=1.0)
    start = time.monotonic()
    text = col.scrape()
    took = time.monotonic() - start
    assert took < 5, "the hanging sinfo must be killed at the timeout"
    promtool_check(text)
    up = _values(text, "slurm_up")
    assert up == {(("command", "squeue"),): 0, (("command", "sinfo"),): 0, (("command", "sdiag"),): 1}
    assert "slurm_jobs" not in parse_exposition(text) and "slurm_nodes" not in parse_exposition(text)
    assert "slurm_scheduler_threads" in parse_exposition(text)  # what did answer is still served
    assert "squeue failed: exit status 1: squeue: error: slurm_load_jobs: Unable to contact" in caplog.text
    assert "sinfo failed: timed out after 1s" in caplog.text
    text = col.scrape()
    errs = _values(text, "slurm_exporter_scrape_errors_total")
    assert errs[(("command", "squeue"),)] == 2 and errs[(("command", "sdiag"),)] == 0
    assert 1.0 <= _values(text, "slurm_exporter_scrape_duration_seconds")[()] < 5


def test_missing_slurm_commands(tmp_path):
    col = SlurmCollector(env={"PATH": str(tmp_path)}, timeout=1.0)
    assert all(v == 0 for v in _values(col.scrape(), "slurm_up").values())


def test_compact_formats_never_json():
    for argv in commands(new_marks()).values():
        assert "--json" not in argv and "--yaml" not in argv


# An account is whatever the job's owner typed (`sbatch --account`): with associations not enforced
# Slurm takes any string of up to 1024 bytes and only lower-cases it. Each one below, printed in a
# field of its own, would have moved the fields after it or made a record of its own.
SHIFTING = "chemistry|gpu|mallory|1|64|gres:gpu:8|none"  # the rest of the line charged to chemistry
FORGING = "x\nRUNNING|chemistry|gpu|bob|1|64|gres:gpu:8|None"  # a whole job of chemistry's
HOSTILE_ACCOUNTS = (
    "a|running|other",
    SHIFTING,
    FORGING,
    " chemistry",  # kept as printed, not stripped into chemistry's
    "x" + MARKS.field.lower() + "y" + MARKS.end.lower() + "\n",  # the marks, as Slurm would store them
)


def _job(account: str, gpus: int) -> list[str]:
    return ["RUNNING", account, "gpu", "mallory", "1", "1", f"gres:gpu:{gpus}", "None"]


def test_an_account_holding_separators_is_counted_under_its_own_name():
    fixture = _text("squeue")
    hostile = "".join(MARKS.field.join(_job(a, 1)) + MARKS.end + "\n" for a in HOSTILE_ACCOUNTS)
    jobs = parse_squeue(fixture + hostile, MARKS)
    assert jobs.bad_lines == 0 and jobs.lines == 8 + len(HOSTILE_ACCOUNTS)
    assert jobs.account_gpus == {"physics": 2, "chemistry": 3, **{a: 1 for a in HOSTILE_ACCOUNTS}}
    assert jobs.account_cpus == {"physics": 1, "chemistry": 1, **{a: 1 for a in HOSTILE_ACCOUNTS}}
    assert {a for (_, a, _) in jobs.by_state} == {"physics", "chemistry", *HOSTILE_ACCOUNTS}


def test_records_not_ended_by_the_marks_are_counted_bad_never_parsed():
    text = _text("squeue") + "RUNNING|chemistry|gpu|bob|1|64|gres:gpu:8|None\n"  # the old format
    jobs = parse_squeue(text, MARKS)
    assert jobs.bad_lines == 1 and jobs.account_gpus == {"physics": 2, "chemistry": 3}
    short = MARKS.field.join(_job("chemistry", 8)[:7]) + MARKS.end + "\n"  # a field short
    assert parse_squeue(short, MARKS) == parse_squeue("", MARKS)._replace(lines=1, bad_lines=1)


def test_scrape_charges_each_account_only_its_own_gpus(tmp_path):
    """Through the real format string and a stand-in squeue printing what Slurm would."""
    env = _fake_slurm(tmp_path, extra_jobs=[_job(SHIFTING, 1), _job(FORGING, 1)])
    text = SlurmCollector(env=env).scrape()
    promtool_check(text)
    gpus = _values(text, "slurm_account_gpus_allocated")
    assert gpus[(("account", "chemistry"),)] == 3  # the fixture's one job; 19 before the fix
    assert gpus[(("account", SHIFTING),)] == 1
    assert gpus[(("account", FORGING.replace("\n", "\\n")),)] == 1  # the exposition escapes \n
    assert _values(text, "slurm_account_cpus_allocated")[(("account", "chemistry"),)] == 1
    running = {k: v for k, v in _values(text, "slurm_jobs").items() if ("state", "running") in k}
    assert running[(("account", "chemistry"), ("partition", "gpu"), ("state", "running"))] == 1
    assert len(running) == 4


def test_marks_are_new_for_each_scrape_and_never_in_an_account():
    seen = {new_marks() for _ in range(50)}
    assert len(seen) == 50
    for m in seen:
        assert m.field != m.end and m.field.lower() != m.field and m.end.lower() != m.end
        assert "%" not in m.field + m.end and "," not in m.field + m.end and ":" not in m.field + m.end
    argv = commands(MARKS)
    assert argv["squeue"][-1] == "%T|VTEST|%a|VTEST|%P|VTEST|%u|VTEST|%D|VTEST|%C|VTEST|%b|VTEST|%r|VTEST."
    assert argv["sinfo"][-1] == (
        "NodeList:0|VTEST|,StateLong:0|VTEST|,CPUsState:0|VTEST|,Gres:0|VTEST|,GresUsed:0|VTEST|,Partition:0|VTEST."
    )


def test_each_scrape_passes_fresh_marks(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for cmd in ("squeue", "sinfo", "sdiag"):
        script = bindir / cmd
        script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/{cmd}.args\n')
        script.chmod(0o755)
    col = SlurmCollector(env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})
    col.scrape()
    col.scrape()
    first, second = (tmp_path / "squeue.args").read_text().splitlines()
    assert first != second and "|V" in first and "|V" in second
