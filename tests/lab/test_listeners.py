"""Every TCP listener of the stack on every lab host, found with `ss -ltnp`, attacked from outside.

The sockets are discovered on each host (never a list kept by hand): every listening socket of a
process in one of the stack's units (`vigil-*.service`). Every one must refuse plain HTTP and present
a certificate of the site CA only (a client trusting another CA refuses it). An exporter answers 401
over TLS without the scrape credential or with a wrong one, and serves its metrics with it. A
monitoring service (VictoriaMetrics, vmalert, Alertmanager) answers 401 on its API without the API
login, with a wrong one, and with the scrape credential, and answers with the login; its own
/metrics wants the login (Alertmanager) or the site's metrics key (VictoriaMetrics, vmalert).
"""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import re
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

if TYPE_CHECKING:
    from tests.lab.conftest import DeployedStack

pytestmark = pytest.mark.lab

#: the monitoring services: a path of their API that carries data, which must want the API login
MONITORING = {
    "vigil-victoriametrics": "/api/v1/query?query=up",
    "vigil-vmalert": "/api/v1/rules",
    "vigil-alertmanager": "/api/v2/alerts",
}
#: those whose own /metrics wants the site's metrics key (-metricsAuthKey) rather than the login
METRICS_KEY = {"vigil-victoriametrics", "vigil-vmalert"}
#: the lab's simulated BMCs: Redfish over TLS with the lab's own BMC CA and account, as a vendor's
#: BMC would be (not the site CA's, not the scrape credential's)
BMC = "vigil-bmcsim"

_DISCOVER = (
    "ss -ltnpH; echo ---; "
    "for p in $(ss -ltnpH | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do "
    "echo \"$p $(grep -o '[^/]*[.]service' /proc/$p/cgroup | head -1)\"; done"
)


@dataclass(frozen=True)
class Listener:
    host: str
    unit: str
    address: str
    port: int


def _listeners(lab, host: str) -> list[Listener]:
    out = lab.ssh(host, _DISCOVER).stdout
    sockets, _, units = out.partition("---\n")
    unit_of = dict(line.split(" ", 1) for line in units.splitlines() if " " in line)
    found = []
    for line in sockets.splitlines():
        fields = line.split()
        local = fields[3]
        address, _, port = local.rpartition(":")
        for pid in re.findall(r"pid=(\d+)", line):
            unit = unit_of.get(pid, "").strip()
            if unit.startswith("vigil-"):
                found.append(Listener(host, unit.removesuffix(".service"), address.strip("[]"), int(port)))
                break
    return sorted(set(found), key=lambda x: (x.unit, x.port))


@pytest.fixture(scope="module")
def listeners(lab, deployed_stack: DeployedStack) -> list[Listener]:
    out = [x for host in ("mon01", "ctl01", "gpu01", "gpu02") for x in _listeners(lab, host)]
    assert {x.unit for x in out} >= {"vigil-victoriametrics", "vigil-node-exporter"}, out
    return out


def _target(lab, x: Listener) -> str:
    """The address to reach a listener at from the admin host: the host's lab address for a
    wildcard socket, else the socket's own."""
    wildcard = ("*", "0.0.0.0", "::")  # noqa: S104 - read from ss, not bound
    return lab.ip(x.host) if x.address in wildcard else x.address


