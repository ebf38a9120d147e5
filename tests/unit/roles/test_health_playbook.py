"""playbooks/health.yml against a stand-in for VictoriaMetrics, vmalert and Alertmanager.

One local HTTP server answers the endpoints the checks read (/health, /api/v1/query, /api/v1/rules,
/-/ready, /api/v2/silences) with what each test sets; the inventory points every port at it. The
hosts are local; each has its own facts file, so a failure names the component as `vigil status`
does. The waits are shortened through the roles' internal variables.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from tests.unit.roles.facts_helpers import RUN, entry, vd
from tests.unit.roles.playbook_runs import local_inventory, run_playbook
from tests.unit.roles.rendering import ROLES


def shipped_groups() -> list[str]:
    names = set()
    for path in sorted((ROLES / "vmalert" / "files" / "rules").glob("*.yml")):
        names |= {g["name"] for g in yaml.safe_load(path.read_text())["groups"]}
    return sorted(names)


#: silence ids as Alertmanager makes them (random UUIDs)
ACTIVE = "0b5c4f0e-3d7a-4d8e-9a51-6f1e2c3b4a01"
PENDING = "7e9d2c1b-5a4f-4e3d-8c2b-1a0f9e8d7c02"
OLD = "c3b2a190-8f7e-4d6c-b5a4-938271605f03"
#: a silence id that is a template: run on the admin host if Ansible rendered it
HOSTILE = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}"


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".123456789Z"


@dataclass
class Stack:
    """What the stand-in answers."""

    health: int = 200
    count_up: str | None = "12"
    #: instance -> job -> (timestamp offset from now, value); an offset over 1e9 is the timestamp itself
    targets: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    silences: list[dict[str, Any]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        now = time.time()
        if path in ("/health", "/-/ready"):
            return self.health, "OK"
        if path == "/api/v1/query":
            q = query.get("query", [""])[0]
            self.queries.append(q)
            if q == "count(up)":
                result = [] if self.count_up is None else [{"metric": {}, "value": [now, self.count_up]}]
                return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
            instance = q.split('instance="', 1)[1].split('"', 1)[0]
            series = [
                {
                    "metric": {"__name__": "up", "job": job, "instance": instance},
                    "values": [[at - 20, "1"], [at, value]],
                }
                for job, (off, value) in self.targets.get(instance, {}).items()
                for at in [off if off > 1e9 else now + off]
            ]
            return 200, {"status": "success", "data": {"resultType": "matrix", "result": series}}
        if path == "/api/v1/rules":
            return 200, {"status": "success", "data": {"groups": self.groups}}
        if path == "/api/v2/silences":
            return 200, self.silences
        return 404, "not found"


@pytest.fixture
def stack() -> Iterator[tuple[Stack, int]]:
    state = Stack()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            url = urlsplit(self.path)
            code, body = state.answer(url.path, parse_qs(url.query))
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def healthy(state: Stack, since: float) -> None:
    now = time.time()
    state.targets = {
        "gpu01": {"node_exporter": (0, "1")},
        "mon01": {job: (0, "1") for job in ("node_exporter", "victoriametrics", "vmalert", "alertmanager")},
    }
    state.groups = [
        {
            "name": name,
            "interval": 1,
            "lastEvaluation": rfc3339(now),
            "rules": [{"name": f"{name}:rule", "lastError": "", "lastEvaluation": rfc3339(now)}],
        }
        for name in shipped_groups()
    ]
    state.silences = [
        {"id": ACTIVE, "status": {"state": "active"}, "updatedAt": rfc3339(since - 3600)},
        {"id": PENDING, "status": {"state": "pending"}, "updatedAt": rfc3339(since - 3600)},
        {"id": OLD, "status": {"state": "expired"}, "updatedAt": rfc3339(since - 7200)},
    ]


def facts_files(tmp: Path) -> dict[str, Path]:
    """Each host's facts file, written by the module as a deploy would."""
    out = {}
    for host, ran in {
        "mon01": {
            "victoriametrics": entry(
                tmp / "mon01",
                "victoriametrics",
                "victoria-metrics",
                "1.79.5",
                service="vigil-victoriametrics",
            ),
            "vmalert": entry(
                tmp / "mon01",
                "vmalert",
                "victoria-metrics",
                "1.79.5",
                service="vigil-vmalert",
                install_name="vmalert",
            ),
            "alertmanager": entry(
                tmp / "mon01",
                "alertmanager",
                "prometheus-alertmanager",
                "0.25.0",
                service="vigil-alertmanager",
            ),
        },
        "gpu01": {
            "node_exporter": entry(
                tmp / "gpu01",
                "node_exporter",
                "prometheus-node-exporter",
                "1.5.0",
                service="vigil-node-exporter",
            ),
        },
    }.items():
        path = tmp / host / "deployed.json"
        vd.record(str(path), ran, dict(RUN), host)
        out[host] = path
    return out


