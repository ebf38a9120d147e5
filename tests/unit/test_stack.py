"""The monitoring stack's one client (vigil.installer.stack) against real servers on 127.0.0.1: a
replica that is down, answers 5xx or 429, hangs or trickles is passed over for the next; a bad query
(4xx) is not asked twice; an answer over the cap is refused, not hidden by another replica; the
replica that answered is tried first next time; none answering is one line naming each. Then the
reports' and the console's errors over it, and the replica lists (the deployed inventory's
monitoring hosts, --vm given twice, $VIGIL_VM_URL)."""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.slow_servers import slow_server
from tests.helpers.tls_site import PASSWORD, Answer, Request, make_site, serve, vm_success
from vigil.installer import stack
from vigil.installer.access import SiteAccess, site_access
from vigil.installer.audit import AuditLog
from vigil.installer.cli import build_parser
from vigil.installer.cli import report as report_cli
from vigil.installer.deploy.credentials import API_USER
from vigil.installer.ops.report import resolve_vm, victoriametrics
from vigil.installer.reports import VictoriaMetrics
from vigil.installer.reports.errors import ReportError, ReportInputError
from vigil.installer.stack import ReadFailed, Replicas, StackError, TooLarge, alert_who, split_urls
from vigil.tui import overview

CLOSED = "http://127.0.0.1:1"  # nothing listens on port 1 of 127.0.0.1
BASIC = "Basic " + base64.b64encode(f"{API_USER}:{PASSWORD}".encode()).decode()


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no replica has answered yet."""
    monkeypatch.setattr(stack, "_sticky", {})


def client(
    *urls: str, timeout: float = 5.0, max_bytes: int = 1 << 20, access: SiteAccess | None = None
) -> Replicas:
    return Replicas(urls, service="VictoriaMetrics", access=access, timeout=timeout, max_bytes=max_bytes)


def status(code: int, error: str = "") -> Answer:
    """A server that answers CODE with VictoriaMetrics' error document."""

    def answer(request: Request) -> tuple[int, object]:
        return code, {"status": "error", "error": error or f"said {code}"}

    return answer


# --- failover -------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [500, 502, 503, 429])
def test_a_server_error_or_too_many_requests_is_passed_over(code: int) -> None:
    with serve(status(code)) as first, serve(vm_success) as second:
        answer = client(first.url, second.url).get("/api/v1/query", [("query", "up")])
    assert answer.replica == second.url and b'"success"' in answer.body
    assert len(first.seen) == 1 and len(second.seen) == 1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_a_bad_query_is_not_asked_of_the_next_replica(code: int) -> None:
    with (
        serve(status(code, "cannot parse query")) as first,
        serve(vm_success) as second,
        pytest.raises(ReadFailed) as err,
    ):
        client(first.url, second.url).get("/api/v1/query", [("query", "up{")])
    assert len(first.seen) == 1 and second.seen == []  # the other would answer the same
    (failure,) = err.value.failures
    assert (failure.replica, failure.status, failure.passed_over) == (first.url, code, False)
    assert b"cannot parse query" in failure.detail


def test_a_replica_that_is_down_is_passed_over() -> None:
    with serve(vm_success) as second:
        answer = client(CLOSED, second.url).get("/api/v1/query")
    assert answer.replica == second.url


def test_none_answering_is_one_line_naming_each() -> None:
    with serve(status(503)) as second, pytest.raises(ReadFailed) as err:
        client(CLOSED, second.url).get("/api/v1/query")
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"VictoriaMetrics: /api/v1/query: no replica answered: {CLOSED}: ")
    assert "Connection refused" in line
    assert line.endswith(f"; {second.url}: HTTP 503 Service Unavailable")


