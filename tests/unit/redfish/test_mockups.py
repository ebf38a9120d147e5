"""The exporter against the three DMTF mockups, served by the simulator on 127.0.0.1 with authentication."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.unit.redfish.conftest import parse, value

KWH = 3.6e6


@pytest.fixture
def static_scrape(make_bmc, make_collector):
    bmcs = {m: make_bmc(m, static=True) for m in ("rackmount1", "pdu", "liquid-cooled-server")}
    c = make_collector({m: b.url for m, b in bmcs.items()})
    return parse(c.scrape())


def test_all_three_up_with_session_auth(static_scrape):
    for t in ("rackmount1", "pdu", "liquid-cooled-server"):
        assert value(static_scrape, "redfish_up", target=t) == 1
        assert value(static_scrape, "redfish_scrape_duration_seconds", target=t) < 5


def test_rackmount1_values_and_winner_rule(static_scrape):
    s, t = static_scrape, {"target": "rackmount1", "chassis": "1U"}
    # the same power: 374 W in Sensors/TotalPower (and EnvironmentMetrics), 344 W in the deprecated
    # Power: the Sensor wins
    assert value(s, "redfish_chassis_power_watts", **t) == 374
    assert value(s, "redfish_power_watts", **t, sensor="TotalPower") == 374
    assert not any(v == 344 for (name, _), v in s.items() if "watts" in name)
    # PowerSupplyMetrics says 937.4 W but names Sensors/PS1InputPower: the Sensor's 374 W wins
    assert value(s, "redfish_power_supply_input_watts", **t, sensor="Bay1") == 374
    # EnvironmentMetrics copies 39 C for CPU1Temp; the Sensor reads 44
    assert value(s, "redfish_temperature_celsius", **t, sensor="CPU1Temp") == 44
    assert value(s, "redfish_temperature_celsius", **t, sensor="IntakeTemp", context="Intake") == 24.8
    assert (
        value(s, "redfish_temperature_threshold_celsius", **t, sensor="CPU1Temp", threshold="upper_critical")
        == 45
    )
    # kWh -> J
    assert value(s, "redfish_chassis_energy_joules_total", **t) == 325675 * KWH
    assert value(s, "redfish_energy_joules_total", **t, sensor="PS1Energy") == 7855 * KWH
    assert value(s, "redfish_current_amperes", **t, sensor="PS1InputCurrent") == 8.92
    assert value(s, "redfish_voltage_volts", **t, sensor="PS1InputVoltage") == 119.27
    assert value(s, "redfish_frequency_hertz", **t, sensor="PS1Frequency") == 60.1
    # fans: Fan.SpeedPercent names Sensors/FanBay1 (45 %); the fan's own SpeedRPM where the Sensor has none
    assert value(s, "redfish_fan_speed_ratio", **t, sensor="Bay1") == 0.45
    assert value(s, "redfish_fan_speed_rpm", **t, sensor="Bay1") == 2200


def test_null_reading_is_no_sample(static_scrape):
    s, t = static_scrape, {"target": "rackmount1", "chassis": "1U"}
    # PS2 is Absent: every PS2 sensor reads null
    for metric in ("redfish_power_watts", "redfish_energy_joules_total", "redfish_voltage_volts"):
        assert not [k for k in s if k[0] == metric and ("sensor", "PS2InputPower") in k[1]]
    assert value(s, "redfish_power_watts", **t, sensor="PS2InputPower") is None
    # Bay2 has no Health (Absent): no state claimed
    assert value(s, "redfish_power_supply_health", **t, sensor="Bay2", state="OK") is None


def test_health_is_a_state_set(static_scrape):
    s, t = static_scrape, {"target": "rackmount1", "chassis": "1U"}
    got = {
        st: value(s, "redfish_power_supply_health", **t, sensor="Bay1", state=st)
        for st in ("OK", "Warning", "Critical")
    }
    assert got == {"OK": 0, "Warning": 1, "Critical": 0}
    assert value(s, "redfish_sensor_health", **t, sensor="CPU1Temp", state="Warning") == 1
    assert value(s, "redfish_chassis_health", **t, state="OK") == 1


def test_pdu_values_and_winner_rule(static_scrape):
    s, t = static_scrape, {"target": "pdu", "pdu": "1"}
    # Outlet A1 says 197.4 W but names Sensors/PowerA1, which reads 427.3 W: the Sensor wins
    assert value(s, "redfish_pdu_outlet_power_watts", **t, outlet="A1") == 427.3
    assert value(s, "redfish_pdu_outlet_energy_joules_total", **t, outlet="A1") == 7855 * KWH
    assert value(s, "redfish_pdu_outlet_current_amperes", **t, outlet="A1") == 8.92
    # PDUPower and PDUEnergy are not Sensors of the service (not in the collection): the excerpt stands
    assert value(s, "redfish_pdu_power_watts", **t) == 6438
    assert value(s, "redfish_pdu_energy_joules_total", **t) == 56438 * KWH
    # branch A's energy names EnergyA, which the PDU does not have: its own 325675 kWh
    assert (
        value(s, "redfish_pdu_circuit_energy_joules_total", **t, circuit="A", circuit_type="branch")
        == 325675 * KWH
    )
    assert value(s, "redfish_pdu_health", **t, state="OK") == 1
    assert value(s, "redfish_pdu_circuit_health", **t, circuit="AC1", circuit_type="mains", state="OK") == 1
    # a PDU chassis has several chassis-context power sensors: no headline is guessed
    assert value(s, "redfish_chassis_power_watts", target="pdu") is None
    assert value(s, "redfish_humidity_ratio", target="pdu", chassis="PDU", sensor="Humidity") == 0.43


def test_liquid_cooled_values(static_scrape):
    s, t = static_scrape, {"target": "liquid-cooled-server", "chassis": "1U"}
    # coolant readings name sensors of a CDU this service does not have: the excerpts stand
    assert value(s, "redfish_coolant_supply_temperature_celsius", **t, sensor="CPU1") == 14.8
    assert value(s, "redfish_coolant_return_temperature_celsius", **t, sensor="CPU1") == 38.2
    assert value(s, "redfish_coolant_connector_health", **t, sensor="CPU1", state="OK") == 1
    assert value(s, "redfish_chassis_power_watts", **t) == 374
    assert value(s, "redfish_temperature_celsius", **t, sensor="CPUTemp1") == 37


def test_deprecated_power_and_thermal_when_nothing_newer(tmp_path, make_bmc, make_collector):
    """A BMC with only Power and Thermal: they are read, and the 344 W of PowerControl is the headline."""
    from importlib import resources

    from vigil.exporters.redfish.bmcsim.sim import MOCKUPS

    src = Path(
        str(resources.files("vigil.exporters.redfish.bmcsim").joinpath("mockups", MOCKUPS["rackmount1"]))
    )
    mock = tmp_path / "old"
    shutil.copytree(src, mock)
    chassis = json.loads((mock / "Chassis/1U/index.json").read_text())
    for key in ("Sensors", "PowerSubsystem", "ThermalSubsystem", "EnvironmentMetrics"):
        del chassis[key]
    (mock / "Chassis/1U/index.json").write_text(json.dumps(chassis))
    # the old resources are only in the DMTF originals: copy them in
    for old in ("Power", "Thermal"):
        orig = Path("/work/shared/redfish-mockups/public-rackmount1/Chassis/1U") / old / "index.json"
        if not orig.exists():
            pytest.skip("the DMTF originals are not on this machine")
        (mock / "Chassis/1U" / old).mkdir(exist_ok=True)
        shutil.copy(orig, mock / "Chassis/1U" / old / "index.json")
    bmc = make_bmc(str(mock), static=True)
    s = parse(make_collector({"old": bmc.url}).scrape())
    t = {"target": "old", "chassis": "1U"}
    assert value(s, "redfish_chassis_power_watts", **t) == 344
    assert value(s, "redfish_temperature_celsius", **t, sensor="CPU1 Temp") == 41
    assert (
        value(
            s,
            "redfish_temperature_threshold_celsius",
            **t,
            sensor="Chassis Intake Temp",
            threshold="upper_critical",
        )
        == 40
    )
    assert value(s, "redfish_fan_speed_rpm", **t, sensor="BaseBoard System Fan") == 2100
    assert value(s, "redfish_power_supply_health", **t, sensor="Power Supply Bay", state="Warning") == 1
    assert value(s, "redfish_voltage_volts", **t, sensor="VRM1 Voltage") == 12
    # CPU2 Temp has no reading: no sample
    assert value(s, "redfish_temperature_celsius", **t, sensor="CPU2 Temp") is None


def test_deprecated_resources_ignored_when_newer_exist(make_bmc, make_collector, tmp_path):
    """rackmount1 has both; only the newer ones are read (the 344 W never appears, Power is never fetched)."""
    bmc = make_bmc("rackmount1", static=True)
    fetched: list[str] = []
    orig = bmc.model.render
    bmc.model.render = lambda path, expand: (fetched.append(path), orig(path, expand))[1]  # type: ignore[method-assign]
    parse(make_collector({"n": bmc.url}).scrape())
    assert fetched and not [p for p in fetched if p.endswith(("/Power", "/Thermal"))]


def test_live_power_follows_gpus_and_energy_integrates(make_bmc, make_collector, tmp_path):
    """Server power = idle + the GPUs' power read from the GPU simulator's /metrics."""
    from vigil.exporters._http import make_server as metrics_server
    from vigil.exporters.redfish.bmcsim.sim import serve_in_thread

    gpu_w = {"w": 300.0}
    text = lambda: "".join(f'DCGM_FI_DEV_POWER_USAGE{{gpu="{i}"}} {gpu_w["w"] / 4}\n' for i in range(4))  # noqa: E731
    gs = metrics_server(("127.0.0.1", 0), text, title="gpusim")
    serve_in_thread(gs)
    try:
        url = f"http://127.0.0.1:{gs.server_address[1]}/metrics"
        server = make_bmc("rackmount1", idle_w=200.0, gpu_metrics_urls=[url])
        pdu = make_bmc("pdu", idle_w=200.0, gpu_metrics_urls=[url, url])
        c = make_collector({"node": server.url, "pdu": pdu.url})
        s1 = parse(c.scrape())
        assert value(s1, "redfish_chassis_power_watts", target="node") == 500
        assert value(s1, "redfish_power_supply_input_watts", target="node", sensor="Bay1") == 500
        # the PDU feeds two such nodes on outlets A1, A2; the rest draw nothing
        assert value(s1, "redfish_pdu_outlet_power_watts", target="pdu", outlet="A1") == 500
        assert value(s1, "redfish_pdu_outlet_power_watts", target="pdu", outlet="B1") == 0
        assert value(s1, "redfish_pdu_power_watts", target="pdu") == 1000
        assert value(s1, "redfish_pdu_circuit_power_watts", target="pdu", circuit="A") == 1000
        gpu_w["w"] = 1400.0
        time.sleep(1.1)  # the simulator reads the GPUs at most once a second
        s2 = parse(c.scrape())
        assert value(s2, "redfish_chassis_power_watts", target="node") == 1600
        e1 = value(s1, "redfish_pdu_energy_joules_total", target="pdu")
        e2 = value(s2, "redfish_pdu_energy_joules_total", target="pdu")
        assert e1 is not None and e2 is not None and e2 > e1
        # a consistent tree: the excerpt and the Sensor agree in the simulator
        assert value(s2, "redfish_power_watts", target="node", sensor="TotalPower") == 1600
    finally:
        gs.shutdown()
        gs.server_close()


def test_pdu_energy_integrates_power_exactly(make_bmc):
    now = {"t": 100.0}
    bmc = make_bmc("pdu", idle_w=500.0, nodes=2)
    bmc.model.clock = lambda: now["t"]
    bmc.model._last = now["t"]
    before = bmc.model.render("/redfish/v1/PowerEquipment/RackPDUs/1/Metrics", False)["EnergykWh"]["Reading"]
    now["t"] += 3600.0  # one hour at 2 x 500 W = 1 kWh
    after = bmc.model.render("/redfish/v1/PowerEquipment/RackPDUs/1/Metrics", False)["EnergykWh"]["Reading"]
    assert after - before == pytest.approx(1.0)


def test_thermal_fault_raises_inlet_and_cpu_and_clears(make_bmc, make_collector, faults_file):
    from vigil.exporters.redfish.bmcsim import faults

    bmc = make_bmc("rackmount1")
    c = make_collector({"node": bmc.url})
    t = {"target": "node", "chassis": "1U"}
    s = parse(c.scrape())
    assert value(s, "redfish_temperature_celsius", **t, sensor="IntakeTemp") == 24
    assert value(s, "redfish_sensor_health", **t, sensor="IntakeTemp", state="Critical") == 0
    faults.edit(faults_file, "bmc-thermal", clear=False)
    s = parse(c.scrape())
    assert value(s, "redfish_temperature_celsius", **t, sensor="IntakeTemp") == 48
    assert value(s, "redfish_temperature_celsius", **t, sensor="CPU1Temp") == 96
    assert (
        value(
            s, "redfish_temperature_threshold_celsius", **t, sensor="IntakeTemp", threshold="upper_critical"
        )
        == 42
    )
    assert value(s, "redfish_sensor_health", **t, sensor="IntakeTemp", state="Critical") == 1
    assert value(s, "redfish_chassis_health", **t, state="Critical") == 1
    faults.edit(faults_file, "bmc-thermal", clear=True)
    s = parse(c.scrape())
    assert value(s, "redfish_temperature_celsius", **t, sensor="IntakeTemp") == 24
    assert value(s, "redfish_chassis_health", **t, state="OK") == 1


def test_basic_auth_and_session_relogin(make_bmc, make_collector):
    bmc = make_bmc("rackmount1")
    basic = make_collector({"b": bmc.url}, extra="auth: basic")
    assert value(parse(basic.scrape()), "redfish_up", target="b") == 1
    c = make_collector({"s": bmc.url})
    assert value(parse(c.scrape()), "redfish_up", target="s") == 1
    bmc.sessions.drop_all()  # the BMC forgets the session: a 401, a new login, and on
    assert value(parse(c.scrape()), "redfish_up", target="s") == 1


def test_wrong_password_is_down_and_never_logged(make_bmc, make_collector, tmp_path, caplog, creds):
    bmc = make_bmc("rackmount1")
    Path(creds).write_text("monitor:wrong-password-xyz\n")
    c = make_collector({"n": bmc.url})
    assert value(parse(c.scrape()), "redfish_up", target="n") == 0
    assert "refused" in caplog.text and "wrong-password-xyz" not in caplog.text


def test_tls_verified_against_the_ca(make_bmc, make_collector, pki):
    bmc = make_bmc("rackmount1", tls=(pki["cert"], pki["key"]), static=True)
    good = make_collector({"n": bmc.url}, extra=f"ca_file: {pki['ca']}", insecure=False)
    assert value(parse(good.scrape()), "redfish_chassis_power_watts", target="n") == 374
    bad = make_collector({"n": bmc.url}, extra=f"ca_file: {pki['other_ca']}", insecure=False)
    assert value(parse(bad.scrape()), "redfish_up", target="n") == 0
    lax = make_collector({"n": bmc.url}, extra=f"ca_file: {pki['other_ca']}", insecure=True)
    assert value(parse(lax.scrape()), "redfish_up", target="n") == 1


def test_tree_cached_between_scrapes(make_bmc, make_collector):
    bmc = make_bmc("rackmount1", static=True)
    fetched: list[str] = []
    orig = bmc.model.render
    bmc.model.render = lambda path, expand: (fetched.append(path), orig(path, expand))[1]  # type: ignore[method-assign]
    c = make_collector({"n": bmc.url})
    c.scrape()
    first = len(fetched)
    fetched.clear()
    c.scrape()
    assert "/redfish/v1" not in fetched and "/redfish/v1/Chassis" not in fetched  # no re-walk
    assert 0 < len(fetched) < first