def _plain_get(ip: str, port: int) -> tuple[int | None, bytes]:
    conn = http.client.HTTPConnection(ip, port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        return resp.status, resp.read(4096)
    except (OSError, http.client.HTTPException):
        return None, b""
    finally:
        conn.close()


def _tls_get(
    ip: str, port: int, ctx: ssl.SSLContext, auth: tuple[str, str] | None, path: str = "/metrics"
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(ip, port, timeout=10, context=ctx)
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _other_ca(tmp: Path) -> Path:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "some other CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = tmp / "other-ca.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def test_every_listener_of_the_stack_wants_tls_and_its_credential(
    lab, deployed_stack: DeployedStack, listeners: list[Listener], tmp_path: Path
) -> None:
    secrets = deployed_stack.home / "secrets"
    password = (secrets / "scrape.password").read_text().strip()
    api = ("vigil-api", (secrets / "api.password").read_text().strip())
    key = (secrets / "metrics.key").read_text().strip()
    site = ssl.create_default_context(cafile=str(secrets / "pki" / "ca.crt"))
    other = ssl.create_default_context(cafile=str(_other_ca(tmp_path)))

    stack = [x for x in listeners if x.unit != BMC]
    # node_exporter on each of the four hosts, the GPU simulator on both GPU nodes, the Slurm and
    # Redfish exporters, and the three monitoring services
    units = sorted(x.unit for x in stack)
    assert units.count("vigil-node-exporter") == 4 and units.count("vigil-gpusim") == 2, listeners
    assert {"vigil-slurm-exporter", "vigil-redfish-exporter", *MONITORING} <= set(units), listeners
    for x in stack:
        ip = _target(lab, x)
        what = f"{x.unit} on {x.host} at {ip}:{x.port}"
        status, body = _plain_get(ip, x.port)
        assert status != 200 and b"# TYPE" not in body, f"{what} answered plain HTTP with {status}"
        with pytest.raises(ssl.SSLCertVerificationError):
            _tls_get(ip, x.port, other, api)
        with (
            socket.create_connection((ip, x.port), timeout=10) as raw,
            site.wrap_socket(raw, server_hostname=ip) as conn,
        ):
            assert conn.version() in ("TLSv1.2", "TLSv1.3"), what
        if x.unit in MONITORING:
            data = MONITORING[x.unit]
            for who in (None, (api[0], api[1] + "x"), ("somebody", api[1]), ("vigil-scrape", password)):
                got = _tls_get(ip, x.port, site, who, data)[0]
                assert got == 401, f"{what}: {data} answered {got} to {who and who[0]}"
            status, body = _tls_get(ip, x.port, site, api, data)
            assert status == 200, f"{what}: {data} answered {status} to the API login: {body[:200]!r}"
            assert _tls_get(ip, x.port, site, None)[0] == 401, f"{what}: /metrics without credentials"
            if x.unit in METRICS_KEY:
                assert _tls_get(ip, x.port, site, api)[0] == 401, f"{what}: /metrics without the key"
                assert _tls_get(ip, x.port, site, None, f"/metrics?authKey={key}x")[0] == 401, what
                status, body = _tls_get(ip, x.port, site, None, f"/metrics?authKey={key}")
            else:
                status, body = _tls_get(ip, x.port, site, api)
            # VictoriaMetrics' own format has no # TYPE lines; every one has the process_ series
            assert status == 200 and b"\nprocess_" in body, f"{what}: its own /metrics answered {status}"
            continue
        assert _tls_get(ip, x.port, site, None)[0] == 401, f"{what} served TLS without credentials"
        assert _tls_get(ip, x.port, site, ("vigil-scrape", password + "x"))[0] == 401, what
        assert _tls_get(ip, x.port, site, ("somebody", password))[0] == 401, what
        assert _tls_get(ip, x.port, site, api)[0] == 401, f"{what} let the API login scrape it"
        status, body = _tls_get(ip, x.port, site, ("vigil-scrape", password))
        assert status == 200 and b"# TYPE" in body, f"{what}: {status} with the scrape credential"


def test_the_host_key_is_readable_by_the_tls_group_only(lab, deployed_stack: DeployedStack) -> None:
    for host in ("mon01", "ctl01", "gpu01", "gpu02"):
        members = lab.ssh(host, "getent group vigil-tls").stdout.strip().split(":")[3]
        assert members == "", (
            f"{host}: vigil-tls has members {members!r}; the units get it as a supplementary group"
        )
        unit = lab.ssh(
            host, "systemctl show vigil-node-exporter -p SupplementaryGroups --value"
        ).stdout.strip()
        assert unit == "vigil-tls", (host, unit)
        # an ordinary user cannot read the key
        denied = lab.ssh(host, "runuser -u nobody -- cat /etc/vigil/tls/server.key >/dev/null 2>&1; echo $?")
        assert denied.stdout.strip() != "0", host


def test_the_simulated_bmcs_want_tls_and_their_account(lab, listeners: list[Listener]) -> None:
    bmcs = [x for x in listeners if x.unit == BMC]
    assert bmcs, listeners
    vendor = ssl.create_default_context()
    vendor.check_hostname = False
    vendor.verify_mode = ssl.CERT_NONE  # the lab's BMC CA: the Redfish tests check it
    for x in bmcs:
        ip = _target(lab, x)
        status, _ = _plain_get(ip, x.port)
        assert status is None or status >= 400, f"{x.host}:{x.port} answered plain HTTP with {status}"
        conn = http.client.HTTPSConnection(ip, x.port, timeout=10, context=vendor)
        try:
            conn.request("GET", "/redfish/v1/Systems")
            assert conn.getresponse().status == 401, f"{x.host}:{x.port}"
        finally:
            conn.close()


# --- the host firewall (role `firewall`) ------------------------------------------------------------

#: run on a lab host: try each ADDRESS:PORT argument at once, print {"ADDRESS:PORT": "open" | why}
_PROBE = r"""
import concurrent.futures, json, socket, sys
def probe(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return target, "open"
    except socket.timeout:
        return target, "timeout"
    except OSError as exc:
        return target, type(exc).__name__
with concurrent.futures.ThreadPoolExecutor(32) as pool:
    print(json.dumps(dict(pool.map(probe, sys.argv[1:]))))
"""


def _let_in(lab) -> dict[str, set[str]]:
    """Host -> the lab hosts' addresses its inventory lets in to its exporters besides the monitoring
    host: the lab's only exception, the simulated PDU on ctl01 reading the GPU nodes' power."""
    data = yaml.safe_load(lab.hosts_file.read_text())
    out: dict[str, set[str]] = {}
    for group in data["all"]["children"].values():
        for host, hv in (group.get("hosts") or {}).items():
            extra = (hv or {}).get("firewall_exporter_extra_sources", [])
            out[host] = {e.removesuffix("/32") for e in extra}
    return out


def _reachable_from(lab, source: str, targets: list[Listener]) -> dict[Listener, str]:
    args = " ".join(f"{_target(lab, x)}:{x.port}" for x in targets)
    res = lab.ssh(source, f"python3 -c '{_PROBE}' {args}")
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout)
    return {x: seen[f"{_target(lab, x)}:{x.port}"] for x in targets}


def test_only_the_monitoring_host_reaches_the_stack_through_each_hosts_firewall(
    lab, listeners: list[Listener]
) -> None:
    """From every lab host, every other host's listeners: mon01 reaches all of them (it scrapes the
    exporters and serves the APIs); any other host none (dropped: the connection times out), save
    the lab's PDU feed. The admin host reaching them all is the test above."""
    let_in = _let_in(lab)
    assert let_in["gpu01"] == {"198.18.0.1", lab.ip("ctl01")}  # the admin host, the PDU's host
    denied = 0
    for source in ("mon01", "ctl01", "gpu01", "gpu02"):
        targets = [x for x in listeners if x.host != source and x.address not in ("127.0.0.1", "::1")]
        assert targets
        for x, seen in _reachable_from(lab, source, targets).items():
            allowed = source == "mon01" or lab.ip(source) in let_in.get(x.host, set())
            assert seen == ("open" if allowed else "timeout"), f"{source} -> {x}: {seen}"
            denied += not allowed
    assert denied >= 10  # every API on mon01 from three hosts, the exporters between the nodes


def test_the_firewall_is_one_table_of_its_own_loaded_at_boot_and_counting_drops(lab, deployed_stack) -> None:
    for host in ("mon01", "gpu01"):
        listed = json.loads(lab.ssh(host, "nft -j list ruleset").stdout)["nftables"]
        tables = {(i["table"]["family"], i["table"]["name"]) for i in listed if "table" in i}
        assert ("inet", "vigil") in tables, tables
        unit = lab.ssh(
            host, "systemctl is-enabled vigil-firewall.service; systemctl is-active vigil-firewall.service"
        )
        assert unit.stdout.split() == ["enabled", "active"], unit.stdout
    drops = lab.ssh("gpu01", "nft -j list chain inet vigil input").stdout
    counters = [
        e["counter"]["packets"]
        for i in json.loads(drops)["nftables"]
        if "rule" in i
        for e in i["rule"]["expr"]
        if "counter" in e
    ]
    assert counters and counters[0] > 0  # the probes from ctl01 and gpu02 above were dropped here
