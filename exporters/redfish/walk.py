"""Walk a Redfish service once (the slow part, cached), then fetch only the readings at each scrape.

The walk follows ``@odata.id`` links by property name from the service root, never by a fixed path::

    ServiceRoot ─ Chassis ─▶ members ─┬─ Sensors ─▶ members
                                      ├─ EnvironmentMetrics
                                      ├─ PowerSubsystem ─ PowerSupplies ─▶ members ─ Metrics
                                      ├─ ThermalSubsystem ─ Fans, CoolantConnectors ─▶ members
                                      └─ Power, Thermal   (deprecated: only when the newer ones are absent)
    ServiceRoot ─ PowerEquipment ─ RackPDUs, FloorPDUs ─▶ members ─┬─ Metrics
                                                                   └─ Outlets, Branches, Mains ─▶ members

Each resource is fetched at most once per walk, a collection yields at most ``MAX_MEMBERS`` members
and a walk at most ``MAX_RESOURCES`` requests, so a BMC whose links loop or multiply cannot make the
walk run away. A resource that cannot be used (not found, not JSON, off-origin link, ...) is skipped
with a log line; only a failure of the service root fails the walk.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from vigil.exporters.redfish.client import Client, NotFound, ResourceError, normalize, resolve

log = logging.getLogger("vigil.exporters.redfish")

MAX_MEMBERS = 1024
MAX_RESOURCES = 4096


@dataclass
class Collection:
    uri: str
    members: list[str] = field(default_factory=list)


@dataclass
class ChassisPlan:
    id: str
    uri: str
    sensors: Collection | None = None
    environment: str | None = None
    power_supplies: Collection | None = None
    #: power supply URI -> its PowerSupplyMetrics URI
    psu_metrics: dict[str, str] = field(default_factory=dict)
    fans: Collection | None = None
    coolant: Collection | None = None
    #: deprecated Power / Thermal, kept only when no newer resource covers their domain
    power: str | None = None
    thermal: str | None = None


@dataclass
class PduPlan:
    id: str
    uri: str
    kind: str  # RackPDU or FloorPDU
    metrics: str | None = None
    outlets: Collection | None = None
    branches: Collection | None = None
    mains: Collection | None = None


@dataclass
class Plan:
    chassis: list[ChassisPlan] = field(default_factory=list)
    pdus: list[PduPlan] = field(default_factory=list)
    #: the query that expands a collection's members in one request, "" when the BMC cannot
    expand: str = ""
    resources: int = 0

    def sensor_uris(self) -> set[str]:
        return {normalize(u) for c in self.chassis if c.sensors for u in c.sensors.members}


def link_of(doc: object, key: str) -> object | None:
    """``doc[key]["@odata.id"]``, or None."""
    if isinstance(doc, dict):
        ref = doc.get(key)
        if isinstance(ref, dict):
            return ref.get("@odata.id")
    return None


def _label(value: object, fallback: str) -> str:
    text = value if isinstance(value, str) and value else fallback
    return text[:128]


class _Walker:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.fetched: dict[str, dict[str, Any]] = {}
        self.requests = 0

    def get(self, link: object) -> dict[str, Any] | None:
        """The resource at LINK, once per walk; None (logged) when it cannot be used."""
        if link is None:
            return None
        try:
            path = resolve(self.client.target.origin, link)
        except ResourceError as e:
            log.warning("%s: %s", self.client.target.name, e)
            return None
        key = normalize(path)
        if key in self.fetched:
            return self.fetched[key]
        if self.requests >= MAX_RESOURCES:
            raise ResourceError(f"walk: more than {MAX_RESOURCES} resources; stopped")
        self.requests += 1
        try:
            doc = self.client.get(path)
        except ResourceError as e:
            log.warning("%s: %s; skipped", self.client.target.name, e)
            doc = None
        self.fetched[key] = doc if doc is not None else {}
        return doc

    def collection(self, link: object) -> Collection | None:
        doc = self.get(link)
        if doc is None:
            return None
        members = doc.get("Members")
        if not isinstance(members, list):
            return None
        uri = normalize(resolve(self.client.target.origin, link))
        out = Collection(uri)
        seen: set[str] = {uri}
        for m in members:
            if len(out.members) >= MAX_MEMBERS:
                log.warning(
                    "%s: %s has more than %d members; the rest ignored",
                    self.client.target.name,
                    uri,
                    MAX_MEMBERS,
                )
                break
            try:
                path = normalize(resolve(self.client.target.origin, link_of({"m": m}, "m")))
            except ResourceError as e:
                log.warning("%s: %s member: %s", self.client.target.name, uri, e)
                continue
            if path not in seen:  # a member listed twice, or the collection itself: a loop
                seen.add(path)
                out.members.append(path)
        return out


def _expand_query(root: dict[str, Any]) -> str:
    features = root.get("ProtocolFeaturesSupported")
    expand = features.get("ExpandQuery") if isinstance(features, dict) else None
    if not isinstance(expand, dict):
        return ""
    levels = "($levels=1)" if expand.get("Levels") is True else ""
    if expand.get("NoLinks") is True:
        return f"$expand=.{levels}"
    if expand.get("ExpandAll") is True:
        return f"$expand=*{levels}"
    return ""


def walk(client: Client) -> Plan:
    """The plan of what to read on CLIENT's target. Raises FetchError when the service root fails."""
    w = _Walker(client)
    w.requests = 1
    root = client.get("/redfish/v1/")
    w.fetched[normalize("/redfish/v1/")] = root
    plan = Plan(expand=_expand_query(root))
    sessions = link_of(root.get("Links"), "Sessions")
    if sessions is not None:
        try:
            client.sessions_path = resolve(client.target.origin, sessions)
        except ResourceError as e:
            log.warning("%s: sessions: %s", client.target.name, e)
    try:
        _walk_chassis(w, root, plan)
        _walk_power_equipment(w, root, plan)
    except ResourceError as e:  # the walk budget: keep what was found
        log.warning("%s: %s", client.target.name, e)
    plan.resources = w.requests
    return plan


