"""The monitoring pair on the lab (docs/ha.md): a lab of two monitoring hosts (mon01, mon02), the
session's signed bundle deployed on it, and the failures it must survive (issue 36's drills).

The module brings up its own lab (`vigil lab up --monitoring-hosts 2`, one GPU node) and, when a
later module needs the lab, puts the default one back when it ends; it runs after the modules of the
default lab (tests/lab/conftest.py, LAST). The Alertmanagers notify a webhook receiver on the admin
host's lab address, which counts what they send (installer/lab/webhook.py).

All in `make test-soak` for now (each brings up the pair's lab and deploys it, about 5 minutes before
its drill): mon01 powered off while a GPU fault fires, VictoriaMetrics on mon01 down five minutes,
vmalert restarted inside a pending `for:`.
"""

from __future__ import annotations

import json
import os
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
def pair(
    lab: Lab,
    imported_release: Imported,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Pair]:
    inventory = tmp_path_factory.mktemp("pair-inventory")
    lab.down()
    try:
        up = lab_api.up(lab.paths, inventory_dir=inventory, gpu_nodes=1, monitoring_hosts=2)
        assert all(h.system == "running" for h in up.hosts), [h.to_json() for h in up.hosts]
        vigil = imported_release.vigil
        first = vigil.json("deploy", "-i", str(inventory), "--json", timeout=1800)
        assert first["ok"] is True, first
        log = inventory / "notifications.jsonl"  # kept with the run's files, to read after a failure
        with WebhookReceiver(host=ADMIN_IP, port=WEBHOOK_PORT, log=log) as hook:
            p = Pair(lab, vigil, imported_release.home, inventory, site_access(imported_release.home), hook)
            for address in (MON01, MON02):
                wait_for(
                    f"every target up in {address}'s VictoriaMetrics",
                    lambda a=address: _every_target_up(p, a),
                    300,
                )
            yield p
    finally:
        if os.environ.get("VIGIL_LAB_KEEP") != "1":  # kept: the pair's lab, to look into
            lab.down()
            if _lab_used_after(request):
                lab.up()  # the default lab, for the modules that run after


def _lab_used_after(request: pytest.FixtureRequest) -> bool:
    """Whether a test after this module's asks for the lab (in `make test` none does: the session
    ends with this module, and bringing the default lab up only to take it down costs minutes)."""
    items = request.session.items
    last = max(i for i, item in enumerate(items) if item.module is request.module)
    return any("lab" in getattr(item, "fixturenames", ()) for item in items[last + 1 :])


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


def _brief(notification: dict[str, Any]) -> list[str]:
    """One notification in words: its status, then each alert's name, status, start and end."""
    payload = notification["payload"]
    return [f"{payload.get('status')} {payload.get('groupKey')}"] + [
        f"{a.get('labels', {}).get('alertname')} {a.get('status')} {a.get('startsAt')} {a.get('endsAt')}"
        for a in payload.get("alerts") or []
    ]


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


# In `make test-soak`, as the other drills: the pair's lab and its deploy cost about 5 minutes before
# the drill's own 6. Its first whole run got four notifications for the alert: the alert's identity
# changed under it (the job in its labels), explained in docs/ha.md ("The failure drills in the lab").
@pytest.mark.soak
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
        off, off_at = time.monotonic(), time.time()
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
        assert len(again) == 1, [(n["peer"], n["received"] - off_at, _brief(n)) for n in again]
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


#: how long VictoriaMetrics on mon01 is down in the outage drill (issue 36: five minutes)
OUTAGE_S = 300


def _usage(pair: Pair, address: str) -> dict[str, Any]:
    month = time.strftime("%Y-%m", time.gmtime())
    res = pair.vigil(
        "report", "usage", "--period", month, "--vm", pair.access.url(address, 8428), timeout=300
    )
    doc = json.loads(Path(res.stdout.strip().splitlines()[-1]).read_bytes())
    return {a["account"]: a for a in doc["accounts"]}


