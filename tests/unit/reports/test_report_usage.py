"""Which source each hour is read from, what is refused, and the CLI's contract (no VictoriaMetrics)."""

from __future__ import annotations

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
