"""The core stack deployed from a signed bundle onto the lab's real systemd hosts.

lab up → build + import a debian-channel bundle → `vigil deploy` (the bundle's own roles) →
VictoriaMetrics healthy and node_exporter `up == 1` on all four hosts, vmalert's rules loaded,
Alertmanager ready, units running as their own users with the hardening applied, a second deploy
changes nothing, and still no route out of the lab.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
MON = "198.18.0.10"
UNITS = {
    "vigil-victoriametrics": ["mon01"],
    "vigil-vmalert": ["mon01"],
    "vigil-alertmanager": ["mon01"],
    "vigil-node-exporter": ["mon01", "ctl01", "gpu01", "gpu02"],
}
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(url: str, timeout: float = 10) -> tuple[int, str]:
    """GET a lab URL (only 198.18.0.0/24 addresses are ever asked for)."""
    assert url.startswith("http://198.18.0."), url
    with _NO_PROXY.open(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def query(expr: str) -> list[dict[str, Any]]:
    _, body = http(f"http://{MON}:8428/api/v1/query?query={urllib.parse.quote(expr)}")
    data = json.loads(body)
    assert data["status"] == "success", body
    return list(data["data"]["result"])


def vigil(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", "vigil.installer.cli", *args], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=1500)
    if res.returncode != 0:
        raise AssertionError(f"vigil {' '.join(args)} exited {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res


@pytest.fixture(scope="module")
def stack(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("stack")
    cache = os.environ.get("VIGIL_CACHE", str(tmp_path_factory.getbasetemp() / "vigil-cache"))
    env = {**os.environ, "VIGIL_HOME": str(tmp / "home"), "VIGIL_CACHE": cache, "PYTHONPATH": str(REPO)}
    vigil(env, "keys", "generate", "--out", str(tmp / "release"))
    vigil(env, "trust", "init", "--key", str(tmp / "release.pub"), "--threshold", "1", "--out", str(tmp / "trust.json"))
    vigil(env, "trust", "install", str(tmp / "trust.json"))
    vigil(env, "bundle", "build", "--channel", "debian", "--version", "1", "--key", str(tmp / "release.key"),
          "--out", str(tmp / "out"))
    vigil(env, "bundle", "import", str(tmp / "out" / "vigil-1-amd64.bundle"))
    t0 = time.monotonic()
    first = json.loads(vigil(env, "deploy", "-i", str(lab.inventory), "--json").stdout)
    first_secs = time.monotonic() - t0
    return {"env": env, "first": first, "first_secs": first_secs, "tmp": tmp}


def test_first_deploy_succeeds_on_every_host(stack: dict[str, Any]) -> None:
    first = stack["first"]
    assert first["ok"] is True
    assert sorted(first["hosts"]) == ["ctl01", "gpu01", "gpu02", "mon01"]
    for host, counts in first["hosts"].items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts)
        assert counts["changed"] > 0, f"{host}: a first deploy must change something"
    assert Path(first["run_dir"], "artifacts", "job_events").is_dir()


def test_victoriametrics_healthy_and_node_exporter_up_everywhere(stack: dict[str, Any]) -> None:
    assert http(f"http://{MON}:8428/health") == (200, "OK")
    deadline = time.monotonic() + 120
    while True:
        series = query('up{job="node_exporter"}')
        up = {s["metric"]["instance"]: s["value"][1] for s in series}
        if up == {"mon01": "1", "ctl01": "1", "gpu01": "1", "gpu02": "1"} or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert up == {"mon01": "1", "ctl01": "1", "gpu01": "1", "gpu02": "1"}


def test_every_scrape_target_is_up(stack: dict[str, Any]) -> None:
    deadline = time.monotonic() + 120
    while True:
        series = query("up")
        jobs = {(s["metric"]["job"], s["metric"]["instance"]): s["value"][1] for s in series}
        if (jobs and all(v == "1" for v in jobs.values())
                and {"victoriametrics", "vmalert", "alertmanager", "node_exporter"} <= {j for j, _ in jobs}):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"targets not all up: {jobs}")
        time.sleep(3)


def test_vmalert_loaded_its_rules(stack: dict[str, Any]) -> None:
    status, body = http(f"http://{MON}:8880/api/v1/rules")
    assert status == 200
    groups = json.loads(body)["data"]["groups"]
    assert groups, "vmalert has no rule groups loaded"
    assert sum(len(g["rules"]) for g in groups) > 0


def test_alertmanager_ready(stack: dict[str, Any]) -> None:
    status, _ = http(f"http://{MON}:9093/-/ready")
    assert status == 200


@pytest.mark.parametrize(("unit", "host"), [(u, h) for u, hs in UNITS.items() for h in hs])
def test_unit_runs_hardened_as_its_own_user(lab: Any, stack: dict[str, Any], unit: str, host: str) -> None:
    props = dict(
        line.split("=", 1)
        for line in lab.ssh(host, f"systemctl show {unit} -p ActiveState,User,NoNewPrivileges,ProtectSystem,"
                                  "ProtectHome,PrivateTmp,RestrictSUIDSGID,LockPersonality,MainPID").stdout.splitlines()
        if "=" in line
    )
    if props.get("ActiveState") != "active":
        journal = lab.ssh(host, f"journalctl -u {unit} -n 40 --no-pager", check=False).stdout
        pytest.fail(f"{host}: {unit} is {props.get('ActiveState')}\n{journal}")
    assert props["User"] not in ("", "root"), props
    assert (props["NoNewPrivileges"], props["ProtectSystem"], props["ProtectHome"], props["PrivateTmp"]) == (
        "yes", "strict", "yes", "yes"), props
    assert props["RestrictSUIDSGID"] == "yes" and props["LockPersonality"] == "yes", props
    shell = lab.ssh(host, f"getent passwd {props['User']}").stdout.strip().rsplit(":", 1)[-1]
    assert shell.endswith("nologin"), shell
    owner = lab.ssh(host, f"ps -o user= -p {props['MainPID']}").stdout.strip()
    assert owner == props["User"]


def test_second_deploy_changes_nothing(lab: Any, stack: dict[str, Any]) -> None:
    t0 = time.monotonic()
    second = json.loads(vigil(stack["env"], "deploy", "-i", str(lab.inventory), "--json").stdout)
    stack["second_secs"] = time.monotonic() - t0
    assert second["ok"] is True
    assert {h: c["changed"] for h, c in second["hosts"].items()} == {"ctl01": 0, "gpu01": 0, "gpu02": 0, "mon01": 0}


def test_no_host_has_a_route_out_of_the_lab(lab: Any, stack: dict[str, Any]) -> None:
    for host in lab.hosts:
        res = lab.ssh(host, "ip route get 192.0.2.1", check=False)
        assert res.returncode != 0 and "Network is unreachable" in res.stderr, (host, res.stdout, res.stderr)


def test_deploy_is_audited(stack: dict[str, Any]) -> None:
    vigil(stack["env"], "audit", "verify")
    log = Path(stack["env"]["VIGIL_HOME"], "audit", "log.jsonl").read_text().splitlines()
    deploys = [json.loads(line) for line in log if '"action":"deploy"' in line]
    assert len(deploys) >= 1 and deploys[0]["outcome"] == "ok"
    assert deploys[0]["details"]["bundle_version"] == 1
