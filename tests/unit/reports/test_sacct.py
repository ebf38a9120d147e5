"""Slurm's accounting as a second source: sacct's output read, hostlists expanded, GPU-hours cut at the
period's edges, the reconciliation with the meters; every hostile input refused in one line."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from vigil.basics.canonical import canonical_json
from vigil.installer.reports import ReportInputError, sacct
from vigil.installer.reports.sacct import SlurmJob, expand_hostlist, gpu_hours, parse, reconcile


def t(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


OCT, NOV = t("2026-10-01"), t("2026-11-01")
NOW = t("2026-11-05")


def line(
    job: str = "101",
    account: str = "physics",
    user: str = "ada",
    partition: str = "gpu",
    tres: str = "billing=8,cpu=8,gres/gpu=2,mem=64G,node=1",
    start: str = str(t("2026-10-02T00:00:00")),
    end: str = str(t("2026-10-02T10:00:00")),
    state: str = "COMPLETED",
    nodes: str = "gpu01",
) -> str:
    return "|".join((job, account, user, partition, tres, start, end, state, nodes))


def sacct_output(*lines: str) -> bytes:
    return "".join(f"{x}\n" for x in lines).encode()


def job(**kw: object) -> SlurmJob:
    base: dict[str, object] = {
        "job": "1",
        "account": "physics",
        "user": "ada",
        "partition": "gpu",
        "gpus": 1,
        "start": t("2026-10-02"),
        "end": t("2026-10-03"),
        "state": "COMPLETED",
        "nodes": ("gpu01",),
    }
    base.update(kw)
    return SlurmJob(**base)  # type: ignore[arg-type]


# -- reading sacct's output -------------------------------------------------------------------------


def test_sacct_lines_become_jobs_with_their_gpus_times_state_and_nodes() -> None:
    data = sacct_output(
        line(),
        line(
            job="102",
            tres="billing=4,cpu=4,gres/gpu:a100=2,gres/gpu:h100=1,mem=16G,node=2",
            end="Unknown",
            state="RUNNING",
            nodes="gpu[08-11],ctl01",
        ),
        line(job="103", tres="", start="Unknown", end="Unknown", state="PENDING", nodes="None assigned"),
        line(job="104", tres="billing=1,cpu=1,mem=1G,node=1", state="CANCELLED by 1000", nodes="cpu1"),
        line(
            job="105",
            tres="",
            start="None",
            end=str(t("2026-10-03")),
            state="CANCELLED by 0",
            nodes="None assigned",
        ),
    )
    jobs = parse(data, where="sacct.txt")
    assert [j.job for j in jobs] == ["101", "102", "103", "104", "105"]
    first, running, pending, cpu, never = jobs
    assert first == SlurmJob(
        "101", "physics", "ada", "gpu", 2, t("2026-10-02"), t("2026-10-02T10:00:00"), "COMPLETED", ("gpu01",)
    )
    assert (running.gpus, running.end, running.state) == (3, None, "RUNNING")  # typed entries summed
    assert running.nodes == ("gpu08", "gpu09", "gpu10", "gpu11", "ctl01")
    assert (pending.gpus, pending.start, pending.end, pending.nodes) == (0, None, None, ())
    assert (cpu.gpus, cpu.state) == (0, "CANCELLED")
    assert (never.start, never.end, never.state) == (None, t("2026-10-03"), "CANCELLED")


def test_the_untyped_gpu_count_wins_over_its_typed_parts_and_no_consume_prints_zero() -> None:
    tres = "cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G"
    assert parse(sacct_output(line(tres=tres)), where="f")[0].gpus == 2
    assert parse(sacct_output(line(tres="cpu=1,gres/gpu=0")), where="f")[0].gpus == 0
    # gres/gpumem and gres/gpuutil are other TRES, not GPUs
    assert parse(sacct_output(line(tres="cpu=1,gres/gpumem=40G,gres/gpuutil=90")), where="f")[0].gpus == 0


def test_empty_input_is_no_jobs_and_a_last_line_without_newline_is_read() -> None:
    assert parse(b"", where="f") == []
    assert [j.job for j in parse(line().encode(), where="f")] == ["101"]


# -- hostlists --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("gpu[01-03,07],ctl01", ("gpu01", "gpu02", "gpu03", "gpu07", "ctl01")),
        ("node[1-10]", tuple(f"node{i}" for i in range(1, 11))),
        ("gpu[08-11]", ("gpu08", "gpu09", "gpu10", "gpu11")),
        ("n[098-101]", ("n098", "n099", "n100", "n101")),
        ("a[1-2],b[3],c", ("a1", "a2", "b3", "c")),
        ("n[1-2]-ib", ("n1-ib", "n2-ib")),
        ("r[1-2]n[01-02]", ("r1n01", "r1n02", "r2n01", "r2n02")),
        ("None assigned", ()),
        ("", ()),
        ("ctl01", ("ctl01",)),
    ],
)
def test_hostlists_expand_as_slurm_reads_them(text: str, nodes: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == nodes


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("gpu[03-01]", "runs backwards"),
        ("gpu[01-[02]]", "nested brackets"),
        ("gpu[01-02", "a [ without its ]"),
        ("gpu01]", "a ] without its ["),
        ("gpu[]", "an empty part"),
        ("gpu[01,]", "an empty part"),
        ("gpu[01-]", "an empty part"),
        ("gpu[-3]", "not a number"),
        ("gpu[a-b]", "not a number"),
        ("gpu01,,gpu02", "an empty node name"),
        ("gpu01,", "an empty node name"),
        ("gpu 01", "white space"),
        ("n[0-100000]", "more than 100,000"),
        ("a[0-60000],b[0-60000]", "more than 100,000"),
        ("r[0-999]n[0-999]", "more than 100,000"),
    ],
)
def test_bad_hostlists_are_refused_saying_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=None) as exc:
        expand_hostlist(text)
    assert reason in str(exc.value)


def test_a_hostlist_bomb_is_refused_before_a_name_is_made() -> None:
    began = time.perf_counter()
    with pytest.raises(ValueError, match="more than 100,000 node names"):
        expand_hostlist("n[0-99999999]")
    with pytest.raises(ValueError, match="more than 100,000 node names"):
        expand_hostlist("n[0-99999]x[0-99999]y[0-99999]")
    assert time.perf_counter() - began < 1.0
    assert len(expand_hostlist("n[1-100000]")) == 100_000  # the bound itself is allowed


# -- hostile files: one line, naming the file, the line and the reason --------------------------------

GOOD = line(job="1")


def refusal(data: bytes) -> str:
    with pytest.raises(ReportInputError) as exc:
        parse(data, where="sacct.txt")
    text = str(exc.value)
    assert "\n" not in text and len(text) < 600
    return text


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (line(account="victim|gpu"), "10 fields, not 9"),
        ("101|physics|ada", "3 fields, not 9"),
        ("", "1 fields, not 9"),
        (line(account="a" * 1025), "Account is 1,025 characters long"),
        (line(nodes="n" * 2000), "NodeList is 2,000 characters long"),
        (line(account="evil\x1b[2K"), "Account holds the control character U+001B"),
        (line(user="ada\r"), "User holds the control character U+000D"),
        (line(partition="gpu\x85"), "Partition holds the control character U+0085"),
        (line(account="a\u2028b"), "Account holds the control character U+2028"),
        (line(tres="gres/gpu=100001"), "gres/gpu='100001' is more than 100,000 GPUs"),
        (line(tres="gres/gpu:a100=60000,gres/gpu:h100=60000"), "add up to more than 100,000 GPUs"),
        (line(tres="gres/gpu=-1"), "gres/gpu='-1' is negative"),
        (line(tres="gres/gpu=1.5"), "gres/gpu='1.5' is not a whole number"),
        (line(tres="gres/gpu=two"), "is not a whole number"),
        (line(tres="gres/gpu="), "is not a whole number"),
        (line(tres="gres/gpu=1,gres/gpu=4"), "gres/gpu appears twice"),
        (line(tres="cpu=1,junk"), "is not name=count"),
        (line(start="2026-10-02T00:00:00"), "Start '2026-10-02T00:00:00' is not seconds since the epoch"),
        (line(end="1.5"), "End '1.5' is not seconds since the epoch"),
        (line(start="-1"), "Start '-1' is before 1970"),
        (line(end="253402300800"), "End '253402300800' is after the year 9999"),
        (line(start="", end="Unknown"), "Start '' is not seconds"),
        (line(start=str(t("2026-10-03")), end=str(t("2026-10-02"))), "is before Start"),
        (line(job="101.batch"), "not a job allocation's number (a job step?"),
        (line(job="101_4"), "not a job allocation's number"),
        (line(state=""), "State is empty"),
        (line(nodes="gpu[03-01]"), "NodeList: the range '03-01'"),
        (line(nodes="n[0-99999999]"), "NodeList: expands to more than 100,000 node names"),
    ],
)
def test_a_hostile_line_is_refused_naming_the_line_and_reason(bad: str, reason: str) -> None:
    text = refusal(sacct_output(GOOD, bad))
    assert text.startswith("sacct.txt: line 2: ")
    assert reason in text


def test_a_duplicate_job_is_refused_naming_both_lines() -> None:
    text = refusal(sacct_output(line(job="7"), line(job="8"), line(job="7", account="other")))
    assert text.startswith("sacct.txt: line 3: JobIDRaw 7 is on line 1 too")


def test_bytes_that_are_not_utf8_are_refused_naming_the_line_and_byte() -> None:
    good = sacct_output(GOOD)
    text = refusal(good + line(account="caf").encode().replace(b"caf", b"caf\xff") + b"\n")
    assert text.startswith("sacct.txt: line 2: the byte 0xff at byte ")
    assert "is not UTF-8" in text


def test_a_lone_surrogate_is_refused_naming_the_line() -> None:
    bad = line(user="x").encode().replace(b"|x|", b"|x\xed\xa0\x80|")
    text = refusal(sacct_output(GOOD) + bad + b"\n")
    assert text.startswith("sacct.txt: line 2: a lone surrogate (U+D800) at byte ")


def test_more_than_two_million_lines_are_refused_before_any_is_read() -> None:
    # 2,000,001 lines of one byte each: every one would be refused for its fields, so the count
    # must come first
    text = refusal(b"\n" * 2_000_001)
    assert text == "sacct.txt: line 2,000,001: more than 2,000,000 lines (jobs); refused"
    assert [j.job for j in parse(sacct_output(GOOD) * 1, where="f")] == ["1"]


def test_more_than_512_mib_is_refused_before_decoding() -> None:
    data = bytes(sacct.MAX_BYTES + 1)  # NUL bytes: decoding them would refuse a control character
    text = refusal(data)
    assert text == "sacct.txt: is 536,870,913 bytes, more than 512 MiB (the most read of it); refused"


def test_a_refusal_leaves_no_partial_result() -> None:
    with pytest.raises(ReportInputError):
        parse(sacct_output(GOOD, line(job="x")), where="f")
    # the same good line alone still reads: the parser keeps nothing between calls
    assert len(parse(sacct_output(GOOD), where="f")) == 1


# -- GPU-hours --------------------------------------------------------------------------------------


def test_gpu_hours_are_cut_at_both_edges_of_the_period() -> None:
    across_start = job(gpus=2, start=t("2026-09-30T22:00:00"), end=t("2026-10-01T03:00:00"))
    assert gpu_hours(across_start, OCT, NOV, NOW) == 2 * 3
    across_end = job(gpus=4, start=t("2026-10-31T23:30:00"), end=t("2026-11-01T05:00:00"))
    assert gpu_hours(across_end, OCT, NOV, NOW) == 4 * 0.5
    inside = job(gpus=1, start=t("2026-10-10T00:00:00"), end=t("2026-10-10T00:45:00"))
    assert gpu_hours(inside, OCT, NOV, NOW) == 0.75
    before = job(start=t("2026-09-01"), end=t("2026-09-02"))
    assert gpu_hours(before, OCT, NOV, NOW) == 0


def test_a_running_job_counts_up_to_now_and_a_pending_one_not_at_all() -> None:
    now = t("2026-10-15T12:00:00")
    running = job(gpus=8, start=t("2026-10-15T00:00:00"), end=None, state="RUNNING")
    assert gpu_hours(running, OCT, NOV, now) == 8 * 12
    pending = job(gpus=8, start=None, end=None, state="PENDING")
    assert gpu_hours(pending, OCT, NOV, now) == 0


# -- the reconciliation ------------------------------------------------------------------------------


def test_accounts_get_slurms_figures_beside_the_meters_and_differing_jobs_are_listed() -> None:
    jobs = [
        # agrees: 10 GPU-hours both ways
        job(job="1", account="physics", gpus=1, start=t("2026-10-02"), end=t("2026-10-02T10:00:00")),
        # the meters lost half of it (an exporter down)
        job(
            job="2",
            account="physics",
            user="bob",
            gpus=2,
            start=t("2026-10-03"),
            end=t("2026-10-03T05:00:00"),
        ),
        # in Slurm, metered 0
        job(
            job="10",
            account="chem",
            gpus=4,
            start=t("2026-10-04"),
            end=t("2026-10-04T01:00:00"),
            nodes=("gpu07",),
        ),
        # runs across the period's end: both cut, so they agree
        job(job="3", account="chem", gpus=2, start=t("2026-10-31T23:00:00"), end=t("2026-11-01T02:00:00")),
        # still running, the meters behind
        job(job="4", account="bio", gpus=1, start=t("2026-10-30T00:00:00"), end=None, state="RUNNING"),
        # pending, nothing in either
        job(job="5", account="bio", gpus=8, start=None, end=None, state="PENDING", nodes=()),
    ]
    metered = {"1": 10.0, "2": 5.0, "3": 2.0, "4": 24.0, "99": 3.5}
    r = reconcile(jobs, metered, OCT, NOV, NOW)
    doc: Any = r.to_json()
    assert doc["accounts"] == [
        {
            "account": "bio",
            "slurm_gpu_hours": 48.0,
            "metered_gpu_hours": 24.0,
            "difference_gpu_hours": -24.0,
            "jobs": 1,
        },
        {
            "account": "chem",
            "slurm_gpu_hours": 6.0,
            "metered_gpu_hours": 2.0,
            "difference_gpu_hours": -4.0,
            "jobs": 2,
        },
        {
            "account": "physics",
            "slurm_gpu_hours": 20.0,
            "metered_gpu_hours": 15.0,
            "difference_gpu_hours": -5.0,
            "jobs": 2,
        },
    ]
    assert [
        (j["job"], j["slurm_gpu_hours"], j["metered_gpu_hours"], j["state"], j["reason"]) for j in doc["jobs"]
    ] == [
        ("2", 10.0, 5.0, "COMPLETED", None),
        ("4", 48.0, 24.0, "RUNNING", "job still running"),
        ("10", 4.0, 0.0, "COMPLETED", None),
        ("99", 0.0, 3.5, "not in Slurm's accounting", None),
    ]
    assert doc["jobs"][2] == {
        "job": "10",
        "account": "chem",
        "user": "ada",
        "partition": "gpu",
        "nodes": ["gpu07"],
        "state": "COMPLETED",
        "slurm_gpu_hours": 4.0,
        "metered_gpu_hours": 0.0,
        "difference_gpu_hours": -4.0,
        "reason": None,
    }
    assert doc["jobs"][3]["account"] == "" and doc["jobs"][3]["nodes"] == []
    assert doc["totals"] == {
        "slurm_gpu_hours": 74.0,
        "metered_gpu_hours": 41.0,
        "metered_not_in_slurm_gpu_hours": 3.5,
        "jobs": 6,
        "jobs_differing": 4,
    }
    assert doc["period"] == {"start": "2026-10-01T00:00:00Z", "end": "2026-11-01T00:00:00Z"}
    # the caller fills a reason it knows
    r.jobs[0].reason = "exporter down on gpu01"
    again: Any = r.to_json()
    assert again["jobs"][0]["reason"] == "exporter down on gpu01"


def test_a_difference_within_the_meters_minute_resolution_or_the_threshold_is_not_listed() -> None:
    # one hour on 4 GPUs: the floor is 2 minutes x 4 GPUs = 0.1333 GPU-hours, the threshold 5 % = 0.2
    one_hour = job(job="1", gpus=4, start=t("2026-10-02"), end=t("2026-10-02T01:00:00"))
    assert reconcile([one_hour], {"1": 4 - 0.19}, OCT, NOV, NOW).jobs == []
    assert [j.job for j in reconcile([one_hour], {"1": 4 - 0.21}, OCT, NOV, NOW).jobs] == ["1"]
    # a 3-minute job on 4 GPUs (0.2 GPU-hours): 5 % is 0.01, the floor 0.1333 decides
    short = job(job="2", gpus=4, start=t("2026-10-02"), end=t("2026-10-02T00:03:00"))
    assert reconcile([short], {"2": 0.2 - 0.13}, OCT, NOV, NOW).jobs == []
    assert [j.job for j in reconcile([short], {"2": 0.2 - 0.14}, OCT, NOV, NOW).jobs] == ["2"]
    # the floor scales with the job's GPUs, and a job without GPUs has none: any metering is listed
    cpu_only = job(job="3", gpus=0)
    assert [j.job for j in reconcile([cpu_only], {"3": 0.05}, OCT, NOV, NOW).jobs] == ["3"]


def test_jobs_and_accounts_are_in_a_deterministic_order_whatever_the_input_order() -> None:
    jobs = [job(job=str(n), account=f"acct{n % 3}", gpus=1) for n in (12, 3, 100, 7, 20)]
    a: Any = reconcile(jobs, {}, OCT, NOV, NOW).to_json()
    b = reconcile(list(reversed(jobs)), {}, OCT, NOV, NOW).to_json()
    assert canonical_json(a) == canonical_json(b)
    assert [j["job"] for j in a["jobs"]] == ["3", "7", "12", "20", "100"]
    assert [x["account"] for x in a["accounts"]] == ["acct0", "acct1", "acct2"]
    assert sacct.job_order("9") < sacct.job_order("10") < sacct.job_order("10a")


def test_a_parsed_file_reconciles_end_to_end() -> None:
    data = sacct_output(
        line(
            job="41",
            tres="cpu=4,gres/gpu:a100=2",
            start=str(t("2026-10-05")),
            end=str(t("2026-10-05T02:00:00")),
        ),
        line(job="42", tres="", start="Unknown", end="Unknown", state="PENDING", nodes="None assigned"),
    )
    r = reconcile(parse(data, where="f"), {"41": 4.0}, OCT, NOV, NOW)
    doc: Any = r.to_json()
    assert r.jobs == [] and doc["totals"]["slurm_gpu_hours"] == 4.0


@pytest.mark.parametrize(
    ("kwargs", "metered", "reason"),
    [
        ({"threshold": 1.5}, {}, "threshold 1.5"),
        ({"floor_h": -1.0}, {}, "floor_h -1.0"),
        ({}, {"1": float("nan")}, "metered GPU-hours of job '1' are nan"),
        ({}, {"1": -2.0}, "are -2.0"),
    ],
)
def test_reconcile_refuses_figures_that_cannot_be_compared(
    kwargs: dict[str, float], metered: dict[str, float], reason: str
) -> None:
    with pytest.raises(ValueError) as exc:
        reconcile([job()], metered, OCT, NOV, NOW, **kwargs)
    assert reason in str(exc.value)


def test_reconcile_refuses_a_job_listed_twice() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        reconcile([job(job="1"), job(job="1")], {}, OCT, NOV, NOW)


# -- the whole file's node names --------------------------------------------------------------------


def test_a_node_name_longer_than_a_dns_name_is_refused_before_it_is_made() -> None:
    text = refusal(sacct_output(GOOD, line(nodes="a" * 250 + "[1-100000]")))
    assert text.startswith("sacct.txt: line 2: NodeList: the node name ")
    assert "gives names of up to 256 characters (the most is 255)" in text
    assert expand_hostlist("a" * 249 + "[1-100000]")[-1] == "a" * 249 + "100000"


def test_the_node_names_made_for_one_file_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # each line alone is within the 100,000 of one NodeList; together they are not (with the real
    # bound, 2,000,000 such lines would be 2e11 names)
    monkeypatch.setattr(sacct, "MAX_FILE_HOSTS", 250_000)
    lines = [line(job=str(i), nodes=f"r{i}n[1-100000]") for i in (1, 2, 3)]
    text = refusal(sacct_output(*lines))
    assert text.startswith("sacct.txt: line 3: NodeList: the file's NodeLists expand to more than 250,000")
    monkeypatch.setattr(sacct, "MAX_FILE_HOSTS", 5_000_000)
    monkeypatch.setattr(sacct, "MAX_FILE_HOST_CHARS", 1_000_000)
    text = refusal(sacct_output(*lines))
    assert text.startswith("sacct.txt: line 2: NodeList: the file's NodeLists expand to more than")
    assert "or 1,000,000 characters of them" in text


def test_a_nodelist_seen_before_is_not_made_again() -> None:
    began = time.perf_counter()
    jobs = parse(sacct_output(*(line(job=str(i), nodes="n[1-100000]") for i in range(1, 301))), where="f")
    assert time.perf_counter() - began < 5.0  # 300 x 100,000 names made would take minutes
    assert len(jobs) == 300 and all(j.nodes is jobs[0].nodes for j in jobs)
    assert len(jobs[0].nodes) == 100_000


FRESH = "8f3a1c0d9e7b6a52c4d1e0f9"  # as the documented command makes it: 24 hex digits
HEADER = FRESH.join(sacct.FIELDS)


def fresh_line(**kw: str) -> str:
    return line(**kw).replace("|", FRESH)


#: what users of the lab's Slurm gave `sbatch --account`: a forged line after a line break, and one
#: after the default delimiter (tests/lab/test_exporters.py submits both)
FORGING = (
    "xtest-victim|gpu|alice|1|64|gres:gpu:4|none",
    "xtest-forged\n999|physics|ada|gpu|gres/gpu=8|1759363200|1759449600|COMPLETED|gpu01",
)


def test_with_a_fresh_delimiter_an_account_holding_separators_and_forged_lines_is_its_own() -> None:
    data = sacct_output(
        HEADER,
        fresh_line(job="101"),
        FRESH.join(
            ("102", FORGING[0], "bob", "gpu", "gres/gpu=1", "1759363200", "1759366800", "COMPLETED", "gpu02")
        ),
        FRESH.join(
            ("103", FORGING[1], "bob", "gpu", "gres/gpu=1", "1759363200", "1759366800", "COMPLETED", "gpu02")
        ),
        fresh_line(job="104", account="chemistry"),
    )
    jobs = sacct.parse(data, where="f")
    assert [(j.job, j.account, j.user, j.gpus) for j in jobs] == [
        ("101", "physics", "ada", 2),
        ("102", FORGING[0], "bob", 1),
        ("103", FORGING[1], "bob", 1),
        ("104", "chemistry", "ada", 2),
    ]
    # no job 999: the forged line is the account of job 103, whose line went on after the break
    assert "999" not in {j.job for j in jobs}


def test_with_sacct_s_default_delimiter_the_same_accounts_are_refused_naming_the_line() -> None:
    for header in ((), ("|".join(sacct.FIELDS),)):
        data = sacct_output(
            *header,
            line(job="101"),
            "|".join(
                ("102", FORGING[0], "bob", "gpu", "gres/gpu=1", "1759363200", "1759366800", "COMPLETED", "x")
            ),
        )
        msg = refusal(data)
        assert msg.startswith(f"sacct.txt: line {2 + len(header)}: 15 fields, not 9 "), msg
        assert "run sacct with a --delimiter of its own and its header" in msg, msg


def test_a_short_delimiter_is_not_taken_as_fresh() -> None:
    short = "#"
    data = sacct_output(
        short.join(sacct.FIELDS),
        line(job="101").replace("|", short),
        short.join(("103", "a\nb", "bob", "gpu", "gres/gpu=1", "1759363200", "1759366800", "COMPLETED", "x")),
    )
    assert refusal(data).startswith("sacct.txt: line 3: 2 fields, not 9 ")


@pytest.mark.parametrize(
    "header",
    [
        FRESH.join(reversed(sacct.FIELDS[:2])) + FRESH + FRESH.join(sacct.FIELDS[2:]),
        FRESH.join(sacct.FIELDS[:-1]),
        FRESH.join(sacct.FIELDS) + FRESH + "JobName",
        "JobIDRaw" + FRESH + "Account" + FRESH[:-1] + FRESH.join(("",) + sacct.FIELDS[2:]),
        "JobIDRaw\x1b[2J" + "\x1b[2J".join(sacct.FIELDS[1:]),
    ],
)
def test_a_header_that_is_not_the_nine_fields_between_one_delimiter_is_refused(header: str) -> None:
    # refused at the header (a first line not starting with JobIDRaw is a job's line, refused too)
    assert refusal(sacct_output(header, fresh_line())).startswith("sacct.txt: line 1: ")


def test_a_line_going_on_over_too_many_lines_is_refused_naming_where_it_began() -> None:
    account = "x" + "\n" * sacct.MAX_CONTINUED_LINES
    data = sacct_output(HEADER, fresh_line(job="101"), fresh_line(job="102", account=account))
    assert refusal(data) == (
        f"sacct.txt: line 3: a job's line goes on over more than {sacct.MAX_CONTINUED_LINES} lines; refused"
    )
    # fewer breaks are one account; a last line left short at the end is refused as short
    ok = sacct.parse(sacct_output(HEADER, fresh_line(job="102", account="x\n\ny")), where="f")
    assert [j.account for j in ok] == ["x\n\ny"]
    assert refusal(sacct_output(HEADER, FRESH.join(("105", "cut")))).startswith(
        "sacct.txt: line 2: 2 fields, not 9"
    )