def test_the_replica_that_answered_is_tried_first_next_time() -> None:
    with serve(status(503)) as first, serve(vm_success) as second:
        replicas = client(first.url, second.url)
        assert replicas.first == first.url
        replicas.get("/api/v1/query")
        assert replicas.first == second.url
        for _ in range(3):
            assert client(first.url, second.url).get("/api/v1/query").replica == second.url
    assert len(first.seen) == 1 and len(second.seen) == 4  # the failing one was asked once
    with serve(vm_success) as other:  # another list of replicas starts at its own first
        assert client(other.url, second.url).first == other.url


def test_a_sticky_replica_that_fails_passes_back_to_the_others() -> None:
    answers = {"code": 200}
    with serve(vm_success) as first, serve(lambda r: (answers["code"], {"status": "success"})) as second:
        stack._sticky[(first.url, second.url)] = 1
        assert client(first.url, second.url).get("/").replica == second.url
        answers["code"] = 503
        assert client(first.url, second.url).get("/").replica == first.url
        assert client(first.url, second.url).first == first.url


# --- slow and flooding replicas -------------------------------------------------------------------


def test_a_tarpit_costs_the_timeout_once_then_the_next_replica_answers() -> None:
    """A replica that takes the connection and never answers (a hung host) costs its timeout on the
    first read only: the next read starts at the replica that answered."""
    with slow_server() as tarpit, serve(vm_success) as second:
        started = time.monotonic()
        answer = client(tarpit.url, second.url, timeout=1.0).get("/api/v1/query")
        first_read = time.monotonic() - started
        started = time.monotonic()
        client(tarpit.url, second.url, timeout=1.0).get("/api/v1/query")
        second_read = time.monotonic() - started
    assert answer.replica == second.url
    assert 1.0 <= first_read < 1.8, first_read
    assert second_read < 0.5, second_read
    assert tarpit.connections == 1


@pytest.mark.timeout(30)  # without the watchdog it would never end
def test_a_trickling_replica_is_cut_off_at_the_timeout() -> None:
    """A byte every 50 ms keeps each socket read under any per-read timeout; the whole request is
    bounded all the same, and the next replica answers."""
    got: list[object] = []
    with slow_server(trickle=0.05) as trickler, serve(vm_success) as second:
        replicas = client(trickler.url, second.url, timeout=1.0)
        started = time.monotonic()
        reader = threading.Thread(target=lambda: got.append(replicas.get("/api/v1/query")), daemon=True)
        reader.start()
        reader.join(6)
        elapsed = time.monotonic() - started
    assert not reader.is_alive(), "the read did not end: a trickling server held it"
    assert elapsed < 1.8, elapsed
    (answer,) = got
    assert isinstance(answer, stack.Answer) and answer.replica == second.url


@pytest.mark.timeout(30)  # without the watchdog it would never end
def test_a_trickling_lone_replica_says_it_sent_no_whole_answer() -> None:
    with slow_server(trickle=0.05) as trickler, pytest.raises(ReadFailed) as err:
        client(trickler.url, timeout=0.5).get("/api/v1/query")
    assert str(err.value) == f"VictoriaMetrics: /api/v1/query: {trickler.url}: no whole answer within 0.5 s"


def test_an_answer_over_the_cap_is_refused_not_passed_over() -> None:
    """The replicas hold the same data: the next would send as much, and a flooding replica must be
    seen, not hidden behind a quieter one."""
    huge = b"[" + b"1," * 4000 + b"1]"
    with (
        serve(lambda r: (200, huge)) as first,
        serve(vm_success) as second,
        pytest.raises(TooLarge) as err,
    ):
        client(first.url, second.url, max_bytes=4096).get("/api/v1/query")
    assert second.seen == []
    assert str(err.value) == (
        f"VictoriaMetrics {first.url}: /api/v1/query: answer larger than 4,096 bytes; refused"
    )


def test_an_answer_announcing_more_than_the_cap_is_refused_before_it_is_read() -> None:
    with slow_server(trickle=0.05) as trickler:  # announces 100,000 bytes, sends one a time
        started = time.monotonic()
        with pytest.raises(TooLarge):
            client(trickler.url, timeout=5.0, max_bytes=50_000).get("/")
    assert time.monotonic() - started < 1.0


