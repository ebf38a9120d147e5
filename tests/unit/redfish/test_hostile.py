"""A dead, slow or hostile BMC: the others' samples stay intact, the scrape returns within the
target's timeout, and the exporter never fetches outside the target's origin."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.unit.redfish.conftest import parse, value
from vigil.exporters.redfish.bmcsim import faults
from vigil.exporters.redfish.client import MAX_LINK, ResourceError, json_depth, parse_json, resolve


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: connection refused


@pytest.fixture
def blackhole():
    """A listener that accepts and never answers (a hung BMC)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    for s in held:
        s.close()
    srv.close()


def test_dead_and_hung_targets_leave_the_others_intact_within_the_timeout(
    make_bmc, make_collector, blackhole
):
    good = make_bmc("rackmount1", static=True)
    c = make_collector(
        {"good": good.url, "dead": f"http://127.0.0.1:{_dead_port()}", "hung": blackhole}, extra="timeout: 1"
    )
    t0 = time.monotonic()
    s = parse(c.scrape())
    took = time.monotonic() - t0
    assert took < 1.5, took
    assert value(s, "redfish_up", target="good") == 1
    assert value(s, "redfish_chassis_power_watts", target="good") == 374
    assert value(s, "redfish_up", target="dead") == 0
    assert value(s, "redfish_up", target="hung") == 0
    assert value(s, "redfish_scrape_errors_total", target="hung") == 1
    own = ("redfish_up", "redfish_scrape_duration_seconds", "redfish_scrape_errors_total")
    own += ("redfish_readings_refused_total",)
    assert not [k for k in s if ("target", "hung") in k[1] and k[0] not in own]
    # again: the hung worker was freed at its deadline, so the next scrape is no slower
    t0 = time.monotonic()
    s = parse(c.scrape())
    assert time.monotonic() - t0 < 1.5
    assert value(s, "redfish_up", target="good") == 1


def test_bmc_down_fault_is_redfish_up_0(make_bmc, make_collector, faults_file):
    bmc = make_bmc("rackmount1")
    c = make_collector({"n": bmc.url}, extra="timeout: 2")
    assert value(parse(c.scrape()), "redfish_up", target="n") == 1
    faults.edit(faults_file, "bmc-down", clear=False)
    assert value(parse(c.scrape()), "redfish_up", target="n") == 0
    faults.edit(faults_file, "bmc-down", clear=True)
    assert value(parse(c.scrape()), "redfish_up", target="n") == 1


def test_slow_loris_bmc_is_cut_at_its_deadline(make_bmc, make_collector, tmp_path):
    """A BMC that answers at once but trickles its body a byte at a time: cut at the deadline."""
    slow_faults = tmp_path / "slow.json"
    faults.edit(str(slow_faults), "bmc-slow", clear=False, params={"delay": 60})
    slow = make_bmc("rackmount1", faults_file=str(slow_faults))
    good = make_bmc("pdu", static=True)
    c = make_collector({"slow": slow.url, "good": good.url}, extra="timeout: 1")
    t0 = time.monotonic()
    s = parse(c.scrape())
    assert time.monotonic() - t0 < 1.5
    assert value(s, "redfish_up", target="slow") == 0
    assert value(s, "redfish_up", target="good") == 1


