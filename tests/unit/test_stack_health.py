"""Each replica's health (vigil.installer.stack_health) against servers on 127.0.0.1 that answer as
VictoriaMetrics and Alertmanager do, healthy and not, then hostile: the words for each state, the
queue of each vmagent mapped to its replica, and what a replica sends kept as data (escapes, huge
numbers, wrong shapes, an answer over the cap)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.slow_servers import slow_server
from tests.helpers.tls_site import Request, serve
from vigil.basics.errors import VigilError
from vigil.installer import stack, stack_health
from vigil.installer.cli import main
from vigil.installer.stack_health import parse_metrics, read

CLOSED = "http://127.0.0.1:1"
NOW = 1_790_000_000.0
ESC = "\x1b[2J\x1b]0;owned\x07[bold]x[/bold]"


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack, "_sticky", {})


def metrics_page(free: float = 40 * 2**30, limit: float = 10_000_000, read_only: int = 0) -> bytes:
    return (
        "# HELP vm_free_disk_space_bytes free\n"
        f'vm_free_disk_space_bytes{{path="/var/lib/vigil/victoriametrics"}} {free:.0f}\n'
        f'vm_free_disk_space_limit_bytes{{path="/var/lib/vigil/victoriametrics"}} {limit:.0f}\n'
        f'vm_storage_is_read_only{{path="/var/lib/vigil/victoriametrics"}} {read_only}\n'
        'vm_app_version{version="victoria-metrics-v1.79.5", short_version="v1.79.5"} 1\n'
    ).encode()


def vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    result = [{"metric": m, "value": [NOW, repr(v)]} for m, v in series]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def vm(
    *,
    newest: float | None = NOW - 12,
    page: bytes | None = None,
    queues: list[tuple[dict[str, str], float]] | None = None,
) -> Callable[[Request], tuple[int, object]]:
    """A VictoriaMetrics: /health, its /metrics, the newest `up` sample, the vmagent queues."""

    def answer(request: Request) -> tuple[int, object]:
        if request.path == "/health":
            return 200, b"OK"
        if request.path == "/metrics":
            return 200, metrics_page() if page is None else page
        if request.path.startswith("/api/v1/query"):
            if "vmagent_remotewrite_pending_data_bytes" in request.path:
                return 200, vector(*(queues or []))
            return 200, vector(*([] if newest is None else [({}, newest)]))
        return 404, {"status": "error", "error": "not found"}

    return answer


def am(
    status: str = "ready", peers: int = 2, version: Any = "0.25.0"
) -> Callable[[Request], tuple[int, object]]:
    def answer(request: Request) -> tuple[int, object]:
        assert request.path == "/api/v2/status"
        doc = {
            "cluster": {"status": status, "peers": [{"name": f"p{i}", "address": "x"} for i in range(peers)]},
            "versionInfo": {"version": version},
        }
        return 200, doc

    return answer


def test_a_healthy_pair_is_ok_and_says_what_it_holds() -> None:
    with serve(vm()) as a, serve(vm()) as b, serve(am()) as m1, serve(am()) as m2:
        health = read([a.url, b.url], [m1.url, m2.url], now=NOW)
    assert [h.service for h in health] == ["VictoriaMetrics"] * 2 + ["Alertmanager"] * 2
    assert all(h.ok for h in health), [h.line() for h in health]
    assert health[0].line() == f"VictoriaMetrics {a.url}: ok; newest sample 12 s old; 40.0 GiB free"
    assert health[2].line() == f"Alertmanager {m1.url}: ok; cluster ready, 2 members seen; version 0.25.0"
    assert health[0].free_disk_limit_bytes == 10_000_000 and health[0].read_only is False


def test_one_monitoring_host_has_no_cluster_to_form_and_no_queue_to_ask() -> None:
    with serve(vm()) as a, serve(am(status="disabled", peers=0)) as m:
        health = read(a.url, m.url, now=NOW)
    assert all(h.ok for h in health), [h.line() for h in health]
    assert not any("vmagent_remotewrite" in r.path for r in a.seen)


def test_a_replica_that_is_down_is_named_with_the_reason_and_the_other_stays_ok() -> None:
    with serve(vm()) as b:
        health = read([CLOSED, b.url], [CLOSED], now=NOW, timeout=2)
    assert health[0].problems[0].startswith("DOWN: cannot connect:") and not health[0].answered
    assert health[1].ok
    assert health[2].service == "Alertmanager" and health[2].problems[0].startswith("DOWN:")


def test_a_full_disk_is_read_only_and_says_why() -> None:
    page = metrics_page(free=9_000_000, limit=10_000_000, read_only=1)
    with serve(vm(page=page)) as a:
        (health,) = read(a.url, now=NOW)
    assert health.read_only is True
    assert health.problems == (
        "READ-ONLY: disk full (below 9.5 MiB, -storage.minFreeDiskSpaceBytes): it takes no new samples",
    )


def test_a_replica_behind_or_without_samples_is_behind() -> None:
    with serve(vm(newest=NOW - 600)) as a, serve(vm(newest=None)) as b:
        old, empty = read([a.url, b.url], now=NOW)
    assert old.problems == ("BEHIND: newest sample 600 s old",) and old.newest_sample_age == 600
    assert empty.problems == ("BEHIND: no sample of `up` in its lookback window",)


def test_each_vmagents_queue_is_the_replica_its_url_label_counts() -> None:
    queues = [
        ({"instance": "mon01", "url": "2:secret-url"}, 5 * 2**20),
        ({"instance": "mon02", "url": "2:secret-url"}, 0),
        ({"instance": "mon02", "url": "1:secret-url"}, 2048),
        ({"instance": "mon02", "url": "9:secret-url"}, 2**30),  # no ninth replica: not taken
        ({"instance": "mon02", "url": "x:secret-url"}, 2**30),
    ]
    with serve(vm(queues=queues)) as a, serve(vm(queues=queues)) as b:
        first, second = read([a.url, b.url], now=NOW)
    assert first.ok and first.queued_bytes == {"mon02": 2048}
    assert second.queued_bytes == {"mon01": 5 * 2**20}
    assert second.problems == ("CATCHING UP: 5.0 MiB queued for it on mon01",)
    assert "queued for it: 5.0 MiB on mon01" in second.line()


@pytest.mark.parametrize(
    ("status", "peers", "problems"),
    [
        ("settling", 2, ("CLUSTER settling: not yet one cluster with the other members",)),
        ("ready", 1, ("SPLIT: sees 1 of 2 members",)),
    ],
)
def test_an_alertmanager_not_yet_or_no_longer_in_one_cluster_is_named(
    status: str, peers: int, problems: tuple[str, ...]
) -> None:
    with serve(am(status=status, peers=peers)) as m1, serve(am()) as m2:
        first, second = read([], [m1.url, m2.url], now=NOW)
    assert first.problems == problems and second.ok


# --- hostile answers -------------------------------------------------------------------------------


def test_a_metrics_page_that_lies_in_its_shape_gives_no_number() -> None:
    page = (
        "vm_free_disk_space_bytes NaN\n"
        'vm_free_disk_space_bytes{path="/x"} +Inf\n'
        'vm_storage_is_read_only{path="a"} 0 extra words\n'
        'vm_storage_is_read_only{path="{"} 1\n'
        "vm_free_disk_space_limit_bytes 1e400\n" + "#" * 10_000 + "\n\x00\x1b[2J vm_storage_is_read_only 1\n"
    )
    assert parse_metrics(page, stack_health._VM_METRICS) == {}
    assert parse_metrics("vm_storage_is_read_only 1 1790000000000\n", ["vm_storage_is_read_only"]) == {
        "vm_storage_is_read_only": 1.0
    }


@pytest.mark.parametrize(
    "answer",
    [
        b"not json",
        b"[]",
        json.dumps(
            {"status": "success", "data": {"result": [{"metric": {"a": 1}, "value": [0, "1"]}]}}
        ).encode(),
        json.dumps(
            {"status": "success", "data": {"result": [{"metric": {}, "value": [0, "nope"]}]}}
        ).encode(),
        json.dumps({"status": "error", "error": ESC}).encode(),
    ],
)
def test_a_query_answer_of_the_wrong_shape_is_a_problem_not_a_crash(answer: bytes) -> None:
    def handler(request: Request) -> tuple[int, object]:
        if request.path.startswith("/api/v1/query"):
            return 200, answer
        return vm()(request)

    with serve(handler) as a, serve(vm()) as b:
        first, second = read([a.url, b.url], now=NOW)
    assert first.problems[0] == "newest sample not read: its answer is not a query result"
    assert ESC not in " ".join(first.problems)


def test_an_alertmanager_status_of_another_shape_is_not_alertmanagers() -> None:
    with serve(lambda r: (200, {"cluster": {"status": 3, "peers": "all"}})) as m:
        (health,) = read([], m.url, now=NOW)
    assert health.problems == ("its /api/v2/status is not Alertmanager's",)


def test_text_a_replica_sends_is_shown_by_the_cli_with_its_escapes_visible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vigil.installer import ops

    with serve(vm()) as a, serve(am(version=ESC)) as m:
        health = read(a.url, m.url, now=NOW)
    assert health[1].version == ESC  # data, kept as it came
    monkeypatch.setattr(ops, "replica_health", lambda home, inventory, now=None: health)
    monkeypatch.setattr(ops, "site_status", lambda inv, **kw: {})
    rc = main(["--home", str(tmp_path / "home"), "status", "-i", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "\x1b" not in out and "\x07" not in out
    assert f"  Alertmanager {m.url}: ok; cluster ready, 2 members seen; version \\x1b[2J" in out


def test_a_metrics_page_over_the_cap_is_refused_naming_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_health, "METRICS_BYTES", 1000)
    with serve(vm(page=b"#" * 5000)) as a:
        (health,) = read(a.url, now=NOW)
    assert health.problems == ("its /metrics not read: /metrics: answer larger than 1,000 bytes",)


def test_a_replica_that_trickles_costs_one_timeout_while_the_others_are_read() -> None:
    with slow_server(trickle=0.1) as slow, serve(vm()) as b:
        started = time.monotonic()
        first, second = read([slow.url, b.url], now=NOW, timeout=1.0)
        took = time.monotonic() - started
    assert first.problems[0].startswith("DOWN:") and second.ok
    assert took < 4, took


def test_the_inventorys_monitoring_hosts_give_the_urls_in_its_order(tmp_path: Path) -> None:
    from vigil.installer.access import SiteAccess
    from vigil.installer.ops import monitoring_urls

    inventory = tmp_path / "hosts.yml"
    hosts = {
        "mon02": {"ansible_host": "198.18.0.12", "alertmanager_port": 9193},
        "mon01": {"ansible_host": "198.18.0.10", "victoriametrics_port": 8528},
    }
    inventory.write_text(json.dumps({"all": {"children": {"monitoring": {"hosts": hosts}}}}))
    vm_urls, am_urls = monitoring_urls(inventory, SiteAccess())
    assert vm_urls == ["http://198.18.0.12:8428", "http://198.18.0.10:8528"]
    assert am_urls == ["http://198.18.0.12:9193", "http://198.18.0.10:9093"]
    none = tmp_path / "none.yml"
    none.write_text(json.dumps({"all": {"hosts": {"gpu01": {}}}}))
    with pytest.raises(VigilError, match="has no monitoring host"):
        monitoring_urls(none, SiteAccess())


def test_a_179_store_that_wants_the_metrics_key_is_read_with_it_over_https_only(tmp_path: Path) -> None:
    """1.79 serves /metrics only with ?authKey= (the site's metrics key) once -metricsAuthKey is set;
    the login alone is refused there. The key is sent only to an https replica."""
    from tests.helpers.tls_site import make_site
    from vigil.installer.access import site_access

    def answer(request: Request) -> tuple[int, object]:
        if request.path.startswith("/metrics"):
            return (200, metrics_page()) if request.path == "/metrics?authKey=k3yk3yk3yk3y" else (401, b"")
        return vm()(request)

    home = tmp_path / "home"
    issued = make_site(home)
    with serve(answer, tls=issued) as secure, serve(answer) as plain_http:
        (ok,) = read(secure.url, access=site_access(home), now=NOW, metrics_key="k3yk3yk3yk3y")
        (refused,) = read(plain_http.url, now=NOW, metrics_key="k3yk3yk3yk3y")
        (keyless,) = read(secure.url, access=site_access(home), now=NOW)
    assert ok.ok and ok.free_disk_bytes == 40 * 2**30, ok.line()
    assert refused.problems == ("its /metrics not read: HTTP 401 Unauthorized",)
    assert not any("authKey" in r.path for r in plain_http.seen)
    assert keyless.problems == ("its /metrics not read: HTTP 401 Unauthorized",)


def test_with_a_monitoring_host_unreachable_status_still_shows_the_replicas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hosts' read fails on a host it cannot reach; the replicas, read first, are shown all the
    same (text and JSON), then the host's FAIL line, exit 1."""
    from vigil.installer import ops

    with serve(vm()) as a:
        health = read([CLOSED, a.url], now=NOW, timeout=2)

    def unreachable(inv: object, **kw: object) -> None:
        raise VigilError("host mon01", "unreachable: no route to host")

    monkeypatch.setattr(ops, "replica_health", lambda home, inventory, now=None: health)
    monkeypatch.setattr(ops, "site_status", unreachable)
    argv = ["--home", str(tmp_path / "home"), "status", "-i", str(tmp_path)]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[1:] == [
        "monitoring replicas:",
        f"  {health[0].line()}",
        f"  {health[1].line()}",
    ]
    assert health[0].line().startswith(f"VictoriaMetrics {CLOSED}: DOWN: cannot connect:")
    assert err.strip().splitlines()[-1] == "FAIL: host mon01: unreachable: no route to host"
    assert main([*argv, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["hosts"] == {} and doc["hosts_unread"] == "host mon01: unreachable: no route to host"
    assert doc["replicas_attention"] == [CLOSED]
