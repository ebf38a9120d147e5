"""Turn the resources of one scrape into samples, with Prometheus names and units.

The winner rule — which resource wins when a BMC reports one quantity in several places (the DMTF
mockups disagree with themselves: 374 W in Sensors/TotalPower, 344 W in the deprecated Power):

1. A Sensor resource (a member of a chassis' ``Sensors`` collection) is the source of truth. An
   excerpt elsewhere (EnvironmentMetrics, PowerSupplyMetrics, Fan.SpeedPercent, Outlet/Circuit
   readings, PowerDistributionMetrics) whose ``DataSourceUri`` names a Sensor of this service is read
   from that Sensor; the excerpt's own ``Reading`` is used only when it names no Sensor the service has.
2. The newer schemas (Sensors, EnvironmentMetrics, PowerSubsystem, ThermalSubsystem) win over the
   deprecated Power and Thermal resources, which are read only for a domain (power, thermal) that none
   of the newer resources covers (see :mod:`.walk`).
3. The chassis headline power is EnvironmentMetrics.PowerWatts (by rule 1), else the chassis' only
   Power sensor whose PhysicalContext is ``Chassis``, else the deprecated PowerControl[0]; never a guess
   among several. Likewise the chassis energy.

A reading of ``null`` (or absent, or not a finite number) gives no sample, never 0; nor does one that
its conversion makes infinite (1e308 kWh in joules), which is counted as refused.

A string of the BMC's becomes a label value here (:func:`label_value`): JSON may carry a lone surrogate
(``"\\ud800"``), which no UTF-8 text can hold; it becomes U+FFFD.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from vigil.exporters.redfish.client import ResourceError, normalize, resolve
from vigil.exporters.redfish.walk import ChassisPlan, Collection, PduPlan, Plan, Readings

#: metric -> (type, help); the output order
FAMILIES: dict[str, tuple[str, str]] = {
    "redfish_up": ("gauge", "1 when the target answered this scrape, else 0."),
    "redfish_scrape_duration_seconds": ("gauge", "Time this scrape of the target took."),
    "redfish_walk_timestamp_seconds": (
        "gauge",
        "When the target's resource tree was last walked (Unix time).",
    ),
    "redfish_scrape_errors_total": (
        "counter",
        "Scrapes of the target that failed (redfish_up 0) since the exporter started.",
    ),
    "redfish_readings_refused_total": (
        "counter",
        "Readings of the target refused since the exporter started: numbers that the conversion to "
        "the exported unit makes infinite.",
    ),
    "redfish_chassis_health": ("gauge", "Chassis Status.Health as a state set (1 for the current state)."),
    "redfish_chassis_power_watts": (
        "gauge",
        "Chassis input power: EnvironmentMetrics.PowerWatts, else the chassis power sensor, else the "
        "deprecated PowerControl[0].",
    ),
    "redfish_chassis_energy_joules_total": (
        "counter",
        "Chassis energy since the meter was reset (EnvironmentMetrics.EnergykWh, else the chassis "
        "energy sensor).",
    ),
    "redfish_temperature_celsius": ("gauge", "Temperature sensor reading."),
    "redfish_temperature_threshold_celsius": ("gauge", "Temperature sensor threshold set by the BMC."),
    "redfish_power_watts": ("gauge", "Power sensor reading (sensors overlap: do not sum across sensors)."),
    "redfish_energy_joules_total": ("counter", "Energy sensor reading (Redfish kWh, converted)."),
    "redfish_current_amperes": ("gauge", "Current sensor reading."),
    "redfish_voltage_volts": ("gauge", "Voltage sensor reading."),
    "redfish_frequency_hertz": ("gauge", "Frequency sensor reading."),
    "redfish_humidity_ratio": ("gauge", "Relative humidity sensor reading (0-1)."),
    "redfish_fan_speed_ratio": ("gauge", "Fan speed as a fraction of its maximum (0-1)."),
    "redfish_fan_speed_rpm": ("gauge", "Fan speed in revolutions per minute, as the BMC reports it."),
    "redfish_fan_health": ("gauge", "Fan Status.Health as a state set."),
    "redfish_power_supply_input_watts": ("gauge", "Power supply input power."),
    "redfish_power_supply_health": ("gauge", "Power supply Status.Health as a state set."),
    "redfish_coolant_supply_temperature_celsius": ("gauge", "Coolant connector supply temperature."),
    "redfish_coolant_return_temperature_celsius": ("gauge", "Coolant connector return temperature."),
    "redfish_coolant_connector_health": ("gauge", "Coolant connector Status.Health as a state set."),
    "redfish_sensor_health": ("gauge", "Sensor Status.Health as a state set."),
    "redfish_pdu_health": ("gauge", "PDU Status.Health as a state set."),
    "redfish_pdu_power_watts": ("gauge", "PDU total power (PowerDistributionMetrics.PowerWatts)."),
    "redfish_pdu_energy_joules_total": (
        "counter",
        "PDU energy (PowerDistributionMetrics.EnergykWh, converted).",
    ),
    "redfish_pdu_outlet_power_watts": ("gauge", "Outlet power."),
    "redfish_pdu_outlet_energy_joules_total": ("counter", "Outlet energy (EnergykWh, converted)."),
    "redfish_pdu_outlet_current_amperes": ("gauge", "Outlet current."),
    "redfish_pdu_outlet_voltage_volts": ("gauge", "Outlet voltage."),
    "redfish_pdu_outlet_health": ("gauge", "Outlet Status.Health as a state set."),
    "redfish_pdu_circuit_power_watts": ("gauge", "Branch or mains circuit power."),
    "redfish_pdu_circuit_energy_joules_total": (
        "counter",
        "Branch or mains circuit energy (kWh, converted).",
    ),
    "redfish_pdu_circuit_current_amperes": ("gauge", "Branch or mains circuit current."),
    "redfish_pdu_circuit_voltage_volts": ("gauge", "Branch or mains circuit voltage."),
    "redfish_pdu_circuit_health": ("gauge", "Branch or mains circuit Status.Health as a state set."),
}

HEALTH_STATES = ("OK", "Warning", "Critical")
KWH = 3.6e6

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, float]

#: Sensor ReadingType -> (metric, scale)
_BY_TYPE: dict[str, tuple[str, float]] = {
    "Temperature": ("redfish_temperature_celsius", 1.0),
    "Power": ("redfish_power_watts", 1.0),
    "EnergykWh": ("redfish_energy_joules_total", KWH),
    "EnergyWh": ("redfish_energy_joules_total", 3600.0),
    "EnergyJoules": ("redfish_energy_joules_total", 1.0),
    "Current": ("redfish_current_amperes", 1.0),
    "Voltage": ("redfish_voltage_volts", 1.0),
    "Frequency": ("redfish_frequency_hertz", 1.0),
    "Humidity": ("redfish_humidity_ratio", 0.01),
    "Rotational": ("redfish_fan_speed_rpm", 1.0),
}
#: ReadingUnits (UCUM) -> the ReadingType it implies, for BMCs that leave ReadingType out
_BY_UNITS: dict[str, tuple[str, float]] = {
    "Cel": ("Temperature", 1.0),
    "C": ("Temperature", 1.0),
    "W": ("Power", 1.0),
    "kW": ("Power", 1000.0),
    "kW.h": ("EnergykWh", 1.0),
    "W.h": ("EnergyWh", 1.0),
    "J": ("EnergyJoules", 1.0),
    "A": ("Current", 1.0),
    "mA": ("Current", 0.001),
    "V": ("Voltage", 1.0),
    "mV": ("Voltage", 0.001),
    "Hz": ("Frequency", 1.0),
    "RPM": ("Rotational", 1.0),
    "{rev}/min": ("Rotational", 1.0),
}
_THRESHOLDS = (
    ("UpperCaution", "upper_caution"),
    ("UpperCritical", "upper_critical"),
    ("UpperFatal", "upper_fatal"),
)
_OLD_THRESHOLDS = (
    ("UpperThresholdNonCritical", "upper_caution"),
    ("UpperThresholdCritical", "upper_critical"),
    ("UpperThresholdFatal", "upper_fatal"),
)


def number(value: object) -> float | None:
    """VALUE as a finite float; None for null, absent, a bool, a string, NaN or infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


