"""One hot GPU is one alert across a job boundary, with the real vmalert and VictoriaMetrics of each
channel (debian's 1.79 in `make test`, debian-next's 1.112 in `make test-soak`) on 127.0.0.1.

The GPU alerts are the GPU's (roles/vmalert/files/rules/vigil-gpu-alerts.yml): their labels are
dcgm-exporter's without `hpc_job`, and the jobs on the GPU are annotations vmalert fills in by a query
at each evaluation. Here GPU 0 of gpu01 stays at 95 °C while job 101 (alice, physics) ends on it
and job 102 (bob, chemistry) starts. vmalert evaluates the shipped vigil_gpu_alerts group every
second, each `for:` capped at 3 s (the role's own filter, as the lab caps it), and posts its alerts
to a notifier on 127.0.0.1 that keeps every post. What is counted is the alerts vmalert sent as
firing, each by its labels: Alertmanager sends one notification for each new one in a group, none
for an alert it already has whose annotations changed.

The same run with GpuTemperatureCritical on the per-job series (the rule before the GPU was its
identity) sends two alerts: the second one pages again when job 102 starts. That run is the
control: it shows the counting can see a second page.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.components import fetched_bin, free_port
from tests.integration.test_reports import VM
from tests.unit.rules import rulekit

pytestmark = pytest.mark.integration

ALERT = "GpuTemperatureCritical"
#: the boundary, from the start of the run: job 101's last sample before it, job 102's first after
BOUNDARY_S = 20
#: how long the run lasts: past the boundary by the 1-minute window of the annotations' query
RUN_S = BOUNDARY_S + 70
GPU = {"instance": "gpu01", "job": "dcgm_exporter", "gpu": "0", "UUID": "GPU-0a", "modelName": "NVIDIA H100"}


class Notifier:
    """Alertmanager's alert API as vmalert posts to it (POST /api/v2/alerts, a JSON array), kept."""

    def __init__(self) -> None:
        self.posts: list[tuple[float, list[dict[str, Any]]]] = []
        notifier = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server interface
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                notifier.posts.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def firing(self) -> dict[tuple[tuple[str, str], ...], list[dict[str, Any]]]:
        """{an alert's labels: every post of it as firing}: vmalert sends a firing alert with an
        `endsAt` ahead of the post, a resolved one with the time it resolved."""
        out: dict[tuple[tuple[str, str], ...], list[dict[str, Any]]] = {}
        for at, alerts in self.posts:
            for alert in alerts:
                ends = datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00")).timestamp()
                if alert["labels"].get("alertname") == ALERT and ends > at:
                    out.setdefault(tuple(sorted(alert["labels"].items())), []).append(alert)
        return out

    def resolved(self) -> list[dict[str, str]]:
        """The labels of every post of an alert as resolved."""
        return [
            alert["labels"]
            for at, alerts in self.posts
            for alert in alerts
            if alert["labels"].get("alertname") == ALERT
            and datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00")).timestamp() <= at
        ]


def timeline(start: int) -> Iterator[dict[str, Any]]:
    """GPU 0 of gpu01 at 95 °C every second of the run: job 101's series up to the boundary, 102's from it."""
    for job, user, account, lo, hi in (
        ("101", "alice", "physics", start - 60, start + BOUNDARY_S),
        ("102", "bob", "chemistry", start + BOUNDARY_S, start + RUN_S + 60),
    ):
        stamps = [t * 1000 for t in range(lo, hi)]
        yield {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **GPU, "hpc_job": job},
            "values": [95.0] * len(stamps),
            "timestamps": stamps,
        }
        info = {"instance": "gpu01", "job": "node_exporter", "hpc_job": job, "user": user, "account": account}
        yield {
            "metric": {"__name__": "slurm_job_info", **info},
            "values": [1.0] * len(stamps),
            "timestamps": stamps,
        }