def _walk_chassis(w: _Walker, root: dict[str, Any], plan: Plan) -> None:
    coll = w.collection(link_of(root, "Chassis"))
    for uri in coll.members if coll else []:
        doc = w.get(uri)
        if not doc:
            continue
        c = ChassisPlan(id=_label(doc.get("Id"), uri.rsplit("/", 1)[-1]), uri=uri)
        c.sensors = w.collection(link_of(doc, "Sensors"))
        env = link_of(doc, "EnvironmentMetrics")
        if env is not None and w.get(env) is not None:
            c.environment = normalize(resolve(w.client.target.origin, env))
        psub = w.get(link_of(doc, "PowerSubsystem"))
        if psub is not None:
            c.power_supplies = w.collection(link_of(psub, "PowerSupplies"))
            for psu in c.power_supplies.members if c.power_supplies else []:
                metrics = link_of(w.get(psu), "Metrics")
                if metrics is not None:
                    try:
                        c.psu_metrics[psu] = normalize(resolve(w.client.target.origin, metrics))
                    except ResourceError as e:
                        log.warning("%s: %s", w.client.target.name, e)
        tsub = w.get(link_of(doc, "ThermalSubsystem"))
        if tsub is not None:
            c.fans = w.collection(link_of(tsub, "Fans"))
            c.coolant = w.collection(link_of(tsub, "CoolantConnectors"))
        # the deprecated resources, each only when no newer resource covers its domain
        newer_power = c.sensors or c.environment or psub is not None
        newer_thermal = c.sensors or c.environment or tsub is not None
        for key, newer in (("Power", newer_power), ("Thermal", newer_thermal)):
            old = link_of(doc, key)
            if old is not None and not newer:
                try:
                    path = normalize(resolve(w.client.target.origin, old))
                except ResourceError as e:
                    log.warning("%s: %s", w.client.target.name, e)
                    continue
                setattr(c, key.lower(), path)
        plan.chassis.append(c)