# --- trust, login, proxies --------------------------------------------------------------------------


def test_each_https_replica_is_checked_and_given_the_login(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    issued = make_site(home)
    foreign = make_site(other)
    access = site_access(home)
    with serve(tls=foreign) as untrusted, serve(tls=issued) as trusted, serve() as plain:
        answer = client(untrusted.url, trusted.url, access=access).get("/api/v1/query")
        assert answer.replica == trusted.url
        with pytest.raises(ReadFailed) as err:
            client(untrusted.url, access=access).get("/api/v1/query")
        client(plain.url, access=access).get("/api/v1/query")
    assert untrusted.seen == []  # the TLS handshake failed: nothing, the login least of all, went to it
    assert [r.authorization for r in trusted.seen] == [BASIC]
    assert [r.authorization for r in plain.seen] == [None]  # never in clear
    assert "TLS: the server's certificate is not trusted" in str(err.value)
    assert PASSWORD not in repr(client(trusted.url, access=access))


def test_no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, CLOSED)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with serve(vm_success) as server:
        assert client(server.url).get("/api/v1/query").replica == server.url
    assert len(server.seen) == 1


def test_redirects_are_not_followed() -> None:
    with serve(vm_success) as elsewhere:

        def moved(request: Request) -> tuple[int, object]:
            return 302, b""

        with serve(moved) as first, pytest.raises(ReadFailed) as err:
            client(first.url).get("/api/v1/query")
    assert elsewhere.seen == [] and err.value.failures[0].status == 302


def test_urls_are_checked_and_listed_once() -> None:
    assert split_urls("http://a:8428, http://b:8428,,http://a:8428") == ["http://a:8428", "http://b:8428"]
    assert split_urls(["http://a:8428", "http://b:8428,http://c:8428"]) == [
        "http://a:8428",
        "http://b:8428",
        "http://c:8428",
    ]
    assert split_urls(None) == [] and split_urls("") == []
    assert client("http://a:8428/", "https://[fd00::10]:8428").urls == (
        "http://a:8428",
        "https://[fd00::10]:8428",
    )
    for bad, why in [
        ("file:///etc/passwd", "not an http:// or https:// URL"),
        ("http://a:8428/?x=1", "must not have a query or a fragment"),
        ("http://a:port", "its port is not a number"),
    ]:
        with pytest.raises(StackError) as err:
            client("http://ok:8428", bad)
        assert str(err.value) == f"URL {bad}: {why}"
    with pytest.raises(StackError, match="no URL given"):
        client()


# --- the reports' and the console's errors over it -----------------------------------------------


def test_the_reports_name_the_replica_that_answered_or_each_that_did_not() -> None:
    with serve(status(503)) as first, serve(status(400, "cannot parse query")) as second:
        vm = VictoriaMetrics([first.url, second.url])
        with pytest.raises(ReportError) as err:
            vm.query("up{", 0)
        assert str(err.value) == f"VictoriaMetrics {second.url}: /api/v1/query: HTTP 400: cannot parse query"
        with pytest.raises(ReportError) as err:
            VictoriaMetrics(f"{CLOSED},{first.url}").query("up", 0)
    line = str(err.value)
    assert line.startswith(
        f"VictoriaMetrics {CLOSED}, {first.url}: no replica answered: {CLOSED}: unreachable: "
    )
    assert line.endswith(f"; {first.url}: /api/v1/query: HTTP 503: said 503") and "\n" not in line


def test_the_reports_source_is_the_replica_that_answered() -> None:
    with serve(vm_success) as second:
        vm = VictoriaMetrics([CLOSED, second.url])
        assert vm.query("up", 0) == []
        assert (vm.url, vm.source, vm.name) == (second.url, second.url, f"VictoriaMetrics {second.url}")
    with serve(vm_success) as only:
        vm = VictoriaMetrics(only.url + "/")
        assert vm.source == only.url and vm.urls == (only.url,)  # one replica: as before


