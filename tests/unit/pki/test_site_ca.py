"""The site CA: made once, certificates issued again only when needed, refused where an attacker on the
admin host would swap files, and good for a real TLS handshake (Python's ssl, OpenSSL underneath)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from vigil.installer import pki
from vigil.installer.pki import PkiError, PkiPaths


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    assert pki.init_ca(home) is True
    return home


def cert_of(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_ca_is_made_once_private_and_a_real_ca(home: Path) -> None:
    paths = PkiPaths.of(home)
    assert mode(paths.root) == 0o700 and mode(paths.ca_key) == 0o600
    before = (paths.ca_key.read_bytes(), paths.ca_cert.read_bytes())
    assert pki.init_ca(home) is False  # a second init changes nothing
    assert (paths.ca_key.read_bytes(), paths.ca_cert.read_bytes()) == before
    ca = cert_of(paths.ca_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert (
        isinstance(ca.public_key(), ec.EllipticCurvePublicKey) and ca.public_key().curve.name == "secp256r1"
    )


def test_a_server_certificate_passes_openssl_and_a_tls_handshake_by_name_and_address(home: Path) -> None:
    out = pki.issue(home, "mon01", dns=["mon01.lab"], ips=["127.0.0.1"])
    assert out.changed and out.reason == "missing" and mode(out.key) == 0o600
    ca = PkiPaths.of(home).ca_cert
    res = subprocess.run(
        ["openssl", "verify", "-CAfile", str(ca), "-purpose", "sslserver", str(out.cert)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert _handshake(out, ca, "mon01.lab") == "ok"
    assert _handshake(out, ca, "127.0.0.1") == "ok"
    assert "doesn't match" in _handshake(out, ca, "gpu01") or "mismatch" in _handshake(out, ca, "gpu01")


def test_a_client_that_trusts_another_ca_refuses_the_server(home: Path, tmp_path: Path) -> None:
    out = pki.issue(home, "mon01", dns=["mon01.lab"])
    other = tmp_path / "other"
    pki.init_ca(other, name="someone else's CA")
    assert "certificate verify failed" in _handshake(out, PkiPaths.of(other).ca_cert, "mon01.lab")


def _handshake(server: pki.Issued, ca: Path, name: str) -> str:
    """Serve SERVER's certificate on 127.0.0.1 and connect to it trusting CA, for NAME."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(server.cert, server.key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with sctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    cctx = ssl.create_default_context(cafile=str(ca))
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            cctx.wrap_socket(raw, server_hostname=name) as tls,
        ):
            tls.sendall(b"x")
        return "ok"
    except ssl.SSLError as exc:
        return str(exc)
    finally:
        listener.close()
        t.join(5)


def test_issue_again_only_when_needed(home: Path, tmp_path: Path) -> None:
    first = pki.issue(home, "gpu01", ips=["198.18.0.21"])
    again = pki.issue(home, "gpu01", ips=["198.18.0.21"])
    assert not again.changed and again.reason == "valid"
    assert first.cert.read_bytes() == again.cert.read_bytes()
    moved = pki.issue(home, "gpu01", ips=["198.18.0.22"])
    assert moved.changed and moved.reason == "issued for other names"
    client = pki.issue(home, "gpu01", usage="client")  # a second usage lives beside the first
    assert client.changed and client.cert.name == "client.crt" and moved.cert.exists()
    short = pki.issue(home, "ctl01", days=20, renew_days=10).cert.read_bytes()
    assert not pki.issue(home, "ctl01", days=20, renew_days=10).changed
    renewed = pki.issue(home, "ctl01", renew_days=25)
    assert renewed.changed and renewed.reason in (
        "expires in 19 days (renewed within 25)",
        "expires in 20 days (renewed within 25)",
    ), renewed.reason
    assert short != renewed.cert.read_bytes()
    # a certificate of another CA in its place is not trusted, and replaced
    other = tmp_path / "other"
    pki.init_ca(other)
    foreign = pki.issue(other, "gpu01", ips=["198.18.0.22"])
    os.replace(foreign.cert, moved.cert)
    os.replace(foreign.key, moved.key)
    fixed = pki.issue(home, "gpu01", ips=["198.18.0.22"])
    assert fixed.changed and fixed.reason == "not issued by the site CA"


