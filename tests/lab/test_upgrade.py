"""Upgrade and rollback on the lab: debian (Debian 12's builds) -> debian-next (Debian 13's), a real
change of binaries, with a marker series written all along; then a bundle whose vmalert rules the new
binary rejects, which must be switched back on its first host and stop there."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import REPO, VIGIL
from tests.helpers.release import BAD, NEXT, Release, build_bad, build_next
from tests.helpers.shared import shared_bundle, shared_dir
from tests.lab import labhttp
from tests.lab.conftest import DeployedStack, Lab

pytestmark = pytest.mark.lab


def _bundle(name: str, build: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NAME's bundle file: the lanes' shared build (started at the session's start, see
    tests/helpers/shared.py), or one built here."""
    shared = shared_dir()
    if shared is not None:
        return shared_bundle(shared, name, build)
    return Path(build(tmp_path_factory.mktemp(name)))


@pytest.fixture(scope="module")
def next_version(
    release: Release, deployed_stack: DeployedStack, tmp_path_factory: pytest.TempPathFactory
) -> int:
    """The debian-next bundle, built with the session's key and imported beside the debian one."""
    path = _bundle("debian-next", lambda out: build_next(release, out), tmp_path_factory)
    deployed_stack.vigil("bundle", "import", str(path))
    return NEXT


class Marker:
    """Writes ``vigil_upgrade_marker`` to VictoriaMetrics once a second and keeps what was acknowledged."""

    def __init__(self) -> None:
        self.acked: list[int] = []  # timestamps (ms) the store answered 204 for
        self.refused: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        opener = labhttp.opener()
        while not self._stop.is_set():
            ts = int(time.time() * 1000)
            body = f"vigil_upgrade_marker 1 {ts}\n".encode()
            req = urllib.request.Request(  # noqa: S310 - VM is the lab's https://198.18.0.10:8428
                f"{labhttp.VM}/api/v1/import/prometheus", data=body, method="POST"
            )
            try:
                with opener.open(req, timeout=2) as resp:
                    (self.acked if resp.status == 204 else self.refused).append(ts)
            except OSError:
                self.refused.append(ts)
            self._stop.wait(1.0)

    def __enter__(self) -> Marker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _stored_marker(start_ms: int, end_ms: int) -> set[int]:
    url = (
        f"{labhttp.VM}/api/v1/export?match[]=vigil_upgrade_marker"
        f"&start={start_ms / 1000:.3f}&end={end_ms / 1000:.3f}"
    )
    _, body = labhttp.get(url)
    out: set[int] = set()
    for line in body.splitlines():
        if line.strip():
            out.update(json.loads(line)["timestamps"])
    return out


def _status(stack: DeployedStack, lab: Lab) -> dict[str, Any]:
    res = stack.vigil("status", "-i", str(lab.inventory), "--json", check=False)
    assert res.returncode in (0, 1), res.stderr
    return dict(json.loads(res.stdout))


def _every_target_up_after(t0: float) -> None:
    """Every scrape target scraped since T0 (the run's end) and up. A query for ``up == 0`` asked
    at once would see the scrapes taken while the run restarted the exporters (and, without
    ``nocache``, VictoriaMetrics answers as of its latency offset ago): wait for a scrape of each
    target after T0."""
    labhttp.wait_for(
        "every target scraped after the run",
        lambda: labhttp.query(f"timestamp(up) <= {t0:.3f}", nocache=True) == [],
        60,
        every=2,
    )
    assert labhttp.query("up == 0", nocache=True) == []


def _runs_bundle_binary(stack: DeployedStack, lab: Lab, host: str, version: int, rel: str) -> None:
    """HOST's /opt/vigil/<component>/current/<rest of REL> is byte for byte bundle VERSION's file REL."""
    want = hashlib.sha256((stack.home / f"bundles/{version}/files/components/{rel}").read_bytes()).hexdigest()
    component, rest = rel.split("/", 1)
    got = lab.ssh(host, f"sha256sum /opt/vigil/{component}/current/{rest}").stdout.split()[0]
    assert got == want, f"{host}: {rel} is not bundle {version}'s"


