"""The lab's simulated BMCs and PDU: where each runs, its lab CA certificate and its account.

A real site's BMCs come with their own certificates and accounts, made before vigil arrives; vigil's
exporter is given a CA file and a user and password for each. In the lab, `vigil lab up` plays that
site: it keeps a small CA of its own and one account per BMC in ``$VIGIL_LAB_DIR/bmc/`` (0700, every
key and password 0600), made once and kept by `lab down`, and writes them into the lab inventory,
where the deploy picks them up:

- on each simulator's host, ``redfish_exporter_bmcsim_*`` host variables (the role's lab part runs
  ``vigil-bmcsim`` from the bundle's exporters wheel, with the certificate and the account);
- on the monitoring group, ``redfish_exporter_targets``: one target per BMC, verified against the
  lab CA (never ``insecure``).

Certificates are ECDSA P-256, name the simulator's address in subjectAltName (the exporter checks
it), and are issued again when missing, no longer signed by the CA, naming another address or
within 30 days of their end.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vigil.installer.lab import _files
from vigil.installer.lab.errors import LabError
from vigil.installer.lab.hosts import HOSTS, MAX_GPU_NODES, Host, host_by_name, lab_hosts
from vigil.installer.lab.paths import LabPaths

#: where each simulator listens (HTTPS), on its host's lab address
BMC_PORT = 8443
#: the GPU simulator's port (the dcgm_exporter role's default, dcgm-exporter's own)
GPU_METRICS_PORT = 9400
#: the one account of each simulated BMC (its password is generated per BMC)
BMC_USER = "vigil-lab"
#: the exporter's per-target timeout in the lab (a 10 s scrape: timeout + 5 s fits it)
TARGET_TIMEOUT_S = 5
CA_DAYS = 3650
CERT_DAYS = 825
RENEW_DAYS = 30


@dataclass(frozen=True)
class Bmc:
    #: the exporter's target name: a server BMC is named after its node (the node dashboard's key)
    name: str
    #: the lab host the simulator runs on
    host: str
    #: the mockup it serves (`vigil-bmcsim --mockup`)
    mockup: str
    #: GPU nodes whose GPU simulator's power it follows (a server: its own; the PDU: one per outlet)
    feeds: tuple[str, ...]

    @property
    def ip(self) -> str:
        return host_by_name(self.host, _ANY).ip

    @property
    def url(self) -> str:
        return f"https://{self.ip}:{BMC_PORT}"


#: every host a lab of any size can have
_ANY = lab_hosts(MAX_GPU_NODES)
#: outlets of the public-pdu mockup (A1-A5, B1-B3, C1-C3): one GPU node each
PDU_OUTLETS = 11


def lab_bmcs(hosts: tuple[Host, ...] = HOSTS) -> tuple[Bmc, ...]:
    """One BMC per GPU node of HOSTS, on the node itself; one PDU on the controller, one outlet per
    GPU node for as many nodes as it has outlets (a larger lab's other nodes hang on no PDU)."""
    nodes = tuple(h.name for h in hosts if h.gpu_node)
    ctl = next(h.name for h in hosts if h.slurm_controller)
    pdu = Bmc("pdu01", ctl, "pdu", nodes[:PDU_OUTLETS])
    return (*(Bmc(n, n, "rackmount1", (n,)) for n in nodes), pdu)


#: the BMCs of the lab at its default size
BMCS: tuple[Bmc, ...] = lab_bmcs()


@dataclass(frozen=True)
class BmcMaterial:
    """What `lab up` made for the BMCs: paths on the admin host and the generated passwords."""

    ca_cert: Path
    #: BMC name -> (certificate, key)
    certs: dict[str, tuple[Path, Path]]
    #: BMC name -> password (of BMC_USER)
    passwords: dict[str, str]


def bmc_dir(paths: LabPaths) -> Path:
    return paths.lab_dir / "bmc"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _ensure_ca(d: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key_path, cert_path = d / "ca.key", d / "ca.crt"
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        if (
            isinstance(key, ec.EllipticCurvePrivateKey)
            and cert.public_key() == key.public_key()
            and cert.not_valid_after_utc > _now() + datetime.timedelta(days=RENEW_DAYS)
        ):
            return key, cert
    except (OSError, ValueError):
        pass
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vigil lab BMC CA")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _files.write(key_path, _pem_key(key), mode=0o600)
    _files.write(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return key, cert


def _cert_ok(cert_path: Path, key_path: Path, ca: x509.Certificate, ip: str) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        cert.verify_directly_issued_by(ca)
        ips = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return (
            cert.public_key() == key.public_key()
            and ips.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(ip)]
            and cert.not_valid_after_utc > _now() + datetime.timedelta(days=RENEW_DAYS)
        )
    except Exception:  # unreadable, unparsable, unsigned, no SAN: issue it again
        return False


def _issue(d: Path, bmc: Bmc, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate) -> tuple[Path, Path]:
    cert_path, key_path = d / f"{bmc.name}.crt", d / f"{bmc.name}.key"
    if _cert_ok(cert_path, key_path, ca, bmc.ip):
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{bmc.name} BMC (vigil lab)")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(bmc.ip))]), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _files.write(key_path, _pem_key(key), mode=0o600)
    _files.write(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return cert_path, key_path


def _password(d: Path, bmc: Bmc) -> str:
    path = d / f"{bmc.name}.password"
    try:
        text = path.read_text().strip()
        if len(text) >= 24:
            return text
    except OSError:
        pass
    text = secrets.token_urlsafe(24)
    _files.write(path, text + "\n", mode=0o600)
    return text


def ensure_material(paths: LabPaths, bmcs: tuple[Bmc, ...] = BMCS) -> BmcMaterial:
    """The lab CA, each BMC's certificate and password: made once, kept, re-issued when stale."""
    d = bmc_dir(paths)
    try:
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o700)
        ca_key, ca = _ensure_ca(d)
        certs = {b.name: _issue(d, b, ca_key, ca) for b in bmcs}
        passwords = {b.name: _password(d, b) for b in bmcs}
    except OSError as e:
        raise LabError(str(d), f"cannot write the lab's BMC material: {e.strerror or e}") from None
    return BmcMaterial(ca_cert=d / "ca.crt", certs=certs, passwords=passwords)


def gpu_metrics_url(node: str) -> str:
    return f"http://{host_by_name(node, _ANY).ip}:{GPU_METRICS_PORT}/metrics"


def host_vars(material: BmcMaterial, bmcs: tuple[Bmc, ...] = BMCS) -> dict[str, dict[str, object]]:
    """Inventory host variables of the hosts that run a simulator (the role's lab part)."""
    out: dict[str, dict[str, object]] = {}
    for b in bmcs:
        cert, key = material.certs[b.name]
        out[b.host] = {
            "redfish_exporter_bmcsim_enabled": True,
            "redfish_exporter_bmcsim_mockup": b.mockup,
            "redfish_exporter_bmcsim_port": BMC_PORT,
            "redfish_exporter_bmcsim_gpu_metrics_urls": [gpu_metrics_url(n) for n in b.feeds],
            "redfish_exporter_bmcsim_username": BMC_USER,
            "redfish_exporter_bmcsim_password": material.passwords[b.name],
            "redfish_exporter_bmcsim_tls_cert": str(cert),
            "redfish_exporter_bmcsim_tls_key": str(key),
        }
    return out


def exporter_vars(material: BmcMaterial, bmcs: tuple[Bmc, ...] = BMCS) -> dict[str, object]:
    """Group variables of the monitoring host: the exporter and its targets (verified TLS)."""
    return {
        "redfish_exporter_enabled": True,
        "redfish_exporter_timeout": TARGET_TIMEOUT_S,
        "redfish_exporter_targets": [
            {
                "name": b.name,
                "url": b.url,
                "username": BMC_USER,
                "password": material.passwords[b.name],
                "ca_file": str(material.ca_cert),
            }
            for b in bmcs
        ],
        # one Redfish scrape per lab scrape interval (the target timeout + 5 s fits in it)
        "victoriametrics_redfish_scrape_interval": 2 * TARGET_TIMEOUT_S,
    }
