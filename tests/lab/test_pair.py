"""The monitoring pair on the lab (docs/ha.md): a lab of two monitoring hosts (mon01, mon02), the
session's signed bundle deployed on it, and the failures it must survive (issue 36's drills).

The module brings up its own lab (`vigil lab up --monitoring-hosts 2`, one GPU node) and puts the
default one back when it ends; it runs after the modules of the default lab (tests/lab/conftest.py,
LAST). The Alertmanagers notify a webhook receiver on the admin host's lab address, which counts
what they send (installer/lab/webhook.py).

In `make test`: mon01 powered off while a GPU fault fires. The others are in `make test-soak`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.release import Imported
from tests.lab.conftest import Lab
from vigil.installer import lab as lab_api
from vigil.installer.access import SiteAccess, site_access
from vigil.installer.lab.hosts import ADMIN_IP
from vigil.installer.lab.inventory import WEBHOOK_PORT
from vigil.installer.lab.webhook import WebhookReceiver
from vigil.installer.stack import Replicas

pytestmark = [pytest.mark.lab]

MON01, MON02 = "198.18.0.10", "198.18.0.12"
#: seconds the lab's Alertmanagers take for a notification at most: the P0 route's fixed 30 s
#: group_wait, a member's wait for its peer (15 s per position), the lab's 10 s evaluation and 20 s
#: `for:` cap, a scrape (10 s); with room
NOTIFY_S = 180


@dataclass
class Pair:
    lab: Lab
    vigil: Any
    home: Path
    inventory: Path
    access: SiteAccess
    hook: WebhookReceiver

    def vm(self, address: str) -> Replicas:
        return Replicas(
            [self.access.url(address, 8428)],
            service="VictoriaMetrics",
            access=self.access,
            timeout=10,
            max_bytes=8 << 20,
        )

    def am(self, address: str) -> Replicas:
        return Replicas(
            [self.access.url(address, 9093)],
            service="Alertmanager",
            access=self.access,
            timeout=10,
            max_bytes=8 << 20,
        )

    def query(self, address: str, expr: str) -> list[dict[str, Any]]:
        body = self.vm(address).get("/api/v1/query", [("query", expr), ("nocache", "1")]).body
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def status(self) -> dict[str, Any]:
        res = self.vigil("status", "-i", str(self.inventory), "--json", check=False, timeout=600)
        assert res.returncode in (0, 1), res.stderr
        return dict(json.loads(res.stdout))


def wait_for(what: str, check: Any, timeout: float, every: float = 5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {got!r}")
        time.sleep(every)


def _every_target_up(pair: Pair, address: str) -> bool:
    try:
        up = pair.query(address, "up")
    except Exception:  # noqa: BLE001 - not yet answering is "not yet"
        return False
    jobs = {s["metric"].get("job") for s in up}
    return (
        bool(up)
        and all(s["value"][1] == "1" for s in up)
        and {"node_exporter", "dcgm_exporter", "slurm_exporter", "vmagent"} <= jobs
    )


def _replicas_healthy(pair: Pair) -> dict[str, Any] | None:
    st = pair.status()
    return st if st["replicas"] and not st["replicas_attention"] and not st["replicas_unread"] else None


@pytest.fixture(scope="module")
def pair(lab: Lab, imported_release: Imported, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    inventory = tmp_path_factory.mktemp("pair-inventory")
    lab.down()
    try:
        up = lab_api.up(lab.paths, inventory_dir=inventory, gpu_nodes=1, monitoring_hosts=2)
        assert all(h.system == "running" for h in up.hosts), [h.to_json() for h in up.hosts]
        vigil = imported_release.vigil
        first = vigil.json("deploy", "-i", str(inventory), "--json", timeout=1800)
        assert first["ok"] is True, first
        with WebhookReceiver(host=ADMIN_IP, port=WEBHOOK_PORT) as hook:
            p = Pair(lab, vigil, imported_release.home, inventory, site_access(imported_release.home), hook)
            for address in (MON01, MON02):
                wait_for(
                    f"every target up in {address}'s VictoriaMetrics",
                    lambda a=address: _every_target_up(p, a),
                    300,
                )
            yield p
    finally:
        lab.down()
        lab.up()  # the default lab, for whatever runs after


def _job(pair: Pair, seconds: int) -> str:
    out = pair.vigil.json(
        "lab",
        "job",
        "--account",
        "physics",
        "--user",
        "alice",
        "--gpus",
        "4",
        "--seconds",
        str(seconds),
        "--node",
        "gpu01",
        "--json",
    )
    return str(out["job_id"])


def _firing(hook: WebhookReceiver, alertname: str, instance: str) -> list[dict[str, Any]]:
    """The notifications that carried ALERTNAME on INSTANCE as firing."""
    return [
        n
        for n in hook.notifications()
        if any(
            a.get("status") == "firing"
            and a.get("labels", {}).get("alertname") == alertname
            and a.get("labels", {}).get("instance") == instance
            for a in n["payload"].get("alerts") or []
        )
    ]


def test_mon01_powered_off_while_a_gpu_fault_fires_notifies_once_from_mon02_and_not_again_on_return(
    pair: Pair, measured: Any
) -> None:
    healthy = wait_for(
        "both replicas of each service healthy in `vigil status`", lambda: _replicas_healthy(pair), 180
    )
    assert [r["url"] for r in healthy["replicas"]] == [
        pair.access.url(MON01, 8428),
        pair.access.url(MON02, 8428),
        pair.access.url(MON01, 9093),
        pair.access.url(MON02, 9093),
    ]
    assert all(r["cluster_peers"] == 2 for r in healthy["replicas"] if r["service"] == "Alertmanager")
    job = _job(pair, 900)
    wait_for(
        f"GPU 0 of gpu01 tagged with job {job} in mon02's store",
        lambda: pair.query(MON02, f'DCGM_FI_DEV_GPU_TEMP{{instance="gpu01",gpu="0",hpc_job="{job}"}}'),
        120,
    )
    try:
        pair.vigil("lab", "fault", "power-off", "mon01")
        off = time.monotonic()
        pair.vigil("lab", "fault", "ecc-dbe", "gpu01", "0")
        got = wait_for(
            "GpuEccDoubleBitError of gpu01 at the webhook",
            lambda: _firing(pair.hook, "GpuEccDoubleBitError", "gpu01"),
            NOTIFY_S,
        )
        measured("lab pair: mon01 off, fault to its notification", time.monotonic() - off)
        assert {n["peer"] for n in got} == {MON02}, got
        # what vigil status says of the pair with mon01 off: its two services down, mon02's healthy
        st = pair.status()
        by_url = {r["url"]: r for r in st["replicas"]}
        for port in (8428, 9093):
            assert by_url[pair.access.url(MON01, port)]["problems"][0].startswith("DOWN:"), st["replicas"]
        assert by_url[pair.access.url(MON02, 8428)]["ok"], st["replicas"]
        # mon01 back from its disk: both Alertmanagers one cluster again, and nothing sent twice
        pair.vigil("lab", "fault", "power-off", "mon01", "--clear", timeout=600)
        wait_for("both replicas of each service healthy again", lambda: _replicas_healthy(pair), 300)
        back = time.monotonic()
        time.sleep(max(0.0, back + NOTIFY_S - time.monotonic()))
        again = _firing(pair.hook, "GpuEccDoubleBitError", "gpu01")
        assert len(again) == 1, [(n["peer"], n["received"]) for n in again]
        contents = [
            (
                n["payload"].get("groupKey"),
                n["payload"].get("status"),
                tuple(sorted(a.get("fingerprint", "") for a in n["payload"].get("alerts") or [])),
            )
            for n in pair.hook.notifications()
        ]
        duplicates = sorted({c for c in contents if contents.count(c) > 1})
        assert duplicates == [], duplicates
        measured("lab pair: notifications received in the drill", float(len(pair.hook.notifications())))
    finally:
        pair.vigil("lab", "fault", "ecc-dbe", "gpu01", "0", "--clear", check=False)
        pair.vigil("lab", "fault", "power-off", "mon01", "--clear", check=False, timeout=600)
        pair.lab.ssh("ctl01", f"scancel {job}", check=False)