def test_the_plan_names_each_version_change_and_changes_nothing(
    deployed_stack: DeployedStack, lab: Lab, next_version: int, measured: Any
) -> None:
    before = _status(deployed_stack, lab)
    assert before["attention"] == [], before
    t0 = time.monotonic()
    plan = deployed_stack.vigil.json(
        "upgrade", "-i", str(lab.inventory), "--to", str(next_version), "--check", "--json"
    )
    measured(
        "lab: upgrade --check debian -> debian-next (versions, and a check run for files)",
        time.monotonic() - t0,
    )
    assert plan["check"] is True
    # the files: from a check-mode run of debian-next's roles; its vmalert (1.112) takes keep_firing_for
    assert plan["files_unknown"] == "", plan["files_unknown"]
    assert "/etc/vigil/vmalert/rules/vigil-nodes.yml" in plan["files"].get("mon01", []), plan["files"]
    assert not any(p.startswith("/opt/vigil/") for paths in plan["files"].values() for p in paths), plan
    moved = {(c["host"], c["component"], c["old"], c["new"]) for c in plan["changes"] if c["old"] != c["new"]}
    assert ("mon01", "victoria-metrics", "1.79.5+ds1-2+b5", "1.112.0+ds1-2") in moved
    assert ("gpu01", "prometheus-node-exporter", "1.5.0-1+b6", "1.9.0-1+b4") in moved
    assert _status(deployed_stack, lab)["hosts"] == before["hosts"]  # nothing changed


#: where the upgrade is killed with SIGKILL, one run after the other: (a phase directory the run
#: reaches, seconds after it appears). Phase boundaries, and the middle of a play on mon01: the soak
#: test (`make test-soak`) goes through all four.
KILLS = (("nodes", 0.0), ("health", 0.0), ("services", 20.0), ("store", 0.0))
#: `make test`'s one interruption: in the middle of the services' play on mon01, after the nodes'
#: step and its health check are done
KILL_MID_PLAY = ("services", 20.0)