def _hostile_mockup(tmp_path: Path, chassis_extra: dict, root_extra: dict | None = None) -> Path:
    mock = tmp_path / "hostile"
    (mock / "Chassis/1").mkdir(parents=True)
    root = {
        "@odata.id": "/redfish/v1/",
        "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
        **(root_extra or {}),
    }
    (mock / "index.json").write_text(json.dumps(root))
    coll = {"@odata.id": "/redfish/v1/Chassis", "Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]}
    (mock / "Chassis/index.json").write_text(json.dumps(coll))
    chassis = {"@odata.id": "/redfish/v1/Chassis/1", "Id": "1", "Status": {"Health": "OK"}, **chassis_extra}
    (mock / "Chassis/1/index.json").write_text(json.dumps(chassis))
    return mock


def test_off_origin_links_are_never_fetched(tmp_path, make_bmc, make_collector, caplog):
    elsewhere = make_bmc("rackmount1", static=True)
    hits: list[str] = []
    orig = elsewhere.model.render
    elsewhere.model.render = lambda p, e: (hits.append(p), orig(p, e))[1]  # type: ignore[method-assign]
    port = elsewhere.url.rsplit(":", 1)[1]
    mock = _hostile_mockup(
        tmp_path,
        {
            "Sensors": {"@odata.id": f"http://127.0.0.1:{port}/redfish/v1/Chassis/1U/Sensors"},
            "PowerSubsystem": {"@odata.id": f"//127.0.0.1:{port}/redfish/v1/Chassis/1U/PowerSubsystem"},
            "EnvironmentMetrics": {"@odata.id": "/redfish/v1/../../etc/passwd"},
            "ThermalSubsystem": {"@odata.id": "/other/v1/Thermal"},
        },
    )
    hostile = make_bmc(str(mock), static=True)
    s = parse(make_collector({"h": hostile.url}).scrape())
    assert value(s, "redfish_up", target="h") == 1
    assert value(s, "redfish_chassis_health", target="h", state="OK") == 1
    assert hits == []
    assert "leaves the target's origin" in caplog.text


def test_the_mockups_own_off_origin_link_is_refused():
    # public-rackmount1's PSU links its outlet at https://redfishpdu.contoso.com/...
    origin = ("https", "bmc-node01.example", 443)
    with pytest.raises(ResourceError, match="leaves the target's origin"):
        resolve(origin, "https://redfishpdu.contoso.com/redfish/v1/PowerEquipment/RackPDUs/1/Outlets/A4")
    with pytest.raises(ResourceError, match="leaves"):
        resolve(origin, "http://bmc-node01.example/redfish/v1/")  # same host, other scheme and port
    assert resolve(origin, "https://BMC-node01.example:443/redfish/v1/Chassis") == "/redfish/v1/Chassis"
    with pytest.raises(ResourceError):
        resolve(origin, "/redfish/v1/" + "a" * MAX_LINK)
    with pytest.raises(ResourceError):
        resolve(origin, "/redfish/v1/\r\nHost: evil")


def test_link_loops_and_floods_are_bounded(tmp_path, make_bmc, make_collector, monkeypatch):
    from vigil.exporters.redfish import walk

    monkeypatch.setattr(walk, "MAX_MEMBERS", 50)
    mock = _hostile_mockup(tmp_path, {"Sensors": {"@odata.id": "/redfish/v1/Chassis/1/Sensors"}})
    sensors = [{"@odata.id": "/redfish/v1/Chassis/1/Sensors"}, {"@odata.id": "/redfish/v1/Chassis/1"}]
    sensors += [{"@odata.id": "/redfish/v1/Chassis/1/Sensors/T"}] * 1000  # the same member, 1000 times
    sensors += [{"@odata.id": f"/redfish/v1/Chassis/1/Sensors/N{i}"} for i in range(5000)]
    (mock / "Chassis/1/Sensors/T").mkdir(parents=True)
    (mock / "Chassis/1/Sensors/index.json").write_text(json.dumps({"Members": sensors}))
    (mock / "Chassis/1/Sensors/T/index.json").write_text(
        json.dumps(
            {
                "@odata.id": "/redfish/v1/Chassis/1/Sensors/T",
                "Id": "T",
                "ReadingType": "Temperature",
                "Reading": 30,
            }
        )
    )
    # the chassis collection lists the chassis twice and the root once
    coll = {"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}] * 3 + [{"@odata.id": "/redfish/v1/"}]}
    (mock / "Chassis/index.json").write_text(json.dumps(coll))
    bmc = make_bmc(str(mock), static=True)
    fetched: list[str] = []
    orig = bmc.model.render
    bmc.model.render = lambda p, e: (fetched.append(p), orig(p, e))[1]  # type: ignore[method-assign]
    c = make_collector({"h": bmc.url}, extra="timeout: 5")
    s = parse(c.scrape())
    assert value(s, "redfish_up", target="h") == 1
    assert value(s, "redfish_temperature_celsius", target="h", sensor="T") == 30
    assert len(fetched) < 120, len(fetched)  # members capped at 50; each fetched once


def test_huge_body_is_refused_and_the_target_survives(tmp_path, make_bmc, make_collector, caplog):
    mock = _hostile_mockup(tmp_path, {"EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/1/Env"}})
    (mock / "Chassis/1/Env").mkdir()
    (mock / "Chassis/1/Env/index.json").write_text(
        '{"PowerWatts": {"Reading": 1}, "pad": "' + "x" * 300_000 + '"}'
    )
    bmc = make_bmc(str(mock), static=True)
    c = make_collector({"h": bmc.url}, max_body=100_000)
    s = parse(c.scrape())
    assert value(s, "redfish_up", target="h") == 1
    assert value(s, "redfish_chassis_power_watts", target="h") is None
    assert "cap" in caplog.text


def test_huge_service_root_fails_the_target_only(tmp_path, make_bmc, make_collector):
    mock = _hostile_mockup(tmp_path, {}, {"pad": "x" * 300_000})
    bad = make_bmc(str(mock), static=True)
    good = make_bmc("rackmount1", static=True)
    s = parse(make_collector({"bad": bad.url, "good": good.url}, max_body=100_000).scrape())
    assert value(s, "redfish_up", target="bad") == 0
    assert value(s, "redfish_up", target="good") == 1


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,  # recursion bomb
        '{"a":' * 40 + "1" + "}" * 40,  # deeper than the cap
        "not json at all",
        '{"Reading": NaN}',
        '["an", "array"]',
        "\xff\xfe garbage",
    ],
    ids=["recursion", "deep", "text", "nan", "array", "bytes"],
)
def test_hostile_json_is_refused(body):
    with pytest.raises(ResourceError):
        parse_json(body.encode("latin-1"), "GET /x")