def _samples(pair: Pair, address: str, match: str, start: float, end: float) -> dict[str, list[int]]:
    """The raw sample times of each series matching MATCH in one replica, by its labels."""
    params = [("match[]", match), ("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
    body = pair.vm(address).get("/api/v1/export", params).body.decode()
    out: dict[str, list[int]] = {}
    for line in body.splitlines():
        if line.strip():
            row = json.loads(line)
            out[json.dumps(row["metric"], sort_keys=True)] = sorted(row["timestamps"])
    return out


@pytest.mark.soak
def test_victoriametrics_on_mon01_down_five_minutes_loses_no_sample_and_the_reports_agree(
    pair: Pair, measured: Any
) -> None:
    job = _job(pair, OUTAGE_S + 240)
    wait_for(
        f"job {job} on the GPUs in both stores",
        lambda: all(
            pair.query(a, f'DCGM_FI_DEV_GPU_TEMP{{instance="gpu01",hpc_job="{job}"}}') for a in (MON01, MON02)
        ),
        120,
    )
    both = Replicas(
        [pair.access.url(MON01, 8428), pair.access.url(MON02, 8428)],
        service="VictoriaMetrics",
        access=pair.access,
        timeout=5,
        max_bytes=8 << 20,
    )
    failed, asked = [], 0
    pair.lab.ssh("mon01", "systemctl stop vigil-victoriametrics")
    t_down = time.time()
    try:
        while time.time() < t_down + OUTAGE_S:
            asked += 1
            try:
                both.get("/api/v1/query", [("query", "sum(up)")])
            except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                failed.append(str(exc))
            time.sleep(5)
    finally:
        pair.lab.ssh("mon01", "systemctl start vigil-victoriametrics")
    t_up = time.time()
    assert failed == [], failed
    measured("lab pair: client queries during mon01's outage (none failed)", float(asked))
    wait_for(
        "mon01's queues delivered (vigil status: every replica healthy)", lambda: _replicas_healthy(pair), 600
    )
    # the outage's samples: the same series and the same sample times in both replicas
    wait_for(
        "the job's end", lambda: not pair.query(MON02, f'slurm_job_info{{hpc_job="{job}"}}'), OUTAGE_S + 600
    )
    ours = _samples(pair, MON01, '{__name__=~"up|DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}', t_down, t_up)
    theirs = _samples(pair, MON02, '{__name__=~"up|DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}', t_down, t_up)
    assert ours.keys() == theirs.keys()
    missing = {k: sorted(set(theirs[k]) - set(ours[k])) for k in theirs if set(theirs[k]) - set(ours[k])}
    assert missing == {}, missing
    measured(
        "lab pair: samples of the outage in mon01 (from the queues)", float(sum(map(len, ours.values())))
    )
    # the usage report of the month, from either replica
    a, b = _usage(pair, MON01), _usage(pair, MON02)
    assert a.keys() == b.keys() and "physics" in a
    for account in a:
        for key in ("gpu_hours", "gpu_energy_kwh"):
            assert a[account][key] == pytest.approx(b[account][key], rel=0.001, abs=0.0005), (account, key)


def _second(stamp: str) -> str:
    """An RFC 3339 time (vmalert's activeAt) to the whole second."""
    return stamp.split(".")[0].removesuffix("Z")


@pytest.mark.soak
def test_vmalert_restarted_during_a_pending_for_keeps_when_it_became_active(pair: Pair) -> None:
    """vmalert restores its alerts' state on start (-remoteRead.url): a restart inside the `for:`
    window keeps the alert's activeAt, so it fires on time and is not sent again as new."""
    job = _job(pair, 600)
    vmalert = Replicas(
        [pair.access.url(MON01, 8880)], service="vmalert", access=pair.access, timeout=10, max_bytes=8 << 20
    )

    def thermal() -> dict[str, Any] | None:
        try:
            alerts = json.loads(vmalert.get("/api/v1/alerts").body)["data"]["alerts"] or []
        except Exception:  # noqa: BLE001 - restarting: not yet
            return None
        return next(
            (
                x
                for x in alerts
                if x["name"] == "GpuTemperatureCritical" and x["labels"].get("instance") == "gpu01"
            ),
            None,
        )

    try:
        wait_for(
            f"GPU 1 of gpu01 tagged with job {job}",
            lambda: pair.query(MON01, f'DCGM_FI_DEV_GPU_TEMP{{instance="gpu01",gpu="1",hpc_job="{job}"}}'),
            120,
        )
        pair.vigil("lab", "fault", "thermal", "gpu01", "1")
        pending = wait_for(
            "GpuTemperatureCritical pending on mon01",
            lambda: (a := thermal()) and a["state"] == "pending" and a,
            180,
            every=1,
        )
        # past the lab's 10 s latency offset, so the state's sample is readable, inside the window
        time.sleep(12)
        pair.lab.ssh("mon01", "systemctl restart vigil-vmalert")
        after = wait_for("GpuTemperatureCritical on mon01 again", thermal, 120, every=1)
        # restored from ALERTS_FOR_STATE, whose value is the time in whole seconds: the first run kept
        # 16:30:30 of 16:30:30.445 (a new pending one would start at the restart, 12 s or more later)
        assert _second(after["activeAt"]) == _second(pending["activeAt"]), (pending, after)
        fired = wait_for("it fires", lambda: (a := thermal()) and a["state"] == "firing" and a, 120, every=2)
        assert _second(fired["activeAt"]) == _second(pending["activeAt"]), fired
    finally:
        pair.vigil("lab", "fault", "thermal", "gpu01", "1", "--clear", check=False)
        pair.lab.ssh("ctl01", f"scancel {job}", check=False)