#: the code points a Python string may hold that UTF-8 cannot: surrogates (JSON's "\ud800" escapes;
#: a valid pair of escapes is decoded into one character and never shows here)
_SURROGATES = re.compile("[\ud800-\udfff]")


def label_value(text: str) -> str:
    """TEXT, a string of the BMC's, as a label value: valid UTF-8 always, each lone surrogate U+FFFD."""
    return text if text.isascii() else _SURROGATES.sub("\ufffd", text)


def _str(value: object) -> str:
    return value[:128] if isinstance(value, str) else ""


class _Out:
    """Samples, one per (metric, labels): a BMC that repeats an Id cannot make a duplicate series."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.samples: list[Sample] = []
        self.refused = 0
        self._seen: set[tuple[str, Labels]] = set()

    def add(
        self, metric: str, labels: Iterable[tuple[str, str]], value: float | None, scale: float = 1.0
    ) -> None:
        if value is None:
            return
        scaled = value * scale
        if not math.isfinite(scaled):  # 1e308 kWh is a number, 3.6e6 times it is not
            self.refused += 1
            return
        full: Labels = (("target", self.target), *((k, label_value(v)) for k, v in labels))
        key = tuple(kv for kv in full if kv[0] != "context")  # context describes, it does not identify
        if (metric, key) in self._seen:
            return
        self._seen.add((metric, key))
        self.samples.append((metric, full, scaled))

    def health(self, metric: str, labels: Labels, doc: object) -> None:
        status = doc.get("Status") if isinstance(doc, dict) else None
        health = status.get("Health") if isinstance(status, dict) else None
        if health not in HEALTH_STATES:
            return  # absent, null or unknown: no state is known, so none is claimed
        for state in HEALTH_STATES:
            self.add(metric, (*labels, ("state", state)), 1.0 if state == health else 0.0)


class _Resolver:
    """Rule 1: an excerpt that names a Sensor of this service is read from that Sensor."""

    def __init__(self, origin: tuple[str, str, int], plan: Plan, readings: Readings) -> None:
        self.origin = origin
        self.known = plan.sensor_uris()
        self.readings = readings

    def sensor(self, excerpt: object) -> dict[str, Any] | None:
        if not isinstance(excerpt, dict):
            return None
        uri = excerpt.get("DataSourceUri")
        if uri is None:
            return None
        try:
            path = normalize(resolve(self.origin, uri))
        except ResourceError:
            return None
        if path not in self.known:
            return None
        return self.readings.get(path)

    def value(self, excerpt: object, key: str = "Reading") -> float | None:
        if not isinstance(excerpt, dict):
            return None
        src = self.sensor(excerpt)
        if src is not None and key in src:
            return number(src[key])  # the Sensor's null is no sample: no fallback to a stale copy
        return number(excerpt.get(key))


def _members(coll: Collection | None, readings: Readings) -> list[dict[str, Any]]:
    if coll is None:
        return []
    return [d for d in (readings.get(u) for u in coll.members) if d]


def _sensor_kind(doc: dict[str, Any]) -> tuple[str, float] | None:
    rtype = doc.get("ReadingType")
    units = doc.get("ReadingUnits")
    scale = 1.0
    if not isinstance(rtype, str) or rtype not in _BY_TYPE:
        implied = _BY_UNITS.get(units) if isinstance(units, str) else None
        if implied is None:
            return None
        rtype, scale = implied
    metric, factor = _BY_TYPE[rtype]
    if rtype == "Temperature" and units == "[degF]":
        return None  # not seen on a real BMC; refuse rather than mislabel
    return metric, factor * scale


def _chassis(out: _Out, c: ChassisPlan, r: Readings, res: _Resolver) -> None:
    doc = r.get(c.uri)
    if doc is None:
        return
    ch: Labels = (("chassis", c.id),)
    out.health("redfish_chassis_health", ch, doc)
    sensors = _members(c.sensors, r)
    # per sensor, by ReadingType (or the units when a BMC leaves the type out)
    chassis_power: list[float | None] = []
    chassis_energy: list[tuple[float | None, float]] = []
    for s in sensors:
        sid = _str(s.get("Id")) or _str(s.get("@odata.id")).rsplit("/", 1)[-1]
        labels: Labels = (*ch, ("sensor", sid), ("context", _str(s.get("PhysicalContext"))))
        out.health("redfish_sensor_health", (*ch, ("sensor", sid)), s)
        kind = _sensor_kind(s)
        if kind is None:
            continue
        metric, scale = kind
        value = number(s.get("Reading"))
        out.add(metric, labels, value, scale)
        if metric == "redfish_temperature_celsius":
            th = s.get("Thresholds")
            for key, name in _THRESHOLDS:
                out.add(
                    "redfish_temperature_threshold_celsius",
                    (*ch, ("sensor", sid), ("threshold", name)),
                    number(th.get(key, {}).get("Reading"))
                    if isinstance(th, dict) and isinstance(th.get(key), dict)
                    else None,
                )
        if s.get("PhysicalContext") == "Chassis":
            if metric == "redfish_power_watts":
                chassis_power.append(value * scale if value is not None else None)
            elif metric == "redfish_energy_joules_total":
                chassis_energy.append((value, scale))
    # rule 3: the headline power and energy
    env = r.get(c.environment)
    power = res.value(env.get("PowerWatts")) if env and isinstance(env.get("PowerWatts"), dict) else None
    if power is None and env and isinstance(env.get("PowerWatts"), dict) and res.sensor(env["PowerWatts"]):
        pass  # the named sensor reads null: no sample, and no fallback to a different source
    elif power is None and len(chassis_power) == 1:
        power = chassis_power[0]
    old_power = r.get(c.power)
    if power is None and old_power is not None:
        pc = old_power.get("PowerControl")
        if isinstance(pc, list) and pc and isinstance(pc[0], dict):
            power = number(pc[0].get("PowerConsumedWatts"))
    out.add("redfish_chassis_power_watts", ch, power)
    energy: float | None = None
    if env:
        if isinstance(env.get("EnergykWh"), dict):
            v = res.value(env["EnergykWh"])
            energy = v * KWH if v is not None else None
        elif isinstance(env.get("EnergyJoules"), dict):
            energy = res.value(env["EnergyJoules"])
    if energy is None and len(chassis_energy) == 1 and chassis_energy[0][0] is not None:
        energy = chassis_energy[0][0] * chassis_energy[0][1]
    out.add("redfish_chassis_energy_joules_total", ch, energy)
    # power supplies (PowerSubsystem)
    for psu in _members(c.power_supplies, r):
        pid = _str(psu.get("Id"))
        labels = (*ch, ("sensor", pid))
        out.health("redfish_power_supply_health", labels, psu)
        m = r.get(c.psu_metrics.get(normalize(_str(psu.get("@odata.id")))))
        if m is not None:
            out.add("redfish_power_supply_input_watts", labels, res.value(m.get("InputPowerWatts")))
    # fans and coolant (ThermalSubsystem)
    for fan in _members(c.fans, r):
        labels = (*ch, ("sensor", _str(fan.get("Id"))))
        out.health("redfish_fan_health", labels, fan)
        sp = fan.get("SpeedPercent")
        pct = res.value(sp)
        out.add("redfish_fan_speed_ratio", labels, pct, 0.01)
        out.add("redfish_fan_speed_rpm", labels, res.value(sp, "SpeedRPM"))
    for cc in _members(c.coolant, r):
        labels = (*ch, ("sensor", _str(cc.get("Id"))))
        out.health("redfish_coolant_connector_health", labels, cc)
        out.add(
            "redfish_coolant_supply_temperature_celsius",
            labels,
            res.value(cc.get("SupplyTemperatureCelsius")),
        )
        out.add(
            "redfish_coolant_return_temperature_celsius",
            labels,
            res.value(cc.get("ReturnTemperatureCelsius")),
        )
    _deprecated(out, ch, old_power, r.get(c.thermal))


def _member_label(m: dict[str, Any]) -> str:
    return _str(m.get("Name")) or _str(m.get("MemberId"))


def _deprecated(out: _Out, ch: Labels, power: dict[str, Any] | None, thermal: dict[str, Any] | None) -> None:
    """Rule 2: the deprecated Power and Thermal, read only for a domain no newer resource covers."""

    def items(doc: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
        v = doc.get(key) if doc else None
        return [m for m in v if isinstance(m, dict)] if isinstance(v, list) else []

    for m in items(power, "PowerControl"):
        out.add(
            "redfish_power_watts",
            (*ch, ("sensor", _member_label(m)), ("context", "Chassis")),
            number(m.get("PowerConsumedWatts")),
        )
    for m in items(power, "Voltages"):
        labels: Labels = (*ch, ("sensor", _member_label(m)), ("context", _str(m.get("PhysicalContext"))))
        out.add("redfish_voltage_volts", labels, number(m.get("ReadingVolts")))
    for m in items(power, "PowerSupplies"):
        labels = (*ch, ("sensor", _member_label(m)))
        out.health("redfish_power_supply_health", labels, m)
        out.add("redfish_power_supply_input_watts", labels, number(m.get("PowerInputWatts")))
    for m in items(thermal, "Temperatures"):
        name = _member_label(m)
        out.add(
            "redfish_temperature_celsius",
            (*ch, ("sensor", name), ("context", _str(m.get("PhysicalContext")))),
            number(m.get("ReadingCelsius")),
        )
        out.health("redfish_sensor_health", (*ch, ("sensor", name)), m)
        for key, th in _OLD_THRESHOLDS:
            out.add(
                "redfish_temperature_threshold_celsius",
                (*ch, ("sensor", name), ("threshold", th)),
                number(m.get(key)),
            )
    for m in items(thermal, "Fans"):
        labels = (*ch, ("sensor", _member_label(m)))
        out.health("redfish_fan_health", labels, m)
        units = m.get("ReadingUnits")
        if units == "RPM":
            out.add("redfish_fan_speed_rpm", labels, number(m.get("Reading")))
        elif units == "Percent":
            out.add("redfish_fan_speed_ratio", labels, number(m.get("Reading")), 0.01)


def _pdu(out: _Out, p: PduPlan, r: Readings, res: _Resolver) -> None:
    doc = r.get(p.uri)
    if doc is None:
        return
    pl: Labels = (("pdu", p.id),)
    out.health("redfish_pdu_health", pl, doc)
    m = r.get(p.metrics)
    if m is not None:
        out.add("redfish_pdu_power_watts", pl, res.value(m.get("PowerWatts")))
        out.add("redfish_pdu_energy_joules_total", pl, res.value(m.get("EnergykWh")), KWH)
    for o in _members(p.outlets, r):
        labels: Labels = (*pl, ("outlet", _str(o.get("Id"))))
        out.health("redfish_pdu_outlet_health", labels, o)
        out.add("redfish_pdu_outlet_power_watts", labels, res.value(o.get("PowerWatts")))
        out.add("redfish_pdu_outlet_energy_joules_total", labels, res.value(o.get("EnergykWh")), KWH)
        out.add("redfish_pdu_outlet_current_amperes", labels, res.value(o.get("CurrentAmps")))
        out.add("redfish_pdu_outlet_voltage_volts", labels, res.value(o.get("Voltage")))
    for coll, ctype in ((p.mains, "mains"), (p.branches, "branch")):
        for cdoc in _members(coll, r):
            labels = (*pl, ("circuit", _str(cdoc.get("Id"))), ("circuit_type", ctype))
            out.health("redfish_pdu_circuit_health", labels, cdoc)
            out.add("redfish_pdu_circuit_power_watts", labels, res.value(cdoc.get("PowerWatts")))
            out.add("redfish_pdu_circuit_energy_joules_total", labels, res.value(cdoc.get("EnergykWh")), KWH)
            out.add("redfish_pdu_circuit_current_amperes", labels, res.value(cdoc.get("CurrentAmps")))
            out.add("redfish_pdu_circuit_voltage_volts", labels, res.value(cdoc.get("Voltage")))


def samples(
    target: str, origin: tuple[str, str, int], plan: Plan, readings: Readings
) -> tuple[list[Sample], int]:
    """The samples of one target's scrape (without redfish_up and the duration), and the number of
    readings refused (infinite once converted)."""
    out = _Out(target)
    res = _Resolver(origin, plan, readings)
    for c in plan.chassis:
        _chassis(out, c, readings, res)
    for p in plan.pdus:
        _pdu(out, p, readings, res)
    return out.samples, out.refused
