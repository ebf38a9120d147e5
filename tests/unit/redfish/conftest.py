"""Factories for the Redfish tests: credentials files, simulated BMCs on 127.0.0.1, a throwaway CA,
and collectors over them."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vigil.exporters.redfish import RedfishCollector, parse_config
from vigil.exporters.redfish.bmcsim.sim import Model, SimConfig, make_server, serve_in_thread, tls_context

USER, PASSWORD = "monitor", "s3cret:with:colons"


@dataclass
class Bmc:
    url: str
    model: Model
    server: Any
    sessions: Any


@pytest.fixture
def creds(tmp_path: Path) -> str:
    path = tmp_path / "bmc.cred"
    path.write_text(f"{USER}:{PASSWORD}\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def faults_file(tmp_path: Path) -> str:
    return str(tmp_path / "faults.json")


@pytest.fixture
def make_bmc(faults_file: str) -> Iterator[Callable[..., Bmc]]:
    servers: list[Any] = []

    def make(mockup: str = "rackmount1", *, tls: tuple[str, str] | None = None, **kw: Any) -> Bmc:
        kw.setdefault("faults_file", faults_file)
        cfg = SimConfig(mockup=mockup, user=USER, password=PASSWORD, **kw)
        model = Model(cfg)
        srv, sessions = make_server(
            ("127.0.0.1", 0), model, tls=tls_context(*tls) if tls else None, timeout=5.0
        )
        serve_in_thread(srv)
        servers.append(srv)
        port = srv.server_address[1]
        return Bmc(f"{'https' if tls else 'http'}://127.0.0.1:{port}", model, srv, sessions)

    yield make
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def make_collector(tmp_path: Path, creds: str) -> Iterator[Callable[..., RedfishCollector]]:
    made: list[RedfishCollector] = []

    def make(
        targets: dict[str, str], *, extra: str = "", insecure: bool = True, **kw: Any
    ) -> RedfishCollector:
        lines = ["targets:"]
        for name, url in targets.items():
            lines += [
                f"  - name: {name}",
                f"    url: {url}",
                f"    credentials_file: {creds}",
                f"    insecure: {'true' if insecure else 'false'}",
            ]
            lines += [f"    {line}" for line in extra.splitlines() if line]
        path = tmp_path / "redfish.yml"
        path.write_text("\n".join(lines) + "\n")
        c = RedfishCollector(parse_config(path.read_text(), str(path)), **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        key = (m.group(1), frozenset(_LABEL.findall(m.group(2) or "")))
        assert key not in out, f"duplicate series: {line}"
        out[key] = float(m.group(3))
    return out


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, **labels: str
) -> float | None:
    """The one sample of METRIC whose labels include LABELS (None when there is none)."""
    want = set(labels.items())
    found = [v for (name, lbls), v in samples.items() if name == metric and want <= lbls]
    assert len(found) <= 1, f"{metric} {labels}: {len(found)} samples"
    return found[0] if found else None


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it, plus an unrelated CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def ca(cn: str) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(name(cn))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(key, hashes.SHA256())
        )
        return key, cert

    ca_key, ca_cert = ca("vigil test BMC CA")
    _, other_cert = ca("some other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("bmc"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = {
        "ca": ca_cert.public_bytes(pem),
        "other_ca": other_cert.public_bytes(pem),
        "cert": cert.public_bytes(pem),
        "key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    }
    out = {}
    for k, data in files.items():
        (d / f"{k}.pem").write_bytes(data)
        out[k] = str(d / f"{k}.pem")
    os.chmod(out["key"], 0o600)
    return out