def health(tmp: Path, port: int, since: float, silences: list[Any] | None = None, **extra: Any) -> Any:
    """Run health.yml; in check mode its baseline.json (written as the baseline run would) keeps
    ``silences``."""
    files = facts_files(tmp)
    host_vars = {
        h: {
            "common_facts_file": str(files[h]),
            "victoriametrics_port": port,
            "vmalert_port": port,
            "alertmanager_port": port,
            "victoriametrics_listen_address": "127.0.0.1",
            "vmalert_listen_address": "127.0.0.1",
            "alertmanager_listen_address": "127.0.0.1",
            "victoriametrics_scrape_interval": "1s",
            "victoriametrics_scrape_timeout": "1s",
        }
        for h in ("mon01", "gpu01")
    }
    inventory = local_inventory({"monitoring": ["mon01"], "gpu_nodes": ["gpu01"]}, host_vars)
    ev: dict[str, Any] = {
        **{k: v for k, v in RUN.items() if k == "bundle_version"},
        "vigil_artifacts": {
            "bin/victoria-metrics": {
                "component": "victoria-metrics",
                "version": "1.79.5",
                "src": "/x",
                "sha256": "0" * 64,
            },
            "bin/vmalert": {
                "component": "victoria-metrics",
                "version": "1.79.5",
                "src": "/x",
                "sha256": "0" * 64,
            },
            "bin/alertmanager": {
                "component": "prometheus-alertmanager",
                "version": "0.25.0",
                "src": "/x",
                "sha256": "0" * 64,
            },
            "bin/amtool": {
                "component": "prometheus-alertmanager",
                "version": "0.25.0",
                "src": "/x",
                "sha256": "0" * 64,
            },
        },
        "vigil_health_since": int(since),
        "vigil_health_before": int(since) - 60,
        "vigil_health_hosts": ["gpu01", "mon01"],
        "vigil_status_dir": str(tmp / "out"),
        # short waits: two tries, a second apart
        "_victoriametrics_check_retries": 2,
        "_victoriametrics_check_delay": 0,
        "_victoriametrics_check_targets_delay": 1,
        "_victoriametrics_check_margin": 0,
        "vmalert_check_max_interval": 2,
        "_vmalert_check_margin": 0,
        "_vmalert_check_delay": 1,
        "_alertmanager_check_retries": 2,
        "_alertmanager_check_delay": 0,
    }
    ev.update(extra)
    (tmp / "out").mkdir(exist_ok=True)
    if ev.get("vigil_health_mode", "check") == "check":
        kept = [ACTIVE, PENDING, OLD] if silences is None else silences
        (tmp / "out" / "baseline.json").write_text(json.dumps({"silences": kept, "rule_groups": []}))
    run = run_playbook(tmp / "run", "health.yml", inventory, ev)
    return run


def test_a_healthy_stack_passes_and_changes_nothing(tmp_path: Path, stack: tuple[Stack, int]) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    run = health(tmp_path, port, since)
    assert run.rc == 0, run.output
    assert run.failures() == []
    assert all(s["changed"] == 0 for s in run.stats().values()), run.stats()
    # the targets of both hosts were asked of the store, with raw samples over a window
    asked = sorted(q for q in state.queries if q.startswith("up{"))
    assert asked[0].startswith('up{instance="gpu01"}[') and asked[-1].startswith('up{instance="mon01"}[')


def one_failure(run: Any) -> tuple[str, str]:
    assert run.rc != 0, run.output
    fails = run.failures()
    assert fails, run.output
    host, _task, msg = fails[0]
    return host, " ".join(msg.split())