def rule_file(dest: Path, *, per_job: bool) -> Path:
    """The shipped GPU alert group as the lab deploys it (every second, `for:` at most 3 s); with
    ``per_job``, GpuTemperatureCritical on the per-job series instead of the GPU's."""
    text = (rulekit.RULES / "vigil-gpu-alerts.yml").read_text()
    if per_job:
        doc = yaml.safe_load(text)
        for rule in doc["groups"][0]["rules"]:
            if rule.get("alert") == ALERT:
                rule["expr"] = "DCGM_FI_DEV_GPU_TEMP >= 92"
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    dest.write_text(rulekit.vigil_rule_file(text, duration_cap="3s", interval_cap="1s"))
    return dest


@pytest.fixture(scope="module", params=["debian", pytest.param("debian-next", marks=pytest.mark.soak)])
def runs(
    request: pytest.FixtureRequest, vigil_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Notifier]:
    """Both rule files evaluated side by side over the same timeline, each by its own vmalert."""
    _, bin_dir = fetched_bin(request.param, "victoria-metrics", vigil_cache, tmp_path_factory)
    vmalert = bin_dir / "vmalert"
    tmp = tmp_path_factory.mktemp("identity")
    # answer queries up to the last second (the default hides the last 30 s from vmalert)
    vm = VM(bin_dir / "victoria-metrics", tmp / "vm", "-search.latencyOffset=1s")
    # vmalert from 1.94 on asks for the time 30 s before each evaluation (-rule.evalDelay)
    run_s = RUN_S + (0 if request.param == "debian" else 30)
    procs: list[subprocess.Popen[bytes]] = []
    notifiers = {"gpu": Notifier(), "per-job": Notifier()}
    try:
        start = int(time.time())
        vm.load(timeline(start))
        for name, notifier in notifiers.items():
            log = tmp / f"vmalert-{name}.log"
            procs.append(
                subprocess.Popen(
                    [
                        str(vmalert),
                        f"-rule={rule_file(tmp / f'{name}.yml', per_job=name == 'per-job')}",
                        f"-datasource.url={vm.url}",
                        f"-notifier.url={notifier.url}",
                        f"-httpListenAddr=127.0.0.1:{free_port()}",
                        "-loggerLevel=ERROR",
                    ],
                    stdout=open(log, "wb"),  # noqa: SIM115 - closed with the process
                    stderr=subprocess.STDOUT,
                )
            )
        while time.time() < start + run_s:
            for proc, name in zip(procs, notifiers, strict=True):
                assert proc.poll() is None, (tmp / f"vmalert-{name}.log").read_text()[-2000:]
            time.sleep(1)
        return notifiers
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)
        vm.stop()


def test_a_hot_gpu_is_one_alert_while_the_jobs_on_it_change(runs: dict[str, Notifier]) -> None:
    firing = runs["gpu"].firing()
    assert len(firing) == 1, sorted(firing)
    ((labels, posts),) = firing.items()
    assert dict(labels) == {**GPU, "alertname": ALERT, "alertgroup": "vigil_gpu_alerts", "severity": "P0"}
    jobs = [p["annotations"]["hpc_job"] for p in posts]
    # named as the jobs come and go, in the order they did: 101, both while the query's minute holds
    # both, then 102 alone
    seen = [j for i, j in enumerate(jobs) if i == 0 or jobs[i - 1] != j]
    assert seen[0] == "101" and seen[-1] == "102", seen
    assert set(seen) <= {"101", "101, 102", "102"}, seen
    users = {p["annotations"]["user"] for p in posts}
    assert {"alice", "bob"} <= users | {u for p in posts for u in p["annotations"]["user"].split(", ")}
    last = posts[-1]["annotations"]
    assert (last["hpc_job"], last["user"], last["account"]) == ("102", "bob", "chemistry")
    # one alert all along: it was never sent resolved in between
    assert len({p["startsAt"] for p in posts}) == 1, {p["startsAt"] for p in posts}
    assert runs["gpu"].resolved() == []


def test_control_the_per_job_rule_pages_again_when_the_next_job_starts(runs: dict[str, Notifier]) -> None:
    firing = runs["per-job"].firing()
    assert sorted(dict(labels)["hpc_job"] for labels in firing) == ["101", "102"], sorted(firing)