def _walk_power_equipment(w: _Walker, root: dict[str, Any], plan: Plan) -> None:
    pe = w.get(link_of(root, "PowerEquipment"))
    if pe is None:
        return
    for key, kind in (("RackPDUs", "RackPDU"), ("FloorPDUs", "FloorPDU")):
        coll = w.collection(link_of(pe, key))
        for uri in coll.members if coll else []:
            doc = w.get(uri)
            if not doc:
                continue
            p = PduPlan(id=_label(doc.get("Id"), uri.rsplit("/", 1)[-1]), uri=uri, kind=kind)
            metrics = link_of(doc, "Metrics")
            if metrics is not None:
                try:
                    p.metrics = normalize(resolve(w.client.target.origin, metrics))
                except ResourceError as e:
                    log.warning("%s: %s", w.client.target.name, e)
            p.outlets = w.collection(link_of(doc, "Outlets"))
            p.branches = w.collection(link_of(doc, "Branches"))
            p.mains = w.collection(link_of(doc, "Mains"))
            plan.pdus.append(p)


# --- at each scrape --------------------------------------------------------------------------------


class Readings:
    """The resources fetched at one scrape, by normalized path."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.skipped = 0
        #: a resource of the plan is gone: walk again before the next scrape
        self.stale = False

    def get(self, uri: str | None) -> dict[str, Any] | None:
        return self.docs.get(uri) if uri is not None else None


def _fetch_one(client: Client, uri: str, out: Readings) -> None:
    try:
        out.docs[uri] = client.get(uri)
    except ResourceError as e:
        out.skipped += 1
        out.stale = out.stale or isinstance(e, NotFound)
        log.debug("%s: %s; skipped", client.target.name, e)


def _fetch_collection(client: Client, coll: Collection | None, expand: str, out: Readings) -> None:
    if coll is None or not coll.members:
        return
    wanted = set(coll.members)
    if expand:
        try:
            doc = client.get(coll.uri, query=expand)
        except ResourceError as e:
            log.debug("%s: %s (expanded); fetching members one by one", client.target.name, e)
            doc = {}
        members = doc.get("Members")
        for m in members if isinstance(members, list) else []:
            if not isinstance(m, dict) or len(m) <= 1:
                continue  # a bare link: the BMC did not expand it
            try:
                path = normalize(resolve(client.target.origin, m.get("@odata.id")))
            except ResourceError:
                continue
            if path in wanted:
                out.docs[path] = m
    for uri in coll.members:
        if uri not in out.docs:
            _fetch_one(client, uri, out)


def fetch_readings(client: Client, plan: Plan) -> Readings:
    """Every resource that carries a reading or a health, fetched now; a resource that cannot be used
    is skipped (``skipped``, and ``stale`` when one is gone). Raises TargetError when the target fails."""
    out = Readings()
    for c in plan.chassis:
        _fetch_one(client, c.uri, out)
        _fetch_collection(client, c.sensors, plan.expand, out)
        for uri in (c.environment, c.power, c.thermal):
            if uri is not None:
                _fetch_one(client, uri, out)
        _fetch_collection(client, c.power_supplies, plan.expand, out)
        for uri in c.psu_metrics.values():
            _fetch_one(client, uri, out)
        _fetch_collection(client, c.fans, plan.expand, out)
        _fetch_collection(client, c.coolant, plan.expand, out)
    for p in plan.pdus:
        _fetch_one(client, p.uri, out)
        if p.metrics is not None:
            _fetch_one(client, p.metrics, out)
        for coll in (p.outlets, p.branches, p.mains):
            _fetch_collection(client, coll, plan.expand, out)
    return out