def test_a_rule_error_fails_the_monitoring_host_naming_vmalert_and_the_group(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    state.groups[1]["rules"][0]["lastError"] = "cannot parse\nquery"
    host, msg = one_failure(health(tmp_path, port, since))
    name = state.groups[1]["name"]
    assert host == "mon01"
    assert msg == f"vmalert: group {name}: rule {name}:rule: lastError cannot parse query"


def test_a_rule_group_not_loaded_or_not_evaluated_since_the_step_fails(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    missing = state.groups.pop(0)["name"]
    host, msg = one_failure(health(tmp_path / "a", port, since))
    assert (host, msg) == ("mon01", f"vmalert: group {missing}: not loaded")
    healthy(state, since)
    stale = state.groups[2]
    stale["lastEvaluation"] = stale["rules"][0]["lastEvaluation"] = rfc3339(since - 30)
    host, msg = one_failure(health(tmp_path / "b", port, since))
    assert host == "mon01" and msg.startswith(f"vmalert: group {stale['name']}: not evaluated since "), msg


def test_an_exporter_down_fails_the_host_it_runs_on_named_as_in_its_facts(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    state.targets["gpu01"]["node_exporter"] = (0, "0")
    host, msg = one_failure(health(tmp_path / "a", port, since))
    assert host == "gpu01"
    assert msg.startswith("prometheus-node-exporter: down: up == 0 at "), msg
    assert msg.endswith("on gpu01 (as mon01 sees it)"), msg
    # not scraped since the step began: the last sample is older (its own timestamp, 10 s before
    # the step began, however long the playbook takes to ask on a loaded machine)
    since = time.time() - 5
    healthy(state, since)
    state.targets["gpu01"]["node_exporter"] = (since - 10, "1")
    host, msg = one_failure(health(tmp_path / "b", port, since))
    assert host == "gpu01" and msg.startswith("prometheus-node-exporter: not scraped since "), msg
    # a job the store should scrape there is not scraped at all
    healthy(state, since)
    del state.targets["mon01"]["alertmanager"]
    host, msg = one_failure(health(tmp_path / "c", port, since))
    assert (host, msg.split(" on ")[0]) == (
        "mon01",
        "prometheus-alertmanager: not scraped (no `up` series for it)",
    )


def test_a_lost_silence_fails_naming_alertmanager(tmp_path: Path, stack: tuple[Stack, int]) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    state.silences = [s for s in state.silences if s["id"] != PENDING]
    host, msg = one_failure(health(tmp_path / "a", port, since))
    assert (host, msg) == ("mon01", f"prometheus-alertmanager: silence {PENDING} is gone")
    # expired by a change after the step began (not by reaching its end)
    healthy(state, since)
    state.silences[0].update(status={"state": "expired"}, updatedAt=rfc3339(since + 1))
    host, msg = one_failure(health(tmp_path / "b", port, since))
    assert (host, msg) == (
        "mon01",
        f"prometheus-alertmanager: silence {ACTIVE} was expired during the upgrade",
    )


def test_a_store_that_is_unhealthy_or_lost_old_data_fails_naming_it(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    state.count_up = None
    host, msg = one_failure(health(tmp_path / "a", port, since))
    assert host == "mon01"
    assert msg.startswith(
        f"victoria-metrics: count(up) at {int(since) - 60} (before the upgrade) is empty"
    ), msg
    healthy(state, since)
    state.count_up = "12"
    state.health = 503
    host, msg = one_failure(health(tmp_path / "b", port, since))
    assert host == "mon01" and msg.startswith("victoria-metrics: /health answered 503"), msg


def test_baseline_writes_the_silences_in_force_and_the_loaded_groups(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    state.health = 503  # nothing is checked in baseline mode
    run = health(tmp_path, port, since, vigil_health_mode="baseline")
    assert run.rc == 0, run.output
    doc = json.loads((tmp_path / "out" / "baseline.json").read_text())
    assert doc == {"silences": [ACTIVE, PENDING], "rule_groups": shipped_groups()}


def test_bad_settings_are_refused_before_anything_is_asked(tmp_path: Path, stack: tuple[Stack, int]) -> None:
    state, port = stack
    run = health(tmp_path, port, time.time(), vigil_health_mode="upgrade")
    host, msg = one_failure(run)
    assert msg.startswith("health: `vigil_health_mode` is check or baseline"), msg
    assert state.queries == []


def test_a_silence_id_of_the_baseline_that_is_a_template_is_read_as_data_and_refused(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    """The check reads the ids the way the upgrade hands them over (baseline.json, not extra vars):
    a file lookup's content is never rendered, so the lookup in the id does not run."""
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    marker = tmp_path / "ran"
    hostile = HOSTILE % marker
    host, msg = one_failure(health(tmp_path, port, since, silences=[ACTIVE, hostile]))
    assert not marker.exists()
    assert host == "mon01"
    shown = json.dumps(hostile)[:77] + "..."
    assert msg == (
        f"prometheus-alertmanager: {tmp_path}/out/baseline.json: silence id {shown} is not a UUID, the only "
        "form Alertmanager makes; refused"
    )


def test_a_silence_id_from_alertmanager_that_is_a_template_fails_the_baseline_and_never_runs(
    tmp_path: Path, stack: tuple[Stack, int]
) -> None:
    """Alertmanager's silence store belongs to its service user: what it answers is refused at the
    source, and nothing reaches baseline.json."""
    state, port = stack
    since = time.time() - 5
    healthy(state, since)
    marker = tmp_path / "ran"
    hostile = HOSTILE % marker
    state.silences.append({"id": hostile, "status": {"state": "active"}, "updatedAt": rfc3339(since)})
    host, msg = one_failure(health(tmp_path, port, since, vigil_health_mode="baseline"))
    assert not marker.exists()
    shown = json.dumps(hostile)[:77] + "..."
    assert (host, msg) == (
        "mon01",
        f"prometheus-alertmanager: silence id {shown} from /api/v2/silences is not a UUID, the only form "
        "Alertmanager makes; refused",
    )
    assert not (tmp_path / "out" / "baseline.json").exists()