def test_depth_is_measured_without_recursion():
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    assert json_depth(deep) == 5000


def test_hostile_sensor_values_give_no_sample(tmp_path, make_bmc, make_collector):
    mock = _hostile_mockup(tmp_path, {"Sensors": {"@odata.id": "/redfish/v1/Chassis/1/Sensors"}})
    values = {"a": "hot", "b": True, "c": 1e400, "d": None, "e": [1], "f": 41.5}
    members = []
    for sid, reading in values.items():
        (mock / f"Chassis/1/Sensors/{sid}").mkdir(parents=True)
        doc = {"@odata.id": f"/redfish/v1/Chassis/1/Sensors/{sid}", "Id": sid, "ReadingType": "Temperature"}
        text = json.dumps({**doc, "Reading": 0}).replace(
            '"Reading": 0', '"Reading": ' + ("1e400" if sid == "c" else json.dumps(reading))
        )
        (mock / f"Chassis/1/Sensors/{sid}/index.json").write_text(text)
        members.append({"@odata.id": doc["@odata.id"]})
    # a duplicate Id must not make a duplicate series (which would fail the whole scrape)
    (mock / "Chassis/1/Sensors/g").mkdir()
    (mock / "Chassis/1/Sensors/g/index.json").write_text(
        json.dumps(
            {
                "@odata.id": "/redfish/v1/Chassis/1/Sensors/g",
                "Id": "f",
                "ReadingType": "Temperature",
                "Reading": 99,
            }
        )
    )
    members.append({"@odata.id": "/redfish/v1/Chassis/1/Sensors/g"})
    (mock / "Chassis/1/Sensors/index.json").write_text(json.dumps({"Members": members}))
    s = parse(make_collector({"h": make_bmc(str(mock), static=True).url}).scrape())
    temps = {dict(k[1])["sensor"]: v for k, v in s.items() if k[0] == "redfish_temperature_celsius"}
    assert temps == {"f": 41.5}


# -- issue 34: one BMC's strings or numbers must not break the others' ---------------------------------


def _sensor(mock: Path, sid: str, doc: dict) -> dict:
    """A member of Chassis/1's Sensors collection, written at Sensors/SID."""
    uri = f"/redfish/v1/Chassis/1/Sensors/{sid}"
    (mock / f"Chassis/1/Sensors/{sid}").mkdir(parents=True)
    (mock / f"Chassis/1/Sensors/{sid}/index.json").write_text(json.dumps({"@odata.id": uri, **doc}))
    return {"@odata.id": uri}


def _lone_surrogate_bmc(tmp_path: Path) -> Path:
    """A chassis whose Id is a lone surrogate, with a sensor whose Id ends in one: JSON's
    ``"\\ud800"`` escape is valid JSON, but no UTF-8 text can hold what it decodes to."""
    mock = _hostile_mockup(
        tmp_path, {"Id": "\ud800", "Sensors": {"@odata.id": "/redfish/v1/Chassis/1/Sensors"}}
    )
    members = [
        _sensor(mock, "T", {"Id": "T\udfff", "ReadingType": "Temperature", "Reading": 30}),
        _sensor(mock, "P", {"Id": "P", "Name": "\udc80", "ReadingType": "Power", "Reading": 250}),
    ]
    (mock / "Chassis/1/Sensors/index.json").write_text(json.dumps({"Members": members}))
    assert "\\ud800" in (mock / "Chassis/1/index.json").read_text()
    return mock