def _playbooks_of(run_dir: Path) -> list[int]:
    """Pids of ansible-playbook processes working for RUN_DIR (its artifacts are in their command line)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ansible-playbook" in cmd and str(run_dir) in cmd:
            pids.append(int(proc.name))
    return pids


def _killed_upgrade(stack: DeployedStack, lab: Lab, version: int, phase: str, delay: float) -> list[str]:
    """Start `vigil upgrade`, SIGKILL it DELAY seconds after its run reaches PHASE; the phases it reached."""
    runs = stack.home / "runs"
    before = {p.name for p in runs.iterdir()}
    argv = [*VIGIL, "upgrade", "-i", str(lab.inventory), "--to", str(version), "--serial", "3"]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, env=stack.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        run_dir: Path | None = None
        try:
            deadline = time.monotonic() + 900
            while True:
                if proc.poll() is not None:
                    err.seek(0)
                    pytest.fail(f"upgrade exited {proc.returncode} before {phase}: {err.read()[-3000:]}")
                assert time.monotonic() < deadline, f"the upgrade never reached {phase}"
                if run_dir is None:
                    run_dir = next((p for p in runs.glob("*-upgrade") if p.name not in before), None)
                if run_dir is not None and any(
                    re.fullmatch(rf"\d\d-{phase}(-v\d+)?", p.name) for p in run_dir.iterdir()
                ):
                    break
                time.sleep(0.2)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    # the playbook it was running goes with it: its terminal (ansible-runner's pty) hangs up
    deadline = time.monotonic() + 30
    while _playbooks_of(run_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _playbooks_of(run_dir) == [], f"ansible-playbook outlived the killed upgrade at {phase}"
    return sorted(p.name for p in run_dir.iterdir() if re.match(r"\d\d-", p.name))


def _killed_then_run_on(
    stack: DeployedStack, lab: Lab, version: int, kills: tuple[tuple[str, float], ...]
) -> tuple[dict[str, Any], Marker, float, float]:
    """Kill an upgrade to VERSION at each of KILLS in turn, then run it on to the end, with the
    marker series written all along: (the last run's --json, the marker, its end, seconds taken)."""
    t0 = time.monotonic()
    with Marker() as marker:
        time.sleep(5)
        for phase, delay in kills:
            reached = _killed_upgrade(stack, lab, version, phase, delay)
            print(f"killed at {phase} +{delay:.0f} s after {reached}")
        out = stack.vigil.json(
            "upgrade", "-i", str(lab.inventory), "--to", str(version), "--serial", "3", "--json"
        )
        t_end = time.time()
        time.sleep(15)
    return out, marker, t_end, time.monotonic() - t0 - 20


def _converged_losing_no_acknowledged_sample(
    stack: DeployedStack, lab: Lab, version: int, marker: Marker, t_end: float, measured: Any
) -> None:
    # every sample the store acknowledged is there after the store's own restart
    labhttp.get(f"{labhttp.VM}/internal/force_flush")
    stored = _stored_marker(min(marker.acked) - 1, max(marker.acked) + 1)
    lost = sorted(set(marker.acked) - stored)
    assert lost == [], f"{len(lost)} acknowledged samples lost: {lost[:5]}"
    window = (max(marker.refused) - min(marker.refused)) / 1000 if marker.refused else 0.0
    measured("lab: marker writes refused during the store's restart (s)", window)
    assert len(marker.acked) > 20
    status = _status(stack, lab)
    assert status["attention"] == [], status
    for host, st in status["hosts"].items():
        assert {c["bundle_version"] for c in st["components"].values()} == {version}, host
    assert status["hosts"]["mon01"]["components"]["victoria-metrics"]["version"] == "1.112.0+ds1-2"
    # the binaries that run are the new bundle's (Debian's VictoriaMetrics build prints no version)
    _runs_bundle_binary(stack, lab, "mon01", version, "victoria-metrics/bin/victoria-metrics")
    _runs_bundle_binary(stack, lab, "gpu01", version, "prometheus-node-exporter/bin/node_exporter")
    # every target up, the alerting rules evaluated by the new vmalert
    _every_target_up_after(t_end)
    groups = labhttp.get_json(f"{labhttp.VMALERT}/api/v1/rules")["data"]["groups"]
    assert groups and all(not r.get("lastError") for g in groups for r in g["rules"])
    # the killed runs died without their closing record; the audit chain is still whole
    stack.vigil("audit", "verify")


def test_upgrade_killed_mid_play_runs_on_from_where_it_stopped_and_loses_no_acknowledged_sample(
    deployed_stack: DeployedStack, lab: Lab, next_version: int, measured: Any
) -> None:
    out, marker, t_end, secs = _killed_then_run_on(deployed_stack, lab, next_version, (KILL_MID_PLAY,))
    measured("lab: upgrade debian -> debian-next, killed mid-play, then run on", secs)
    assert out["bundle_version"] == next_version
    # the nodes' step, finished and checked before the kill, is not done again; mon01's services
    # (killed in their play, unless it had just ended) and then its store are
    assert [s["phase"] for s in out["steps"]] in (["services", "store"], ["store"]), out
    _converged_losing_no_acknowledged_sample(deployed_stack, lab, next_version, marker, t_end, measured)


@pytest.mark.soak
def test_upgrade_killed_at_each_phase_in_turn_converges_and_loses_no_acknowledged_sample(
    deployed_stack: DeployedStack, lab: Lab, next_version: int, measured: Any
) -> None:
    before = _status(deployed_stack, lab)
    assert all(
        c["bundle_version"] == 1 for st in before["hosts"].values() for c in st["components"].values()
    ), "the kills at every phase start from the first deploy (run them alone: make test-soak)"
    out, marker, t_end, secs = _killed_then_run_on(deployed_stack, lab, next_version, KILLS)
    measured("lab: upgrade debian -> debian-next, killed 4 times, then run on", secs)
    assert out["bundle_version"] == next_version
    # what the killed runs finished is not done again: the last kill came as the store's step began
    assert [s["phase"] for s in out["steps"]] == ["store"], out
    _converged_losing_no_acknowledged_sample(deployed_stack, lab, next_version, marker, t_end, measured)


UNIT = "/etc/systemd/system/vigil-node-exporter.service"


def _edit_unit_on_gpu02(stack: DeployedStack, lab: Lab) -> None:
    """Append a line to gpu02's node_exporter unit (a copy of it kept in /run); `vigil status` must
    name it."""
    lab.ssh("gpu02", f"cp -p {UNIT} /run/vigil-unit.kept && echo '# local edit' >> {UNIT}")
    status = _status(stack, lab)
    assert status["attention"] == ["gpu02"], status
    drift = status["hosts"]["gpu02"]["drift"]
    assert any(d["path"] == UNIT for d in drift), drift


def test_a_rerun_at_the_target_changes_nothing_and_status_names_a_changed_file(
    deployed_stack: DeployedStack, lab: Lab, next_version: int, measured: Any
) -> None:
    t0 = time.monotonic()
    out = deployed_stack.vigil.json("upgrade", "-i", str(lab.inventory), "--to", str(next_version), "--json")
    measured("lab: upgrade already at the target (no-op)", time.monotonic() - t0)
    assert out["steps"] == [] and len(out["skipped"]) >= 3, out
    # a changed file on a host: status names it (the upgrade putting it back is the soak test below;
    # a deploy putting drift back is tests/lab/test_deploy_stack.py's); put back by hand here
    _edit_unit_on_gpu02(deployed_stack, lab)
    lab.ssh("gpu02", f"cp -p /run/vigil-unit.kept {UNIT} && rm /run/vigil-unit.kept")
    assert _status(deployed_stack, lab)["attention"] == []


@pytest.mark.soak
def test_drift_at_the_target_is_put_back_by_the_upgrade_on_that_host_alone(
    deployed_stack: DeployedStack, lab: Lab, next_version: int
) -> None:
    _edit_unit_on_gpu02(deployed_stack, lab)
    out = deployed_stack.vigil.json("upgrade", "-i", str(lab.inventory), "--to", str(next_version), "--json")
    assert [s["hosts"] for s in out["steps"]] == [["gpu02"]], out
    assert _status(deployed_stack, lab)["attention"] == []


@pytest.fixture(scope="module")
def bad_version(
    release: Release,
    deployed_stack: DeployedStack,
    next_version: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> int:
    """debian-next again, with Ansible content that starts node_exporter with a collector it does not know:
    the binary exits at start on the first host the upgrade reaches (tests/helpers/release.py)."""
    path = _bundle("debian-next-bad", lambda out: build_bad(release, out), tmp_path_factory)
    deployed_stack.vigil("bundle", "import", str(path))
    return BAD


def test_a_bundle_whose_exporter_exits_at_start_is_switched_back_on_the_first_host(
    deployed_stack: DeployedStack, lab: Lab, next_version: int, bad_version: int
) -> None:
    res = deployed_stack.vigil("upgrade", "-i", str(lab.inventory), "--to", str(bad_version), check=False)
    assert res.returncode == 1, res.stdout + res.stderr
    fail = [ln for ln in res.stderr.splitlines() if ln.startswith("FAIL: host ")][-1]
    assert fail.startswith("FAIL: host ctl01: "), fail
    assert f"back on bundle {next_version} and healthy" in fail, fail
    status = _status(deployed_stack, lab)
    assert status["attention"] == [], status
    for host, st in status["hosts"].items():  # ctl01 switched back, the rest never touched
        assert {c["bundle_version"] for c in st["components"].values()} == {next_version}, host
    records = deployed_stack.vigil.json("audit", "show", "--action", "upgrade", "--json")
    last = records[-1]
    assert last["outcome"] == "failed" and "host ctl01" in last["reason"], last


def test_rollback_refuses_to_hand_the_store_to_an_older_release_then_rolls_back_the_rest(
    deployed_stack: DeployedStack, lab: Lab, next_version: int, bad_version: int, measured: Any
) -> None:
    res = deployed_stack.vigil("rollback", "-i", str(lab.inventory), check=False)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL: host mon01: victoria-metrics 1.112.0+ds1-2 -> 1.79.5+ds1-2+b5 refused" in res.stderr, (
        res.stderr
    )
    assert "nothing was changed" in res.stderr
    assert (
        _status(deployed_stack, lab)["hosts"]["gpu01"]["components"]["prometheus-node-exporter"][
            "bundle_version"
        ]
        == next_version
    )
    t0 = time.monotonic()
    out = deployed_stack.vigil.json(
        "rollback", "-i", str(lab.inventory), "--keep-store", "--serial", "3", "--json"
    )
    t_end = time.time()
    measured("lab: rollback debian-next -> debian, store kept, --serial 3", time.monotonic() - t0)
    assert out["bundle_version"] == 1, out
    status = _status(deployed_stack, lab)
    assert status["attention"] == [], status
    mon = status["hosts"]["mon01"]["components"]
    assert mon["victoria-metrics"]["bundle_version"] == next_version  # kept
    assert mon["prometheus-alertmanager"]["version"] == "0.25.0-1+b4"
    assert status["hosts"]["gpu01"]["components"]["prometheus-node-exporter"]["version"] == "1.5.0-1+b6"
    _runs_bundle_binary(deployed_stack, lab, "gpu01", 1, "prometheus-node-exporter/bin/node_exporter")
    _runs_bundle_binary(deployed_stack, lab, "mon01", next_version, "victoria-metrics/bin/victoria-metrics")
    # the data written before and during the upgrade is still there
    assert labhttp.query("count_over_time(vigil_upgrade_marker[1h])"), "the marker series is gone"
    _every_target_up_after(t_end)
