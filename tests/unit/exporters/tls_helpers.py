"""A throwaway PKI and client helpers for the exporters' TLS tests: a CA that signs a certificate
for 127.0.0.1, and a second CA that stands for the one a wrong client trusts."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

USER = "prometheus"
PASSWORD = "Zq8cV1mT4rX0pL7nB2kW9sD3fG6hJ5aY8eR1uI0o"  # 40 alphanumerics, as generated


@dataclass
class Pki:
    ca: Path
    other_ca: Path
    cert: Path
    key: Path
    other_key: Path


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> None:
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc))


def _ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_pki(d: Path) -> Pki:
    """The CA, the other CA, and the server's certificate and key, written to D."""
    ca, ca_key = _ca("vigil test CA")
    other_ca, _ = _ca("another CA")
    key = new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(d / "ca.pem", d / "other-ca.pem", d / "server.pem", d / "server.key", d / "other.key")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.other_ca.write_bytes(other_ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_key(pki.key, key)
    write_key(pki.other_key, new_key())
    return pki


def client_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