def test_status_says_ok_renew_expired_and_invalid(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki.issue(home, "mon01", ips=["198.18.0.10"])
    pki.issue(home, "gpu01", days=10, renew_days=5)
    other = tmp_path / "other"
    pki.init_ca(other)
    foreign = pki.issue(other, "evil")
    (PkiPaths.of(home).issued("evil")).mkdir(mode=0o700, parents=True)
    os.replace(foreign.cert, PkiPaths.of(home).issued("evil") / "server.crt")
    states = {c.name: c.state for c in pki.status(home).certs}
    assert states == {"mon01": "ok", "gpu01": "renew", "evil": "invalid"}
    later = pki._now() + timedelta(days=11)
    monkeypatch.setattr(pki, "_now", lambda: later)
    states = {c.name: c.state for c in pki.status(home).certs}
    assert states["gpu01"] == "expired"


def test_an_encrypted_ca_key_needs_its_passphrase(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pki.init_ca(home, passphrase=b"correct horse")
    assert b"ENCRYPTED" in PkiPaths.of(home).ca_key.read_bytes()
    with pytest.raises(PkiError, match="is encrypted: give its passphrase"):
        pki.issue(home, "mon01")
    with pytest.raises(PkiError, match="wrong passphrase"):
        pki.issue(home, "mon01", passphrase=b"wrong")
    assert not PkiPaths.of(home).issued("mon01").joinpath("server.crt").exists()
    assert pki.issue(home, "mon01", passphrase=b"correct horse").changed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "../etc"}, "must be a host name"),
        ({"name": "mon01", "dns": ["bad name"]}, "is not a DNS name"),
        ({"name": "mon01", "ips": ["198.18.0.300"]}, "is not an IP address"),
        ({"name": "mon01", "usage": "both"}, "must be one of server, client"),
        ({"name": "mon01", "days": 4000}, "must be between 1 and 397"),
        ({"name": "mon01", "renew_days": 400}, "must be at least 0 and below --days 397"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_written(home: Path, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    name = kwargs.pop("name")
    with pytest.raises(PkiError, match=message):
        pki.issue(home, name, **kwargs)
    assert not (PkiPaths.of(home).root / "issued").exists() or not any(
        (PkiPaths.of(home).root / "issued").iterdir()
    )


def test_links_and_open_modes_in_the_store_are_refused(home: Path, tmp_path: Path) -> None:
    paths = PkiPaths.of(home)
    # a CA key readable by others
    paths.ca_key.chmod(0o644)
    with pytest.raises(PkiError, match="is readable by others"):
        pki.issue(home, "mon01")
    paths.ca_key.chmod(0o600)
    # the CA key swapped for a link to a key of the attacker's
    elsewhere = tmp_path / "attacker.key"
    elsewhere.write_bytes(paths.ca_key.read_bytes())
    elsewhere.chmod(0o600)
    real = paths.ca_key.read_bytes()
    paths.ca_key.unlink()
    paths.ca_key.symlink_to(elsewhere)
    with pytest.raises(PkiError, match="a link"):
        pki.issue(home, "mon01")
    paths.ca_key.unlink()
    paths.ca_key.write_bytes(real)
    paths.ca_key.chmod(0o600)
    # the store opened to others
    paths.root.chmod(0o755)
    with pytest.raises(PkiError, match="is open to others"):
        pki.issue(home, "mon01")
    paths.root.chmod(0o700)
    # a host's directory that is a link
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (paths.root / "issued").mkdir(mode=0o700, exist_ok=True)
    paths.issued("gpu01").symlink_to(target)
    with pytest.raises(PkiError, match="is a link"):
        pki.issue(home, "gpu01")
    assert list(target.iterdir()) == []


def test_a_key_that_does_not_match_the_ca_is_named(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    pki.init_ca(other)
    paths = PkiPaths.of(home)
    paths.ca_key.write_bytes(PkiPaths.of(other).ca_key.read_bytes())
    with pytest.raises(PkiError, match="does not belong to"):
        pki.issue(home, "mon01")


def test_without_a_ca_the_error_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(PkiError, match="no site CA; run `vigil pki init` first"):
        pki.issue(tmp_path / "home", "mon01")
