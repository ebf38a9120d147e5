"""A Redfish BMC (or PDU) for the lab and the tests: a DMTF mockup served with authentication,
optionally over TLS, with readings that move.

Live readings (unless ``static``): each *load* is a node's power, ``idle_w`` plus the power of its
GPUs, read from the GPU simulator's /metrics (the sum of ``DCGM_FI_DEV_POWER_USAGE``, at most once a
second) or a fixed ``gpu_power_w``.

* a server mockup (a chassis with a Sensors collection) has one load: its chassis power sensors, its
  power supplies' input power (shared out), EnvironmentMetrics and the deprecated PowerControl all read
  that power; its chassis energy sensors integrate it; the inlet and CPU temperatures follow the load;
* a PDU mockup (PowerEquipment/RackPDUs) has one load per GPU simulator URL: the outlets, in Id order,
  carry the loads (the rest read 0 W), branches sum their outlets, the PDU sums all, and every energy
  counter integrates its power exactly (piecewise constant between requests);
* every excerpt whose DataSourceUri names a Sensor reads that Sensor: the tree served is consistent,
  unlike the mockups themselves (``static`` serves them unchanged, for the winner-rule tests).

Faults (``faults.json``, re-read at every request): ``bmc-thermal``, ``bmc-down``, ``bmc-slow``.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hmac
import json
import logging
import re
import secrets
import socket
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Callable, Protocol
from urllib.parse import unquote, urlsplit

from vigil.exporters.redfish.bmcsim import faults as _faults

log = logging.getLogger("vigil.exporters.redfish.bmcsim")

#: the mockups shipped in the wheel, by short name
MOCKUPS = {
    "rackmount1": "public-rackmount1",
    "pdu": "public-pdu",
    "liquid-cooled-server": "public-liquid-cooled-server",
}
ROOT = "/redfish/v1"
KWH = 3.6e6
THERMAL_FAULT = {"Intake": 48.0, "CPU": 96.0, "Exhaust": 60.0}


class _Node(Protocol):
    @property
    def name(self) -> str: ...

    def is_dir(self) -> bool: ...

    def iterdir(self) -> Any: ...

    def read_bytes(self) -> bytes: ...

    def joinpath(self, *child: str) -> Any: ...


def _walk_files(node: _Node, rel: str, out: dict[str, bytes]) -> None:
    for child in node.iterdir():
        if child.is_dir():
            _walk_files(child, f"{rel}/{child.name}", out)
        elif child.name == "index.json":
            out[rel or "/"] = child.read_bytes()


def load_mockup(spec: str) -> dict[str, dict[str, Any]]:
    """Path -> resource of a mockup: a short name (rackmount1, pdu, liquid-cooled-server) of a shipped
    one, or a directory in the DMTF layout (``DIR/index.json`` is /redfish/v1, or ``DIR/redfish/v1/...``)."""
    node: _Node
    if spec in MOCKUPS:
        node = resources.files("vigil.exporters.redfish.bmcsim").joinpath("mockups", MOCKUPS[spec])
    else:
        from pathlib import Path

        path = Path(spec)
        if (path / "redfish" / "v1").is_dir():
            path = path / "redfish" / "v1"
        if not (path / "index.json").is_file():
            raise ValueError(
                f"{spec}: no index.json (not a mockup directory, nor one of {', '.join(MOCKUPS)})"
            )
        node = path
    raw: dict[str, bytes] = {}
    _walk_files(node, "", raw)
    docs: dict[str, dict[str, Any]] = {}
    for rel, data in raw.items():
        key = ROOT + (rel if rel != "/" else "")
        try:
            docs[key] = json.loads(data)
        except ValueError:
            docs[key] = {"__raw__": data.decode("latin-1")}  # served as is: a hostile mockup for tests
    return docs


def read_gpu_power(
    url: str,
    timeout: float = 1.0,
    *,
    context: ssl.SSLContext | None = None,
    auth: tuple[str, str] | None = None,
) -> float:
    """The sum of DCGM_FI_DEV_POWER_USAGE on the GPU simulator's (or dcgm-exporter's) /metrics;
    over https with CONTEXT (the site CA), and with AUTH (user, password) as Basic credentials."""
    req = urllib.request.Request(url)  # noqa: S310 - an operator-given URL
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    # no proxy: the feed is a host of the cluster
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    with opener.open(req, timeout=timeout) as resp:
        text = resp.read(4 * 1024 * 1024).decode("utf-8", "replace")
    total = 0.0
    for line in text.splitlines():
        if line.startswith("DCGM_FI_DEV_POWER_USAGE"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name == "DCGM_FI_DEV_POWER_USAGE":
                total += float(line.rsplit(" ", 1)[-1])
    return total


@dataclass
class SimConfig:
    mockup: str = "rackmount1"
    user: str = "admin"
    password: str = field(default="", repr=False)
    static: bool = False
    idle_w: float = 250.0
    gpu_power_w: float = 0.0
    gpu_metrics_urls: list[str] = field(default_factory=list)
    #: how the GPU metrics are read over https: the CA to check them against, the Basic credentials
    gpu_metrics_context: ssl.SSLContext | None = field(default=None, repr=False)
    gpu_metrics_auth: tuple[str, str] | None = field(default=None, repr=False)
    #: loads of a PDU when no GPU URL is given
    nodes: int = 1
    faults_file: str = _faults.DEFAULT_STATE
    session_timeout: float = 1800.0


Fn = Callable[[list[float], list[float], dict[str, dict[str, float]]], float]


def _power(loads: list[int], scale: float = 1.0) -> Fn:
    """The power of LOADS (summed, times SCALE) in W."""
    return lambda p, e, f: round(sum(p[i] for i in loads) * scale, 2)


def _energy(loads: list[int], base_kwh: float, scale: float = 1.0) -> Fn:
    """BASE_KWH plus the energy LOADS have drawn (summed, times SCALE), in kWh."""
    return lambda p, e, f: round(base_kwh + sum(e[i] for i in loads) * scale / KWH, 6)


def _ref(doc: object, key: str) -> str | None:
    if isinstance(doc, dict) and isinstance(doc.get(key), dict):
        v = doc[key].get("@odata.id")
        return v.rstrip("/") if isinstance(v, str) else None
    return None


def _members(docs: dict[str, dict[str, Any]], path: str | None) -> list[str]:
    coll = docs.get(path) if path else None
    out = []
    for m in coll.get("Members", []) if isinstance(coll, dict) else []:
        if isinstance(m, dict) and isinstance(m.get("@odata.id"), str):
            out.append(m["@odata.id"].rstrip("/"))
    return out


class Model:
    """The mockup and its live values."""

    def __init__(self, cfg: SimConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.docs = load_mockup(cfg.mockup)
        self.clock = clock
        self._lock = threading.Lock()
        self._last = clock()
        urls = cfg.gpu_metrics_urls
        self.loads = max(1, len(urls) or cfg.nodes)
        self._gpu_w = [cfg.gpu_power_w] * self.loads
        self._gpu_at = [-1e9] * self.loads
        self._warned: set[int] = set()
        #: sensor path -> a function of (power of each load, energy of each load in J) -> reading
        self.sensor_fn: dict[
            str, Callable[[list[float], list[float], dict[str, dict[str, float]]], float]
        ] = {}
        #: path -> fixes applied to a copy of the resource at each request
        self.fixes: dict[
            str, list[Callable[[dict[str, Any], list[float], list[float], dict[str, dict[str, float]]], None]]
        ] = {}
        self.energy_j = [0.0] * self.loads
        self.base_kwh: dict[str, float] = {}
        self.thermal_sensors: dict[str, str] = {}
        if not cfg.static:
            self._plan_server()
            self._plan_pdu()

    # --- what moves ------------------------------------------------------------------------------

    def _plan_server(self) -> None:
        docs = self.docs
        for chassis in _members(docs, _ref(docs.get(ROOT), "Chassis")):
            cdoc = docs.get(chassis)
            sensors = _members(docs, _ref(cdoc, "Sensors"))
            if not sensors or _ref(cdoc.get("Links") if cdoc else None, "PowerDistribution"):
                continue  # a PDU's chassis: its sensors are the PDU's (below)
            psu_power = [
                s
                for s in sensors
                if docs.get(s, {}).get("ReadingType") == "Power"
                and docs[s].get("PhysicalContext") == "PowerSupply"
                and docs[s].get("Reading") is not None
            ]
            for s in sensors:
                d = docs.get(s, {})
                rtype, ctx, units = d.get("ReadingType"), d.get("PhysicalContext"), d.get("ReadingUnits")
                if rtype == "Power" and ctx == "Chassis":
                    self.sensor_fn[s] = _power([0])
                elif s in psu_power:
                    self.sensor_fn[s] = _power([0], 1.0 / len(psu_power))
                elif (
                    rtype == "EnergykWh"
                    and d.get("Reading") is not None
                    and ctx in ("Chassis", "PowerSupply")
                ):
                    share = 1.0 if ctx == "Chassis" else 1.0 / max(1, len(psu_power))
                    base = float(d["Reading"])
                    self.sensor_fn[s] = _energy([0], base, share)
                elif units == "Cel" and ctx in ("Intake", "CPU", "Exhaust") and d.get("Reading") is not None:
                    self.thermal_sensors[s] = ctx
                    self.sensor_fn[s] = self._temperature(ctx, float(d["Reading"]))
                    self.fixes.setdefault(s, []).append(self._thermal_status(ctx))
            self.fixes.setdefault(chassis, []).append(self._chassis_status)
            old = _ref(cdoc, "Power")
            if old:
                self.fixes.setdefault(old, []).append(self._old_power)
            old = _ref(cdoc, "Thermal")
            if old:
                self.fixes.setdefault(old, []).append(self._old_thermal)

    def _temperature(
        self, ctx: str, base: float
    ) -> Callable[[list[float], list[float], dict[str, dict[str, float]]], float]:
        def fn(p: list[float], e: list[float], f: dict[str, dict[str, float]]) -> float:
            if "bmc-thermal" in f:
                return THERMAL_FAULT[ctx]
            if ctx == "Intake":
                return 24.0
            load = min(1.0, max(0.0, (p[0] - self.cfg.idle_w) / 1500.0))
            return round((35.0 if ctx == "CPU" else 30.0) + 8.0 * load, 1)

        return fn

    def _thermal_status(
        self, ctx: str
    ) -> Callable[[dict[str, Any], list[float], list[float], dict[str, dict[str, float]]], None]:
        def fix(doc: dict[str, Any], p: list[float], e: list[float], f: dict[str, dict[str, float]]) -> None:
            critical = "bmc-thermal" in f
            doc["Status"] = {"State": "Enabled", "Health": "Critical" if critical else "OK"}
            th = doc.setdefault("Thresholds", {})
            if ctx == "Intake":
                th.setdefault("UpperCaution", {"Reading": 35})
                th.setdefault("UpperCritical", {"Reading": 42})

        return fix

    def _chassis_status(
        self, doc: dict[str, Any], p: list[float], e: list[float], f: dict[str, dict[str, float]]
    ) -> None:
        if "bmc-thermal" in f:
            doc["Status"] = {"State": "Enabled", "Health": "Critical"}

    def _old_power(
        self, doc: dict[str, Any], p: list[float], e: list[float], f: dict[str, dict[str, float]]
    ) -> None:
        pc = doc.get("PowerControl")
        if isinstance(pc, list) and pc and isinstance(pc[0], dict):
            pc[0]["PowerConsumedWatts"] = round(p[0], 1)

    def _old_thermal(
        self, doc: dict[str, Any], p: list[float], e: list[float], f: dict[str, dict[str, float]]
    ) -> None:
        for t in doc.get("Temperatures", []):
            ctx = t.get("PhysicalContext") if isinstance(t, dict) else None
            if ctx in ("Intake", "CPU") and t.get("ReadingCelsius") is not None:
                t["ReadingCelsius"] = self._temperature(ctx, 0.0)(p, e, f)

    def _plan_pdu(self) -> None:
        docs = self.docs
        pe = docs.get(_ref(docs.get(ROOT), "PowerEquipment") or "")
        for pdu in _members(docs, _ref(pe, "RackPDUs")):
            pdoc = docs.get(pdu, {})
            outlets = sorted(_members(docs, _ref(pdoc, "Outlets")), key=lambda u: u.rsplit("/", 1)[-1])
            index = {o: i for i, o in enumerate(outlets[: self.loads])}

            for o in outlets:
                fed = [index[o]] if o in index else []  # an outlet that feeds no node draws nothing
                self._excerpt(o, "PowerWatts", _power(fed))
                self._excerpt(o, "EnergykWh", _energy(fed, self._reading(o, "EnergykWh")))
            for branch in _members(docs, _ref(pdoc, "Branches")):
                linked = [
                    o["@odata.id"].rstrip("/")
                    for o in docs.get(branch, {}).get("Links", {}).get("Outlets", [])
                ]
                idx = [index[o] for o in linked if o in index]
                self._excerpt(branch, "PowerWatts", _power(idx))
                self._excerpt(branch, "EnergykWh", _energy(idx, self._reading(branch, "EnergykWh")))
            metrics = _ref(pdoc, "Metrics")
            if metrics:
                everyone = list(range(self.loads))
                self._excerpt(metrics, "PowerWatts", _power(everyone))
                self._excerpt(metrics, "EnergykWh", _energy(everyone, self._reading(metrics, "EnergykWh")))

    def _reading(self, path: str, key: str) -> float:
        ex = self.docs.get(path, {}).get(key)
        src = ex.get("DataSourceUri") if isinstance(ex, dict) else None
        if isinstance(src, str) and src.rstrip("/") in self.docs:
            v = self.docs[src.rstrip("/")].get("Reading")
        else:
            v = ex.get("Reading") if isinstance(ex, dict) else None
        return float(v) if isinstance(v, (int, float)) else 0.0

    def _excerpt(
        self,
        path: str,
        key: str,
        fn: Callable[[list[float], list[float], dict[str, dict[str, float]]], float],
    ) -> None:
        """KEY's reading of the resource at PATH moves with FN: through the Sensor it names if the
        mockup has that Sensor (and the excerpt follows, see :meth:`render`), else in the excerpt."""
        ex = self.docs.get(path, {}).get(key)
        if not isinstance(ex, dict):
            return
        src = ex.get("DataSourceUri")
        if isinstance(src, str) and src.rstrip("/") in self.docs:
            self.sensor_fn[src.rstrip("/")] = fn
        else:

            def fix(
                doc: dict[str, Any], p: list[float], e: list[float], f: dict[str, dict[str, float]]
            ) -> None:
                if isinstance(doc.get(key), dict):
                    doc[key]["Reading"] = fn(p, e, f)

            self.fixes.setdefault(path, []).append(fix)

    # --- the values now --------------------------------------------------------------------------

    def _gpu(self, i: int) -> float:
        urls = self.cfg.gpu_metrics_urls
        if i >= len(urls):
            return self.cfg.gpu_power_w
        now = self.clock()
        if now - self._gpu_at[i] >= 1.0:
            self._gpu_at[i] = now
            try:
                self._gpu_w[i] = read_gpu_power(
                    urls[i], context=self.cfg.gpu_metrics_context, auth=self.cfg.gpu_metrics_auth
                )
                self._warned.discard(i)
            except (OSError, ValueError) as e:
                if i not in self._warned:
                    log.warning("%s: %s; keeping %.1f W", urls[i], e, self._gpu_w[i])
                    self._warned.add(i)
        return self._gpu_w[i]

    def state(self) -> tuple[list[float], list[float], dict[str, dict[str, float]]]:
        f = _faults.load(self.cfg.faults_file)
        with self._lock:
            power = [self.cfg.idle_w + self._gpu(i) for i in range(self.loads)]
            now = self.clock()
            dt = max(0.0, now - self._last)
            self._last = now
            # the power since the last request is the power read now (piecewise constant)
            for i in range(self.loads):
                self.energy_j[i] += power[i] * dt
            return power, list(self.energy_j), f

    def render(self, path: str, expand: bool) -> dict[str, Any] | None:
        doc = self.docs.get(path)
        if doc is None:
            return None
        if self.cfg.static:
            out = copy.deepcopy(doc)
            if expand and isinstance(out.get("Members"), list):
                out["Members"] = [
                    self.docs.get(m.rstrip("/"), {"@odata.id": m}) for m in _members(self.docs, path)
                ]
            return out
        p, e, f = self.state()
        values = {s: fn(p, e, f) for s, fn in self.sensor_fn.items()}
        out = self._live(path, doc, values, p, e, f)
        if expand and isinstance(out.get("Members"), list):
            out["Members"] = [
                self._live(m, self.docs[m], values, p, e, f) if m in self.docs else {"@odata.id": m}
                for m in _members(self.docs, path)
            ]
        return out

    def _live(
        self,
        path: str,
        doc: dict[str, Any],
        values: dict[str, float],
        p: list[float],
        e: list[float],
        f: dict[str, dict[str, float]],
    ) -> dict[str, Any]:
        out = copy.deepcopy(doc)
        if path in values:
            out["Reading"] = values[path]
        for fix in self.fixes.get(path, []):
            fix(out, p, e, f)
        # every excerpt reads the Sensor it names: a consistent tree
        stack: list[object] = [out]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                src = node.get("DataSourceUri")
                if isinstance(src, str) and node is not out:
                    key = src.rstrip("/")
                    if key in values:
                        node["Reading"] = values[key]
                    elif key in self.docs and "Reading" in self.docs[key]:
                        node["Reading"] = self.docs[key]["Reading"]
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return out


# --- HTTP ---------------------------------------------------------------------------------------


class Sessions:
    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self.clock = clock
        self._by_token: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._ids = 0

    def create(self) -> tuple[str, str]:
        with self._lock:
            self._ids += 1
            sid = f"{self._ids}"
            token = secrets.token_hex(16)
            self._by_token[token] = (sid, self.clock())
            return sid, token

    def check(self, token: str) -> bool:
        with self._lock:
            got = self._by_token.get(token)
            if got is None:
                return False
            if self.clock() - got[1] > self.timeout:
                del self._by_token[token]
                return False
            self._by_token[token] = (got[0], self.clock())
            return True

    def delete(self, sid: str) -> bool:
        with self._lock:
            for token, (s, _) in list(self._by_token.items()):
                if s == sid:
                    del self._by_token[token]
                    return True
            return False

    def drop_all(self) -> None:
        with self._lock:
            self._by_token.clear()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def make_server(
    address: tuple[str, int],
    model: Model,
    *,
    tls: ssl.SSLContext | None = None,
    timeout: float = 30.0,
) -> tuple[ThreadingHTTPServer, Sessions]:
    """A server on ADDRESS serving MODEL (not started: call serve_forever)."""
    cfg = model.cfg
    sessions = Sessions(cfg.session_timeout)
    root_doc = model.docs.get(ROOT, {})
    sessions_path = (_ref(root_doc.get("Links"), "Sessions") or f"{ROOT}/SessionService/Sessions").rstrip("/")
    basic = "Basic " + base64.b64encode(f"{cfg.user}:{cfg.password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        server_version = "vigil-bmcsim"
        protocol_version = "HTTP/1.1"

        def handle(self) -> None:
            if "bmc-down" in _faults.load(cfg.faults_file):
                return  # closed without a word
            # headers and body go out as separate writes: without this, Nagle and delayed ACKs add 40 ms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(OSError, ssl.SSLError):
                super().handle()

        def _authorized(self) -> bool:
            token = self.headers.get("X-Auth-Token")
            if token is not None and sessions.check(token):
                return True
            auth = self.headers.get("Authorization")
            return (
                auth is not None and cfg.password != "" and hmac.compare_digest(auth.encode(), basic.encode())
            )

        def _send(self, code: int, doc: object | None, headers: dict[str, str] | None = None) -> None:
            if isinstance(doc, dict) and "__raw__" in doc:
                body = doc["__raw__"].encode("latin-1")
            else:
                body = json.dumps(doc).encode() if doc is not None else b""
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("OData-Version", "4.0")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            slow = _faults.load(cfg.faults_file).get("bmc-slow")
            if slow is not None and body:
                self.wfile.flush()
                end = time.monotonic() + slow["delay"]
                for i in range(len(body)):
                    if time.monotonic() >= end:
                        self.wfile.write(body[i:])
                        break
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            self.wfile.write(body)

        def _unauthorized(self) -> None:
            self._send(
                401,
                {"error": {"code": "Base.1.0.NoValidSession", "message": "authentication required"}},
                {"WWW-Authenticate": 'Basic realm="vigil-bmcsim"'},
            )

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            path = unquote(parts.path).rstrip("/")
            if path == "/redfish":
                self._send(200, {"v1": f"{ROOT}/"})
                return
            if path != ROOT and not self._authorized():
                self._unauthorized()
                return
            expand = bool(re.search(r"(^|&)\$expand=[.*~]", unquote(parts.query)))
            doc = model.render(path, expand)
            if doc is None:
                self._send(404, {"error": {"code": "Base.1.0.ResourceMissingAtURI", "message": path}})
                return
            self._send(200, doc)

        def do_POST(self) -> None:
            path = urlsplit(self.path).path.rstrip("/")
            length = self.headers.get("Content-Length", "0")
            raw = self.rfile.read(min(int(length) if length.isdigit() else 0, 65536))
            if path != sessions_path:
                self._send(405, {"error": {"message": "only session creation is supported"}})
                return
            try:
                body = json.loads(raw)
                ok = (
                    isinstance(body, dict)
                    and cfg.password != ""
                    and hmac.compare_digest(str(body.get("UserName", "")).encode(), cfg.user.encode())
                    and hmac.compare_digest(str(body.get("Password", "")).encode(), cfg.password.encode())
                )
            except ValueError:
                ok = False
            if not ok:
                self._unauthorized()
                return
            sid, token = sessions.create()
            location = f"{sessions_path}/{sid}"
            doc = {
                "@odata.id": location,
                "@odata.type": "#Session.v1_0_0.Session",
                "Id": sid,
                "UserName": cfg.user,
            }
            self._send(201, doc, {"X-Auth-Token": token, "Location": location})

        def do_DELETE(self) -> None:
            path = urlsplit(self.path).path.rstrip("/")
            if not self._authorized():
                self._unauthorized()
                return
            if path.startswith(sessions_path + "/") and sessions.delete(path.rsplit("/", 1)[-1]):
                self._send(204, None)
                return
            self._send(404, {"error": {"message": path}})

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    Handler.timeout = timeout
    server = _Server(address, Handler)
    if tls is not None:
        # the handshake happens in the connection's own thread, not in the accept loop
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server, sessions


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    t = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="bmcsim", daemon=True
    )
    t.start()
    return t


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
