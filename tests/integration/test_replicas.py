"""Reads failing over between two real VictoriaMetrics (the debian bundle's) on 127.0.0.1 holding the
same imported data (test_reports' known October): a query, and a whole usage report, answered when
the first replica is stopped, hung or answering 503; the replica that answered tried first next time
(measured); both down one line naming both; a bad query not asked of the other."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.slow_servers import slow_server
from tests.helpers.tls_site import Request, serve
from tests.integration.test_reports import OCT, VM, assert_close, expected, raw_lines, report, rows, vigil
from vigil.installer import stack
from vigil.installer.reports import VictoriaMetrics
from vigil.installer.reports.errors import ReportError

pytestmark = pytest.mark.integration

#: samples per GPU host over a day of the known data (test_reports: 4 GPUs each, every 30 s)
QUERY = "sum by (Hostname) (count_over_time(DCGM_FI_DEV_GPU_TEMP[1d]))"
AT = OCT[0] + 10 * 86400


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack, "_sticky", {})


@pytest.fixture
def pair(vm_binary: Path, tmp_path: Path) -> Iterator[tuple[VM, VM]]:
    """Two VictoriaMetrics holding the same samples."""
    first, second = VM(vm_binary, tmp_path / "first"), VM(vm_binary, tmp_path / "second")
    try:
        for vm in (first, second):
            vm.load(raw_lines())
        yield first, second
    finally:
        first.stop()
        second.stop()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def vm_binary(components: Path) -> Path:
    return components / "victoria-metrics" / "bin" / "victoria-metrics"


def test_the_second_answers_the_same_when_the_first_is_stopped(pair: tuple[VM, VM], home: Path) -> None:
    first, second = pair
    both = VictoriaMetrics([first.url, second.url], timeout=5)
    want = both.query(QUERY, AT)
    assert sorted(want, key=str) == [({"Hostname": h}, 4 * 2880.0) for h in ("gpu01", "gpu02")]
    assert both.url == first.url
    first.stop()
    again = VictoriaMetrics([first.url, second.url], timeout=5)
    assert sorted(again.query(QUERY, AT), key=str) == sorted(want, key=str)
    assert again.source == second.url
    doc, _ = report(home, "usage", "--period", "2025-10", "--vm", first.url, "--vm", second.url)
    assert doc["source"]["victoriametrics"] == second.url
    assert_close(rows(doc), expected(*OCT), 0.02)


def test_a_hung_first_replica_costs_its_timeout_once(pair: tuple[VM, VM]) -> None:
    """The first replica's host hangs (its port taken by a tarpit: the connection is accepted, nothing
    is answered): the first query waits the timeout and is answered by the second; the next starts
    at the second and does not wait again."""
    first, second = pair
    first.stop()
    with slow_server(port=first.port) as tarpit:
        started = time.monotonic()
        answered = VictoriaMetrics([first.url, second.url], timeout=1.0).query(QUERY, AT)
        first_query = time.monotonic() - started
        started = time.monotonic()
        again = VictoriaMetrics([first.url, second.url], timeout=1.0).query(QUERY, AT)
        second_query = time.monotonic() - started
    assert answered and again == answered
    assert 1.0 <= first_query < 2.0, first_query
    assert second_query < 0.5, second_query
    assert tarpit.connections == 1
    print(f"hung first replica: first query {first_query:.2f} s, the next {second_query:.3f} s")


def test_a_first_replica_answering_503_is_passed_over(pair: tuple[VM, VM]) -> None:
    _, second = pair
    with serve(lambda r: (503, b"overloaded\n")) as failing:
        vm = VictoriaMetrics([failing.url, second.url], timeout=5)
        assert vm.query(QUERY, AT) and vm.url == second.url
        assert vm.query(QUERY, AT)
    assert len(failing.seen) == 1  # the second query went to the replica that answered


def test_both_down_is_one_line_naming_both(pair: tuple[VM, VM], home: Path) -> None:
    first, second = pair
    first.stop()
    second.stop()
    with pytest.raises(ReportError) as err:
        VictoriaMetrics([first.url, second.url], timeout=5).query(QUERY, AT)
    line = str(err.value)
    assert line.startswith(f"VictoriaMetrics {first.url}, {second.url}: no replica answered: ")
    assert f"{first.url}: unreachable: " in line and f"; {second.url}: unreachable: " in line
    assert "\n" not in line
    res = vigil(home, "report", "usage", "--period", "2025-10", "--vm", f"{first.url},{second.url}")
    assert res.returncode != 0
    failures = [x for x in res.stderr.splitlines() if x.startswith("FAIL")]
    assert failures == [f"FAIL: {line}"]


def test_a_bad_query_is_not_asked_of_the_other(pair: tuple[VM, VM]) -> None:
    first, _ = pair

    def count(request: Request) -> tuple[int, object]:
        return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}

    with serve(count) as other:
        with pytest.raises(ReportError) as err:
            VictoriaMetrics([first.url, other.url], timeout=5).query("sum(", AT)
        assert other.seen == []
    assert str(err.value).startswith(f"VictoriaMetrics {first.url}: /api/v1/query: HTTP 4")