def _metrics_over_http(collector) -> tuple[int, str]:
    """The exporter's /metrics answer for COLLECTOR, through its own HTTP server on loopback."""
    import urllib.error
    import urllib.request

    from vigil.exporters._http import make_server
    from vigil.exporters.redfish.bmcsim.sim import serve_in_thread

    srv = make_server(("127.0.0.1", 0), collector.scrape, title="t")
    serve_in_thread(srv)
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(url, timeout=10) as resp:
                return resp.status, resp.read().decode("utf-8")  # strict: the answer is UTF-8
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_lone_surrogate_in_one_bmc_is_replaced_and_every_target_served(tmp_path, make_bmc, make_collector):
    """It made the whole /metrics a 500, every BMC's series gone, until the next walk an hour later."""
    bad = make_bmc(str(_lone_surrogate_bmc(tmp_path)), static=True)
    good = make_bmc("rackmount1", static=True)
    c = make_collector({"bad": bad.url, "good": good.url})
    for _ in range(2):
        status, text = _metrics_over_http(c)
        assert status == 200, text
        s = parse(text)
        assert value(s, "redfish_up", target="good") == 1
        assert value(s, "redfish_chassis_power_watts", target="good") == 374
        assert value(s, "redfish_up", target="bad") == 1
        assert value(s, "redfish_chassis_health", target="bad", chassis="\ufffd", state="OK") == 1
        assert value(s, "redfish_temperature_celsius", target="bad", chassis="\ufffd", sensor="T\ufffd") == 30
        assert value(s, "redfish_power_watts", target="bad", chassis="\ufffd", sensor="P") == 250
        assert value(s, "redfish_scrape_errors_total", target="bad") == 0


def test_a_target_whose_series_cannot_be_rendered_is_down_alone(
    tmp_path, make_bmc, make_collector, monkeypatch, caplog
):
    """Should a BMC's string still reach a label unrepaired (the repair taken out here), that target
    is down and counted, and the answer carries everyone else's series."""
    from vigil.exporters.redfish import readings

    monkeypatch.setattr(readings, "label_value", lambda text: text)
    bad = make_bmc(str(_lone_surrogate_bmc(tmp_path)), static=True)
    good = make_bmc("pdu", static=True)
    c = make_collector({"bad": bad.url, "good": good.url})
    for scrapes in (1, 2):
        status, text = _metrics_over_http(c)
        assert status == 200, text
        s = parse(text)
        assert value(s, "redfish_up", target="bad") == 0
        assert value(s, "redfish_scrape_errors_total", target="bad") == scrapes
        assert [
            k for k in s if ("target", "bad") in k[1] and k[0].startswith(("redfish_chassis", "redfish_temp"))
        ] == []
        assert value(s, "redfish_up", target="good") == 1
        assert value(s, "redfish_scrape_errors_total", target="good") == 0
        assert value(s, "redfish_pdu_power_watts", target="good") is not None
    assert "bad: down: " in caplog.text and "not valid UTF-8" in caplog.text


def test_an_energy_reading_that_overflows_its_conversion_is_refused_and_counted(
    tmp_path, make_bmc, make_collector
):
    """1e308 kWh is a finite JSON number, but 3.6e6 times it is not: it was exported as +Inf."""
    mock = _hostile_mockup(
        tmp_path,
        {
            "EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/1/Env"},
            "Sensors": {"@odata.id": "/redfish/v1/Chassis/1/Sensors"},
        },
    )
    (mock / "Chassis/1/Env").mkdir()
    (mock / "Chassis/1/Env/index.json").write_text(
        json.dumps({"PowerWatts": {"Reading": 300}, "EnergykWh": {"Reading": 1e308}})
    )
    members = [
        _sensor(mock, "E", {"Id": "E", "ReadingType": "EnergykWh", "Reading": 1e308}),
        _sensor(mock, "E2", {"Id": "E2", "ReadingType": "EnergykWh", "Reading": 2.5}),
    ]
    (mock / "Chassis/1/Sensors/index.json").write_text(json.dumps({"Members": members}))
    c = make_collector({"h": make_bmc(str(mock), static=True).url})
    for scrapes in (1, 2):
        text = c.scrape()
        assert "Inf" not in text
        s = parse(text)
        assert value(s, "redfish_up", target="h") == 1
        assert value(s, "redfish_chassis_power_watts", target="h") == 300
        assert value(s, "redfish_chassis_energy_joules_total", target="h") is None
        assert value(s, "redfish_energy_joules_total", target="h", sensor="E") is None
        assert value(s, "redfish_energy_joules_total", target="h", sensor="E2") == 2.5 * 3.6e6
        assert value(s, "redfish_readings_refused_total", target="h") == 2 * scrapes
