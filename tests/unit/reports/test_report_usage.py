"""Which source each hour is read from, what is refused, and the CLI's contract (no VictoriaMetrics)."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from typing import Any

import pytest

from vigil.installer.cli import main
from vigil.installer.reports import ReportInputError, collect, load_allocations, parse_period, usage_document
from vigil.installer.reports.usage import RECORDED_PROBE


class FakeVM:
    """Answers the probes from sets of hour ends; every value query with one fixed answer per source."""

    name = "VictoriaMetrics fake"

    def __init__(self, recorded: set[int], raw: set[int]) -> None:
        self.recorded, self.raw = recorded, raw
        self.queries: list[tuple[str, int]] = []

    def query_range(self, expr: str, start: int, end: int, step: int) -> list[Any]:
        hours = self.recorded if expr == RECORDED_PROBE else self.raw
        return [({}, [(t, 1.0) for t in range(start, end + 1, step) if t in hours])]

    def query(self, expr: str, at: int) -> list[Any]:
        self.queries.append((expr, at))
        if expr.startswith("count(count_over_time"):
            return []
        src = "recorded" if "account_user:" in expr or "job:gpu_hours" in expr else "raw"
        labels = {"account": "physics", "user": "alice", "hpc_job": f"{src}-{at}"}
        return [(labels, 1.0)]


def hours(period: str) -> list[int]:
    p = parse_period(period)
    return [p.start + (i + 1) * 3600 for i in range(p.hours)]


def test_recorded_hours_are_read_from_the_rules_and_the_rest_from_raw() -> None:
    ends = hours("2025-10")
    vm = FakeVM(recorded=set(ends[360:]), raw=set(ends[:400]))
    usage = collect(vm, parse_period("2025-10"))  # type: ignore[arg-type]
    assert (usage.recorded_hours, usage.raw_hours, usage.hours_without_data) == (384, 360, 0)
    assert [r[0] for r in usage.runs] == ["raw", "recorded"]
    assert usage.runs[0][2] == usage.runs[1][1] == ends[359]


def test_hours_without_any_data_are_counted_not_zeroed() -> None:
    ends = hours("2025-10")
    usage = collect(FakeVM(recorded=set(ends[:100]), raw=set()), parse_period("2025-10"))  # type: ignore[arg-type]
    assert (usage.recorded_hours, usage.hours_without_data) == (100, 644)


def test_a_period_without_data_is_refused() -> None:
    with pytest.raises(ReportInputError) as exc:
        collect(FakeVM(set(), set()), parse_period("2025-10"))  # type: ignore[arg-type]
    assert exc.value.obj == "period 2025-10" and "no GPU data" in exc.value.reason


def test_long_raw_runs_are_read_in_chunks_the_server_accepts() -> None:
    ends = hours("2025")
    vm = FakeVM(recorded=set(), raw=set(ends))
    usage = collect(vm, parse_period("2025"))  # type: ignore[arg-type]
    assert all(hi - lo <= 20 * 86400 for _, lo, hi in usage.runs)
    assert usage.runs[0][1] == ends[0] - 3600 and usage.runs[-1][2] == ends[-1]


def test_account_filter_quotes_the_name() -> None:
    ends = hours("2025-10")
    vm = FakeVM(recorded=set(ends), raw=set())
    collect(vm, parse_period("2025-10"), account='we"ird\\')  # type: ignore[arg-type]
    assert any('{account="we\\"ird\\\\"}' in q for q, _ in vm.queries)


def test_allocations_give_awarded_and_balance(tmp_path: Path) -> None:
    ends = hours("2025-10")
    usage = collect(FakeVM(recorded=set(ends), raw=set()), parse_period("2025-10"))  # type: ignore[arg-type]
    alloc = tmp_path / "alloc.yaml"
    alloc.write_text("period: 2025-10\naccounts:\n  physics: 1000\n  biology: 50\n")
    awarded, digest = load_allocations(alloc, parse_period("2025-10"))
    doc = usage_document(usage, vm_url="u", allocations=awarded, allocations_sha256=digest)
    rows = {a["account"]: a for a in doc["accounts"]}
    assert rows["physics"]["awarded_gpu_hours"] == 1000.0
    assert rows["physics"]["balance_gpu_hours"] == 1000.0 - rows["physics"]["gpu_hours"]
    assert rows["biology"]["gpu_hours"] == 0.0 and rows["biology"]["balance_gpu_hours"] == 50.0
    alloc.write_text("period: 2025-11\naccounts: {physics: 1}\n")
    with pytest.raises(ReportInputError, match="not the report's 2025-10"):
        load_allocations(alloc, parse_period("2025-10"))
    alloc.write_text("accounts: {physics: .nan}\n")
    with pytest.raises(ReportInputError, match="must be a number"):
        load_allocations(alloc, parse_period("2025-10"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VIGIL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VIGIL_VM_URL", raising=False)
    return tmp_path / "home"


def test_an_unreachable_victoriametrics_fails_one_line_and_stores_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["report", "usage", "--period", "2025-10", "--vm", url]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"FAIL: VictoriaMetrics {url}: unreachable")
    assert not (home / "reports" / "objects").exists()
    assert main(["report", "list"]) == 0


def test_bad_input_fails_before_any_query(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    site = tmp_path / "site.yaml"
    site.write_text("meters:\n  it_energy:\n    - {selector: x, unit: BTU}\n")
    assert main(["report", "energy", "--year", "2025", "--site", str(site), "--vm", url]) == 1
    assert capsys.readouterr().err.strip() == (
        f"FAIL: {site}: meters.it_energy[0].unit: unknown unit 'BTU' (known: J, mJ, Wh, kWh)"
    )
    assert main(["report", "usage", "--period", "2025-13", "--vm", url]) == 1
    assert "FAIL: --period 2025-13: month 13" in capsys.readouterr().err
    assert main(["report", "usage", "--period", "2025-10", "--vm", "file:///etc/passwd"]) == 1
    assert "FAIL: --vm file:///etc/passwd: not an http" in capsys.readouterr().err
    assert main(["report", "usage", "--period", "2025-10", "--format", "docx", "--vm", url]) == 1
    assert "FAIL: --format docx: unknown format (known: json, csv, pdf)" in capsys.readouterr().err
    assert not (home / "reports").exists()


def test_without_vm_and_without_a_deploy_the_error_says_what_to_do(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "usage", "--period", "2025-10"]) == 1
    assert "FAIL: --vm: not given, and no successful deploy is recorded here" in capsys.readouterr().err


def test_verify_of_a_missing_or_unsigned_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "r.json"
    f.write_text("{}")
    assert main(["report", "verify", str(f)]) == 1
    assert "no report key on this host" in capsys.readouterr().err
    pub = tmp_path / "x.pub"
    pub.write_text("untrusted comment: x\nRWQ=\n")
    assert main(["report", "verify", str(f), "--pub", str(pub)]) == 1
    assert capsys.readouterr().err.startswith(f"FAIL: {pub}")


def test_charges_that_do_not_add_up_to_the_gpus_are_said_in_the_report() -> None:
    """Charged + unallocated must equal measured within 0.5 %: a report where the accounts were
    charged more than the GPUs used says so (the CLI prints it as a WARN line) rather than hiding it."""
    from vigil.installer.reports import Usage, imbalance

    usage = Usage(parse_period("2025-10"))
    usage.joules[("physics", "alice")] = 7.2e6
    usage.gpu_hours[("physics", "alice")] = 2.0
    usage.charged_joules, usage.unallocated_joules, usage.cluster_joules = 7.2e6, 0.0, 3.6e6
    usage.charged_gpu_hours, usage.unallocated_gpu_hours, usage.cluster_gpu_hours = 2.0, 0.0, 2.0
    doc = usage_document(usage, vm_url="u")
    c = doc["cluster"]
    assert c["conservation"] == {
        "tolerance": 0.005,
        "gpu_energy_off": 1.0,
        "gpu_hours_off": 0.0,
        "holds": False,
    }
    assert imbalance(doc) == (
        "GPU energy: charged 2.0 + unallocated 0.0 vs measured 1.0 kWh (+100.00 %); "
        "GPU-hours: charged 2.0 + unallocated 0.0 vs measured 2.0 GPU-hours (+0.00 %)"
    )
    # within 0.5 %: holds, nothing to say
    usage.cluster_joules = 7.2e6 * 1.004
    assert imbalance(usage_document(usage, vm_url="u")) is None


def test_each_account_is_broken_down_by_partition_and_the_report_by_gpu_model() -> None:
    """Per (account, partition): GPU-hours, active GPU-hours, energy and jobs; per GPU model the same
    across the accounts; each adding up to the account's and the report's totals."""
    from vigil.installer.reports import Usage
    from vigil.installer.reports.render import usage_csv

    usage = Usage(parse_period("2025-10"))
    h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
    for cell, hours, active, joules in (
        (("physics", "alice", "gpu", h100), 10.0, 4.0, 3.6e7),
        (("physics", "alice", "gpu-a100", a100), 3.0, 3.0, 7.2e6),
        (("physics", "bob", "gpu", h100), 2.0, 0.0, 3.6e6),
        (("chemistry", "carol", "gpu-a100", a100), 6.0, 1.5, 1.08e7),
    ):
        usage.gpu_hours[cell[:2]] += hours
        usage.joules[cell[:2]] += joules
        usage.active_hours[cell[:2]] += active
        usage.cell_hours[cell] += hours
        usage.cell_active_hours[cell] += active
        usage.cell_joules[cell] += joules
    for acct, user, part, job in (
        ("physics", "alice", "gpu", "1"),
        ("physics", "alice", "gpu-a100", "2"),
        ("physics", "bob", "gpu", "3"),
        ("chemistry", "carol", "gpu-a100", "4"),
    ):
        usage.jobs[(acct, user)].add(job)
        usage.partition_jobs[(acct, part)].add(job)
    doc = usage_document(usage, vm_url="u")
    physics = next(a for a in doc["accounts"] if a["account"] == "physics")
    assert (physics["gpu_hours"], physics["active_gpu_hours"]) == (15.0, 7.0)
    assert physics["partitions"] == [
        {"partition": "gpu", "gpu_hours": 12.0, "active_gpu_hours": 4.0, "gpu_energy_kwh": 11.0, "jobs": 2},
        {
            "partition": "gpu-a100",
            "gpu_hours": 3.0,
            "active_gpu_hours": 3.0,
            "gpu_energy_kwh": 2.0,
            "jobs": 1,
        },
    ]
    assert doc["gpu_models"] == [
        {"model": a100, "gpu_hours": 9.0, "active_gpu_hours": 4.5, "gpu_energy_kwh": 5.0},
        {"model": h100, "gpu_hours": 12.0, "active_gpu_hours": 4.0, "gpu_energy_kwh": 11.0},
    ]
    assert doc["totals"]["active_gpu_hours"] == 8.5 and doc["totals"]["gpu_hours"] == 21.0
    assert doc["active"] == {
        "field": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "fallback_field": "DCGM_FI_DEV_GPU_UTIL",
        "threshold": 0.1,
    }
    # one account's report: the models of its own charges only
    only = usage_document(usage, vm_url="u", account="chemistry")
    assert only["gpu_models"] == [
        {"model": a100, "gpu_hours": 6.0, "active_gpu_hours": 1.5, "gpu_energy_kwh": 3.0}
    ]
    lines = usage_csv(doc).decode().splitlines()
    assert lines[0] == "period,account,user,gpu_hours,gpu_energy_kwh,jobs,partition,active_gpu_hours"
    assert "2025-10,physics,,3.0,2.0,1,gpu-a100,3.0" in lines
    assert lines[lines.index("") + 1] == "period,gpu_model,gpu_hours,active_gpu_hours,gpu_energy_kwh"
    assert f"2025-10,{h100},12.0,4.0,11.0" in lines
    # a partition or model named like a formula is text to a spreadsheet
    usage.cell_hours[("physics", "alice", "=HYPERLINK(1)", "@SUM(1)")] = 1.0
    lines = usage_csv(usage_document(usage, vm_url="u")).decode().splitlines()
    assert "2025-10,physics,,1.0,0.0,0,'=HYPERLINK(1),0.0" in lines
    assert "2025-10,'@SUM(1),1.0,0.0,0.0" in lines


def test_the_queries_break_down_by_partition_and_model_on_both_paths() -> None:
    """Both sources are asked for the same labels, so recorded and raw hours add up cell by cell."""
    from vigil.installer.reports.usage import raw_queries, recorded_queries

    by = "sum by (account, user, partition, modelName) ("
    for queries, outer in ((recorded_queries(7200, ""), by), (raw_queries(7200, ""), f"sum_over_time(({by}")):
        for name in ("gpu_hours", "joules", "active_hours"):
            assert queries[name].startswith(outer), name
        assert queries["jobs"].startswith("group by (account, user, partition, hpc_job) (")


def breakdown_usage() -> Any:
    from vigil.installer.reports import Usage

    usage = Usage(parse_period("2025-10"))
    for cell, hours in (
        (("physics", "alice", "gpu", "H100"), 10.0),
        (("physics", "alice", "gpu-a100", "A100"), 3.0),
        (("physics", "bob", "debug", "H100"), 2.0),
        (("chemistry", "carol", "gpu-a100", "A100"), 6.0),
    ):
        usage.gpu_hours[cell[:2]] += hours
        usage.cell_hours[cell] += hours
        usage.partition_jobs[(cell[0], cell[2])].add(cell[1])
    return usage


def test_billing_weights_give_billed_gpu_hours_per_account_and_partition(tmp_path: Path) -> None:
    from vigil.installer.reports import load_billing
    from vigil.installer.reports.render import usage_csv

    billing = tmp_path / "billing.yaml"
    billing.write_text("partitions:\n  gpu: 1.0\n  gpu-a100: 2.5\ndefault: 0.5\n")
    weights = load_billing(billing)
    doc = usage_document(breakdown_usage(), vm_url="u", billing=weights)
    rows = {a["account"]: a for a in doc["accounts"]}
    # physics: 10 x 1.0 + 3 x 2.5 + 2 (debug, not named: the default) x 0.5
    assert rows["physics"]["billed_gpu_hours"] == 18.5 and rows["chemistry"]["billed_gpu_hours"] == 15.0
    parts = {
        p["partition"]: (p["billing_weight"], p["billed_gpu_hours"]) for p in rows["physics"]["partitions"]
    }
    assert parts == {"debug": (0.5, 1.0), "gpu": (1.0, 10.0), "gpu-a100": (2.5, 7.5)}
    assert doc["totals"]["billed_gpu_hours"] == 33.5
    assert doc["billing"] == {
        "sha256": hashlib.sha256(billing.read_bytes()).hexdigest(),
        "default_weight": 0.5,
    }
    lines = usage_csv(doc).decode().splitlines()
    assert lines[0].endswith(",partition,active_gpu_hours,billing_weight,billed_gpu_hours")
    assert "2025-10,physics,,3.0,0.0,1,gpu-a100,0.0,2.5,7.5" in lines
    # without a default, a partition not named bills at 1.0; without --billing, no billing keys at all
    billing.write_text("partitions: {gpu-a100: 2}\n")
    doc = usage_document(breakdown_usage(), vm_url="u", billing=load_billing(billing))
    assert next(a for a in doc["accounts"] if a["account"] == "physics")["billed_gpu_hours"] == 18.0
    plain = usage_document(breakdown_usage(), vm_url="u")
    assert "billing" not in plain and "billed_gpu_hours" not in plain["totals"]
    assert all("billed_gpu_hours" not in a for a in plain["accounts"])


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        (
            "partitions: {gpu: 1}\nweights: {gpu: 2}\n",
            "'weights'",
            "unknown key (known: partitions, default)",
        ),
        ("partitions: {gpu: -1}\n", "partitions.gpu", "must be a weight from 0 to 1e6, not -1"),
        ("partitions: {gpu: .nan}\n", "partitions.gpu", "must be a number, not NaN"),
        ("partitions: {gpu: .inf}\n", "partitions.gpu", "must be a weight from 0 to 1e6, not inf"),
        ("partitions: {gpu: 1.0e+300}\n", "partitions.gpu", "must be a weight from 0 to 1e6, not 1e+300"),
        ("partitions: {gpu: 1000001}\n", "partitions.gpu", "must be a weight from 0 to 1e6, not 1000001"),
        ("partitions: {gpu: true}\n", "partitions.gpu", "must be a number (a weight, 0 to 1e6), not True"),
        ("partitions: {gpu: '2'}\n", "partitions.gpu", "must be a number (a weight, 0 to 1e6), not '2'"),
        ("partitions: {gpu: 1}\ndefault: -0.5\n", "default", "must be a weight from 0 to 1e6, not -0.5"),
        ("partitions: {1: 1}\n", "partitions.1", "partition names are text of 1 to 256 characters"),
        (f"partitions: {{{'p' * 300}: 1}}\n", "partitions.'" + "p" * 37 + "..." + "p" * 16 + "...", None),
        ("partitions: [gpu]\n", "", "must be a mapping with `partitions:` (partition: billing weight)"),
        ("gpu: 1\n", "", "must be a mapping with `partitions:` (partition: billing weight)"),
    ],
)
def test_a_hostile_billing_file_is_refused_naming_the_key(
    tmp_path: Path, text: str, where: str, reason: str | None
) -> None:
    from vigil.installer.reports import load_billing

    billing = tmp_path / "billing.yaml"
    billing.write_text(text)
    with pytest.raises(ReportInputError) as exc:
        load_billing(billing)
    # one line naming the file and the key (a long name shown cut), never the whole value
    assert exc.value.obj == (f"{billing}: {where}" if where else str(billing))
    assert exc.value.reason == (reason or "partition names are text of 1 to 256 characters")


def test_a_billing_file_of_aliases_or_bytes_too_many_is_refused(tmp_path: Path) -> None:
    from vigil.installer.reports import load_billing

    billing = tmp_path / "billing.yaml"
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    billing.write_text("\n".join(lines) + "\npartitions: {gpu: *a11}\n")
    with pytest.raises(ReportInputError, match="aliases .* expand it by more than 10000 values; refused"):
        load_billing(billing)
    billing.write_text("partitions:\n" + "  p: 1\n" * 300_000)
    with pytest.raises(ReportInputError, match="bytes"):
        load_billing(billing)