def test_the_console_names_each_replica_that_did_not_answer() -> None:
    with serve(status(503)) as second, pytest.raises(overview.FetchError) as err:
        overview.fetch_alerts([CLOSED, second.url])
    line = str(err.value)
    assert line.startswith(
        f"{CLOSED}, {second.url}: /api/v2/alerts: no replica answered: {CLOSED}: cannot connect: "
    )
    assert line.endswith(f"; {second.url}: HTTP 503 Service Unavailable")


# --- the replica lists --------------------------------------------------------------------------------


def _deployed(tmp_path: Path, hosts: str) -> Path:
    home = tmp_path / "home"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    monitoring:\n      hosts:\n" + hosts)
    AuditLog(home).append("deploy", str(inventory), "ok")
    return home


def test_one_monitoring_host_is_one_replica(tmp_path: Path) -> None:
    home = _deployed(tmp_path, "        mon01: {ansible_host: 198.18.0.10}\n")
    assert resolve_vm(home, None) == ["http://198.18.0.10:8428"]
    assert victoriametrics(home, None).urls == ("http://198.18.0.10:8428",)


def test_every_monitoring_host_is_a_replica_in_inventory_order(tmp_path: Path) -> None:
    home = _deployed(
        tmp_path,
        "        mon02: {ansible_host: 198.18.0.12, victoriametrics_port: 18428}\n"
        "        mon01: {ansible_host: 198.18.0.10}\n",
    )
    assert resolve_vm(home, None) == ["http://198.18.0.12:18428", "http://198.18.0.10:8428"]
    make_site(home)
    assert victoriametrics(home, None).urls == ("https://198.18.0.12:18428", "https://198.18.0.10:8428")


def test_vm_given_twice_or_as_a_list_is_the_replicas_in_that_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _deployed(tmp_path, "        mon01: {ansible_host: 198.18.0.10}\n")
    monkeypatch.setenv("VIGIL_VM_URL", "http://env-a:8428, http://env-b:8428")
    parser = build_parser()
    for argv in (
        ["report", "usage"],
        ["report", "energy", "--year", "2025", "--site", "site.yaml"],
        ["report", "close"],
    ):
        args = parser.parse_args([*argv, "--vm", "http://a:8428", "--vm", "http://b:8428/"])
        assert report_cli._vm(args) == ["http://a:8428", "http://b:8428/"]
        assert victoriametrics(home, report_cli._vm(args)).urls == ("http://a:8428", "http://b:8428")
    args = parser.parse_args(["report", "usage"])
    assert victoriametrics(home, report_cli._vm(args)).urls == ("http://env-a:8428", "http://env-b:8428")
    monkeypatch.delenv("VIGIL_VM_URL")
    assert victoriametrics(home, report_cli._vm(parser.parse_args(["report", "usage"]))).urls == (
        "http://198.18.0.10:8428",
    )
    with pytest.raises(ReportInputError, match=r"^--vm ftp://x: not an http:// or https:// URL$"):
        victoriametrics(home, ["http://a:8428", "ftp://x"])


def test_an_alert_names_its_jobs_from_its_labels_or_else_its_annotations() -> None:
    job_alert = {"labels": {"hpc_job": "7", "user": "ada", "account": "physics"}, "annotations": {}}
    who = {"hpc_job": "7, 8", "user": "ada, bob", "account": "p"}
    gpu_alert = {"labels": {"gpu": "0"}, "annotations": who}
    assert alert_who(job_alert) == {"hpc_job": "7", "user": "ada", "account": "physics"}
    assert alert_who(gpu_alert) == {"hpc_job": "7, 8", "user": "ada, bob", "account": "p"}
    # a service's answer in any shape: what is not a string is not a job
    for odd in ({}, {"labels": None}, {"labels": [], "annotations": "x"}, {"annotations": {"hpc_job": 7}}):
        assert alert_who(odd) == {"hpc_job": "", "user": "", "account": ""}, odd
