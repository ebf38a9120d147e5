"""The fleet simulator: its schedule, its three exporters' pages, its server and its scrape jobs.

The pages are checked the way the real exporters' are (the strict parser and promtool), the job
labels against the schedule, and the server as any exporter's: TLS and Basic auth on every page,
exact paths only.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.exporters.expo_helpers import DCGM_LINT, FakeClock, parse_exposition, promtool_check
from tests.unit.exporters.tls_helpers import PASSWORD, USER, Pki, basic, client_context, make_pki
from vigil.exporters._http import BasicAuth, make_server, server_context
from vigil.exporters.fleetsim.__main__ import main as fleetsim_main
from vigil.exporters.fleetsim.fleet import Fleet, node_names, path, scrape_configs
from vigil.exporters.fleetsim.schedule import ACCOUNTS, Schedule

T0 = 1_796_000_000.0  # a wall-clock instant (2026-11)


class Wall:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fleet(nodes: int = 6, gpus: int = 8, cpus: int = 4, **kw: object) -> tuple[Fleet, Wall, FakeClock]:
    wall, clock = Wall(), FakeClock()
    return Fleet(nodes=nodes, gpus=gpus, cpus=cpus, wall=wall, clock=clock, **kw), wall, clock  # type: ignore[arg-type]


# --- the schedule ------------------------------------------------------------------------------


def test_the_schedule_is_a_function_of_node_and_time() -> None:
    a, b = Schedule(16, 8, seed=3), Schedule(16, 8, seed=3)
    for node in range(16):
        for t in (T0, T0 + 599, T0 + 7200):
            assert a.jobs(node, t) == b.jobs(node, t)
    assert any(Schedule(16, 8, seed=4).jobs(n, T0) != a.jobs(n, T0) for n in range(16))


def test_jobs_hold_disjoint_gpus_for_their_whole_slot_and_their_ids_are_unique() -> None:
    s = Schedule(32, 8, job_seconds=600)
    ids: dict[str, tuple[int, float]] = {}
    accounts: Counter[str] = Counter()
    for node in range(32):
        for step in range(0, 6 * 3600, 300):
            t = T0 + step
            jobs = s.jobs(node, t)
            held = [g for j in jobs for g in j.gpus]
            assert len(held) == len(set(held)) and all(0 <= g < 8 for g in held)
            for j in jobs:
                assert j.start <= t < j.end and j.end - j.start == 600
                assert s.jobs(node, j.start) == jobs and s.jobs(node, j.end - 0.001) == jobs
                assert ids.setdefault(j.id, (node, j.start)) == (node, j.start), f"job id {j.id} reused"
                assert j.user in dict(ACCOUNTS)[j.account]
                accounts[j.account] += 1
            assert s.jobmap(node, t) == {str(g): [j.id] for j in jobs for g in j.gpus}
    assert set(accounts) == {a for a, _ in ACCOUNTS}
    # idle GPUs exist, and so do whole-node jobs
    sizes = Counter(len(j.gpus) for n in range(32) for j in s.jobs(n, T0))
    assert 8 in sizes or sizes, sizes


def test_the_fleet_does_not_change_its_jobs_all_at_once() -> None:
    s = Schedule(64, 8, job_seconds=1800)
    changed = sum(s.jobs(n, T0) != s.jobs(n, T0 + 60) for n in range(64))
    assert 0 < changed < 16  # about 64 * 60 / 1800


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"nodes": 0, "gpus": 8}, "at least one node"),
        ({"nodes": 4, "gpus": 0}, "at least one node"),
        ({"nodes": 4, "gpus": 8, "job_seconds": 5}, "at least 60 s"),
    ],
)
def test_a_schedule_that_cannot_be_is_refused(kw: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Schedule(**kw)


def test_a_node_outside_the_fleet_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the fleet"):
        Schedule(4, 8).jobs(4, T0)


# --- the pages -----------------------------------------------------------------------------------


def test_each_nodes_gpu_page_carries_its_jobs_as_the_job_map_would() -> None:
    f, wall, clock = fleet()
    pages = f.pages()
    for i, name in enumerate(f.names):
        text = pages[path(name, "dcgm_exporter")]()
        fams = parse_exposition(text)
        promtool_check(text, allow=DCGM_LINT)
        power = fams["DCGM_FI_DEV_POWER_USAGE"]
        assert len(power) == 8 and {lab["Hostname"] for lab, _ in power} == {name}
        tagged = {lab["gpu"]: [lab["hpc_job"]] for lab, _ in power if "hpc_job" in lab}
        assert tagged == f.schedule.jobmap(i, wall.t)
        for lab, watts in power:  # busy GPUs draw busy power, idle ones idle power
            assert (watts > 200) == ("hpc_job" in lab)


def test_a_gpus_job_changes_at_its_slots_end_and_its_energy_keeps_counting() -> None:
    f, wall, clock = fleet(nodes=1, job_seconds=600)
    page = f.pages()[path(f.names[0], "dcgm_exporter")]
    job = f.schedule.jobs(0, wall.t)
    end = min(j.end for j in job) if job else wall.t - (wall.t % 600) + 600
    energy: list[float] = []
    seen: list[dict[str, list[str]]] = []
    for t in (end - 30, end - 1, end + 1, end + 30):
        clock.advance(t - wall.t)
        wall.t = t
        fams = parse_exposition(page())
        energy.append(sum(v for _, v in fams["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]))
        seen.append(
            {lab["gpu"]: [lab["hpc_job"]] for lab, _ in fams["DCGM_FI_DEV_GPU_TEMP"] if "hpc_job" in lab}
        )
    assert seen[0] == seen[1] == f.schedule.jobmap(0, end - 1)
    assert seen[2] == seen[3] == f.schedule.jobmap(0, end + 1)
    assert seen[1] != seen[2]
    assert energy == sorted(energy) and energy[0] < energy[-1]


def test_each_nodes_node_exporter_page_is_valid_and_names_its_jobs() -> None:
    f, wall, _ = fleet(cpus=6)
    pages = f.pages()
    for i, name in enumerate(f.names):
        text = pages[path(name, "node_exporter")]()
        fams = parse_exposition(text)
        promtool_check(text, allow=("camelCase",))
        assert len(fams["node_cpu_seconds_total"]) == 6 * 8
        info = {
            (lab["hpc_job"], lab["user"], lab["account"], lab["node"])
            for lab, _ in fams.get("slurm_job_info", [])
        }
        assert info == {(j.id, j.user, j.account, name) for j in f.schedule.jobs(i, wall.t)}
        assert fams["node_filesystem_avail_bytes"] and fams["node_timex_sync_status"][0][1] == 1


def test_node_counters_never_go_down() -> None:
    f, wall, _ = fleet(nodes=2, job_seconds=600)
    page = f.pages()[path(f.names[1], "node_exporter")]
    before = parse_exposition(page())
    for _ in range(4):  # across job boundaries too: busy and idle slots
        wall.t += 450
        after = parse_exposition(page())
        for name in (
            "node_cpu_seconds_total",
            "node_network_receive_bytes_total",
            "node_context_switches_total",
        ):
            old = {tuple(sorted(lab.items())): v for lab, v in before[name]}
            for lab, v in after[name]:
                assert v >= old[tuple(sorted(lab.items()))], name
        before = after


def test_the_slurm_page_is_the_slurm_exporters_for_the_fleets_jobs() -> None:
    f, wall, _ = fleet(nodes=12)
    text = f.pages()[path(None, "slurm_exporter")]()
    fams = parse_exposition(text)
    promtool_check(text)
    want: Counter[str] = Counter()
    running: Counter[str] = Counter()
    for n in range(12):
        for j in f.schedule.jobs(n, wall.t):
            want[j.account] += len(j.gpus)
            running[j.account] += 1
    assert {lab["account"]: v for lab, v in fams["slurm_account_gpus_allocated"]} == dict(want)
    got = {lab["account"]: v for lab, v in fams["slurm_jobs"] if lab["state"] == "running"}
    assert got == dict(running)
    assert fams["slurm_gpus_configured"][0][1] == 12 * 8
    assert {lab["node"] for lab, _ in fams["slurm_node_state"]} == set(f.names)
    assert all(v == 1 for _, v in fams["slurm_up"])


def test_the_simulators_own_page_counts_what_it_served() -> None:
    f, _, _ = fleet(nodes=2)
    pages = f.pages()
    for p in pages.values():
        p()
    fams = parse_exposition(f.own_metrics())
    assert {lab["exporter"]: v for lab, v in fams["vigil_fleetsim_pages_served_total"]} == {
        "dcgm_exporter": 2,
        "node_exporter": 2,
        "slurm_exporter": 1,
    }
    assert fams["vigil_fleetsim_gpus"][0][1] == 16


# --- the server -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def served(pki: Pki) -> Iterator[tuple[tuple[str, int], Fleet]]:
    f, _, _ = fleet(nodes=3)
    srv = make_server(
        ("127.0.0.1", 0),
        f.own_metrics,
        title="t",
        tls=server_context(str(pki.cert), str(pki.key)),
        auth=BasicAuth.from_password(USER, PASSWORD),
        paths=f.pages(),
        timeout=2.0,
    )
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield srv.server_address[:2], f  # type: ignore[misc]
    srv.shutdown()
    srv.server_close()


def get(addr: tuple[str, int], ca: Path, target: str, auth: bool = True) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(addr[0], addr[1], context=client_context(ca), timeout=5)
    try:
        conn.putrequest("GET", target, skip_accept_encoding=True)
        if auth:
            conn.putheader("Authorization", basic(USER, PASSWORD))
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_every_page_needs_the_credentials(served: tuple[tuple[str, int], Fleet], pki: Pki) -> None:
    addr, f = served
    for p in [*f.pages(), "/metrics"]:
        assert get(addr, pki.ca, p, auth=False)[0] == 401
        status, body = get(addr, pki.ca, p)
        assert status == 200 and body


@pytest.mark.parametrize(
    "target",
    [
        "/nodes/fleet0000/dcgm_exporter/metrics/",
        "/nodes/fleet0000/dcgm_exporter",
        "/nodes/fleet0000/../fleet0001/dcgm_exporter/metrics",
        "/nodes/fleet%30000/dcgm_exporter/metrics",
        "/nodes/FLEET0000/dcgm_exporter/metrics",
        "/nodes/fleet0003/dcgm_exporter/metrics",
        "/nodes/fleet0000/redfish_exporter/metrics",
        "/nodes//dcgm_exporter/metrics",
        "/nodes/fleet0000/dcgm_exporter/metrics#x",
        "/nodes/fleet0000/dcgm_exporter/metrics%00",
        "/nodes/fleet0000/dcgm_exporter/metrics;x",
        "/nodes/" + "a" * 3000 + "/dcgm_exporter/metrics",
    ],
)
def test_only_exact_paths_are_pages(served: tuple[tuple[str, int], Fleet], pki: Pki, target: str) -> None:
    addr, _ = served
    status, body = get(addr, pki.ca, target)
    assert status in (400, 404), (status, body[:80])
    assert b"DCGM_FI" not in body
    # and the server serves on
    assert get(addr, pki.ca, "/nodes/fleet0000/dcgm_exporter/metrics?collect=x")[0] == 200


# --- the scrape jobs and the command line ----------------------------------------------------------


def test_the_scrape_jobs_read_every_page_once_as_the_role_names_them() -> None:
    f, _, _ = fleet(nodes=5)
    jobs = scrape_configs(
        f.names, "198.18.0.40:9450", ca_file="/etc/ca.pem", username="u", password_file="/p"
    )
    assert [j["job_name"] for j in jobs] == ["node_exporter", "dcgm_exporter", "slurm_exporter"]
    pages = set(f.pages())
    paths = [s["labels"]["__metrics_path__"] for j in jobs for s in j["static_configs"]]
    assert sorted(paths) == sorted(pages)
    for j in jobs:
        assert j["scheme"] == "https" and j["tls_config"] == {"ca_file": "/etc/ca.pem"}
        assert j["basic_auth"] == {"username": "u", "password_file": "/p"}
        instances = [s["labels"]["instance"] for s in j["static_configs"]]
        assert len(instances) == len(set(instances))
        assert all(s["targets"] == ["198.18.0.40:9450"] for s in j["static_configs"])


def test_scrape_config_prints_json_for_the_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    rc = fleetsim_main(["scrape-config", "--nodes", "3", "--target", "127.0.0.1:9450", "--scheme", "http"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert [len(j["static_configs"]) for j in doc["scrape_configs"]] == [3, 3, 1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "at least one node"),
        (["--name-prefix", "a/b"], "--name-prefix 'a/b'"),
        (["--name-prefix", "x" * 70], "63 at most"),
        (["--cpus-per-node", "0"], "at least one CPU"),
        (["--address", "nowhere"], "--address 'nowhere'"),
        (["--address", ":70000"], "--address ':70000'"),
        (["--job-minutes", "0.5"], "at least 60 s"),
        (["--tls-cert-file", "/nonexistent"], "go together"),
        (["scrape-config", "--nodes", "-1", "--target", "h:1"], "at least one node"),
    ],
)
def test_bad_flags_get_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert fleetsim_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("FAIL: ") and message in err, err


def test_node_names_are_wide_enough_and_ordered() -> None:
    assert node_names(3, "gpu")[-1] == "gpu0002"
    names = node_names(12000, "n")
    assert names[0] == "n00000" and names == sorted(names) and len(set(names)) == 12000
