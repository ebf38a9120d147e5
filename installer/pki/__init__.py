"""The site's offline certificate authority, kept on the admin host.

``$VIGIL_HOME/secrets/pki/`` (0700) holds the CA key (``ca.key``, PKCS#8 PEM, 0600, encrypted when
a passphrase is given) and certificate (``ca.crt``), and under ``issued/<name>/`` each certificate
the CA issued (``server.crt``/``client.crt``) with its key (0600). Keys are ECDSA P-256: Go's
crypto/tls (VictoriaMetrics, vmalert, Alertmanager, node_exporter), Python's ``ssl`` (the project's
exporters) and GnuTLS (rsyslog's forwarding of the audit trail) all accept it, while an Ed25519
certificate is refused by TLS 1.2 clients and by older GnuTLS builds.

1. ``init`` makes the CA once (a second ``init`` changes nothing and says so);
2. ``issue`` makes a certificate for a name, with its DNS names and addresses as subjectAltName and
   the extended key usage of its role (TLS server, or TLS client where a component authenticates by
   certificate), and makes it again when it is missing, unreadable, not the CA's, for other names,
   of the other usage, or expiring within ``renew_days`` (30: deploy renews on that rule);
3. ``status`` reads every issued certificate back and says, for each, whether it is the CA's and
   when it expires.

Every file is written staged, then renamed; a path in the store that is a link, or a store or key
that others can read, is refused: those are the places an attacker on the admin host would swap.
``secrets/`` itself is made 0700 (whichever of ``pki`` and the deploy's credentials comes first);
one that is a link, not this user's or writable by others is refused, and one only readable by
others (the 0755 an earlier ``pki init`` left) is closed to 0700.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vigil.basics.atomic import write_file_atomic
from vigil.basics.errors import VigilError

#: a certificate this close to its end is issued again
RENEW_DAYS = 30
#: the longest validity a TLS client accepts for a server certificate (CA/Browser Forum)
LEAF_DAYS = 397
CA_DAYS = 3650
USAGES = ("server", "client")
_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62})")
_DNS_RE = re.compile(
    r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_EKU = {"server": ExtendedKeyUsageOID.SERVER_AUTH, "client": ExtendedKeyUsageOID.CLIENT_AUTH}


class PkiError(VigilError):
    """The site CA or a certificate could not be made, read or trusted."""


@dataclass(frozen=True)
class PkiPaths:
    root: Path

    @classmethod
    def of(cls, home: Path) -> PkiPaths:
        return cls(home / "secrets" / "pki")

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    def issued(self, name: str) -> Path:
        return self.root / "issued" / name


@dataclass(frozen=True)
class Issued:
    name: str
    usage: str
    cert: Path
    key: Path
    changed: bool
    #: why it was (re)issued, or why not
    reason: str


@dataclass(frozen=True)
class CertState:
    name: str
    usage: str
    path: Path
    subject: str
    names: tuple[str, ...]
    not_after: datetime
    days_left: int
    #: "ok", "renew" (within RENEW_DAYS), "expired" or "invalid" (not the site CA's, unreadable)
    state: str
    reason: str = ""


@dataclass
class Status:
    ca_subject: str
    ca_not_after: datetime
    certs: list[CertState] = field(default_factory=list)


# --- files -----------------------------------------------------------------------------------------


def secrets_dir(home: Path) -> Path:
    """``$VIGIL_HOME/secrets``, private to this user (see :func:`_secrets_dir`)."""
    path = home / "secrets"
    _secrets_dir(path)
    return path


def _secrets_dir(path: Path) -> None:
    """``$VIGIL_HOME/secrets`` as a directory of this user, 0700: made so when missing, closed to
    0700 when others may only read it, refused when it is a link, another user's or writable by
    others (then anyone could have put files there)."""
    if path.is_symlink():
        raise PkiError(str(path), "is a link; the site's secrets must not lead elsewhere")
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise PkiError(str(path), f"cannot be opened as a directory: {exc.strerror} (a link?)") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise PkiError(str(path), "is not a directory of this user")
        if st.st_mode & 0o022:
            raise PkiError(
                str(path),
                f"is writable by others (mode {stat.S_IMODE(st.st_mode):o}); check it, then chmod 700 it",
            )
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def _store(paths: PkiPaths) -> None:
    """The CA's store and the ``secrets/`` directory it lives in, both private to this user."""
    _secrets_dir(paths.root.parent)
    _private_dir(paths.root)


def _private_dir(path: Path) -> None:
    """PATH as a directory of this user, 0700, no link on the way from the store's root."""
    if path.is_symlink():
        raise PkiError(str(path), "is a link; the CA's files must not lead elsewhere")
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PkiError(str(path), "is not a directory of this user")
    if st.st_mode & 0o077:
        raise PkiError(str(path), f"is open to others (mode {stat.S_IMODE(st.st_mode):o}); chmod 700 it")


def _read(path: Path, *, secret: bool = False) -> bytes:
    """A regular file of the store, not through a link; a secret one must be 0600 or tighter."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise PkiError(str(path), f"cannot be read: {exc.strerror} (a link?)") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise PkiError(str(path), "is not a regular file")
        if secret and st.st_mode & 0o077:
            raise PkiError(
                str(path), f"is readable by others (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it"
            )
        return f.read(1 << 20)


def _write(path: Path, data: bytes, mode: int) -> None:
    if path.is_symlink():
        raise PkiError(str(path), "is a link; refusing to write through it")
    write_file_atomic(path, data, mode=mode)


# --- the CA ----------------------------------------------------------------------------------------


def _spki(key: object) -> bytes:
    """The SubjectPublicKeyInfo bytes of a public key (to compare keys of any type)."""
    return key.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _serial() -> int:
    return secrets.randbits(159) | 1


def init_ca(
    home: Path, *, name: str = "vigil site CA", days: int = CA_DAYS, passphrase: bytes | None = None
) -> bool:
    """Make the site CA once; True when it was made, False when one is already there (unchanged)."""
    paths = PkiPaths.of(home)
    _store(paths)
    if paths.ca_key.exists() or paths.ca_key.is_symlink() or paths.ca_cert.exists():
        load_ca(home, passphrase)  # an existing CA must still be whole and readable
        return False
    if not 1 <= days <= 36500:
        raise PkiError(f"--days {days}", "must be between 1 and 36500")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
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
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    _write(paths.ca_key, pem, 0o600)
    _write(paths.ca_cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return True


def load_ca(
    home: Path, passphrase: bytes | None = None, *, with_key: bool = True
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey | None]:
    """The CA certificate (and key): refused when missing, a link, open to others, or not a pair."""
    paths = PkiPaths.of(home)
    _store(paths)
    try:
        cert = x509.load_pem_x509_certificate(_read(paths.ca_cert))
    except FileNotFoundError:
        raise PkiError(str(paths.ca_cert), "no site CA; run `vigil pki init` first") from None
    except ValueError as exc:
        raise PkiError(str(paths.ca_cert), f"not a PEM certificate: {exc}") from None
    if not with_key:
        return cert, None
    try:
        raw = _read(paths.ca_key, secret=True)
    except FileNotFoundError:
        raise PkiError(str(paths.ca_key), "missing; the CA cannot issue without its key") from None
    try:
        key = serialization.load_pem_private_key(raw, password=passphrase)
    except TypeError:
        raise PkiError(str(paths.ca_key), "is encrypted: give its passphrase (--passphrase-file)") from None
    except ValueError as exc:
        why = "wrong passphrase, or not a key" if passphrase else str(exc).splitlines()[0]
        raise PkiError(str(paths.ca_key), f"cannot be read: {why}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError(str(paths.ca_key), "is not an ECDSA key")
    if _spki(key.public_key()) != _spki(cert.public_key()):
        raise PkiError(str(paths.ca_key), f"does not belong to {paths.ca_cert}")
    return cert, key


# --- certificates ----------------------------------------------------------------------------------


def is_dns_name(name: str) -> bool:
    """Whether NAME may be a certificate's DNS name."""
    return bool(_DNS_RE.fullmatch(name))


def _check_request(name: str, usage: str, dns: list[str], ips: list[str]) -> tuple[list[str], list[str]]:
    if not _NAME_RE.fullmatch(name):
        raise PkiError(
            f"--name {name!r}", "must be a host name: letters, digits, '.', '_' and '-', at most 63"
        )
    if usage not in USAGES:
        raise PkiError(f"--usage {usage}", f"must be one of {', '.join(USAGES)}")
    for d in dns:
        if not _DNS_RE.fullmatch(d):
            raise PkiError(f"--dns {d!r}", "is not a DNS name")
    addrs = []
    for a in ips:
        try:
            addrs.append(str(ipaddress.ip_address(a)))
        except ValueError:
            raise PkiError(f"--ip {a!r}", "is not an IP address") from None
    return sorted(set(dns) | ({name} if _DNS_RE.fullmatch(name) else set())), sorted(set(addrs))


def _names(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return sorted(san.get_values_for_type(x509.DNSName)), sorted(
        str(a) for a in san.get_values_for_type(x509.IPAddress)
    )


def _usage_of(cert: x509.Certificate) -> str:
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return ""
    return next((u for u, oid in _EKU.items() if oid in eku), "")


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _why_reissue(
    cert_path: Path,
    key_path: Path,
    ca: x509.Certificate,
    usage: str,
    dns: list[str],
    ips: list[str],
    renew_days: int,
) -> str:
    """Why the certificate at CERT_PATH must be issued again ("" when it may stay)."""
    try:
        cert = x509.load_pem_x509_certificate(_read(cert_path))
        key = serialization.load_pem_private_key(_read(key_path, secret=True), password=None)
    except FileNotFoundError:
        return "missing"
    except (ValueError, TypeError, PkiError) as exc:
        return f"unreadable ({str(exc).splitlines()[0]})"
    if not _signed_by(cert, ca):
        return "not issued by the site CA"
    if not isinstance(key, ec.EllipticCurvePrivateKey) or _spki(key.public_key()) != _spki(cert.public_key()):
        return "its key does not match it"
    if _usage_of(cert) != usage:
        return f"issued for {_usage_of(cert) or 'no'} usage, not {usage}"
    if _names(cert) != (dns, ips):
        return "issued for other names"
    left = cert.not_valid_after_utc - _now()
    if left < timedelta(days=renew_days):
        return f"expires in {max(0, left.days)} days (renewed within {renew_days})"
    return ""


def issue(
    home: Path,
    name: str,
    *,
    usage: str = "server",
    dns: list[str] | None = None,
    ips: list[str] | None = None,
    days: int = LEAF_DAYS,
    renew_days: int = RENEW_DAYS,
    passphrase: bytes | None = None,
) -> Issued:
    """NAME's certificate for USAGE, issued when it is missing or no longer right (see module doc)."""
    dns_names, addrs = _check_request(name, usage, list(dns or []), list(ips or []))
    if not 1 <= days <= LEAF_DAYS:
        raise PkiError(f"--days {days}", f"must be between 1 and {LEAF_DAYS}")
    if not 0 <= renew_days < days:
        raise PkiError(f"--renew-days {renew_days}", f"must be at least 0 and below --days {days}")
    paths = PkiPaths.of(home)
    ca_cert, _ = load_ca(home, with_key=False)
    where = paths.issued(name)
    _private_dir(where.parent)
    _private_dir(where)
    cert_path, key_path = where / f"{usage}.crt", where / f"{usage}.key"
    why = _why_reissue(cert_path, key_path, ca_cert, usage, dns_names, addrs, renew_days)
    if not why:
        return Issued(name, usage, cert_path, key_path, False, "valid")
    ca_cert, ca_key = load_ca(home, passphrase)
    assert ca_key is not None  # noqa: S101 - with_key=True
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    not_after = min(now + timedelta(days=days), ca_cert.not_valid_after_utc)
    alt: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    alt += [x509.IPAddress(ipaddress.ip_address(a)) for a in addrs]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([_EKU[usage]]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write(key_path, pem, 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Issued(name, usage, cert_path, key_path, True, why)


def status(home: Path, *, renew_days: int = RENEW_DAYS) -> Status:
    """Every issued certificate read back, against the site CA and the clock."""
    paths = PkiPaths.of(home)
    ca, _ = load_ca(home, with_key=False)
    out = Status(ca.subject.rfc4514_string(), ca.not_valid_after_utc)
    issued = paths.root / "issued"
    if not issued.is_dir():
        return out
    now = _now()
    for path in sorted(issued.glob("*/*.crt")):
        name, usage = path.parent.name, path.stem
        try:
            cert = x509.load_pem_x509_certificate(_read(path))
        except (ValueError, PkiError) as exc:
            out.certs.append(
                CertState(name, usage, path, "", (), now, 0, "invalid", str(exc).splitlines()[0])
            )
            continue
        dns, ips = _names(cert)
        left = cert.not_valid_after_utc - now
        state, reason = "ok", ""
        if not _signed_by(cert, ca):
            state, reason = "invalid", "not issued by the site CA"
        elif left <= timedelta(0):
            state, reason = "expired", f"expired on {cert.not_valid_after_utc:%Y-%m-%d}"
        elif left < timedelta(days=renew_days):
            state, reason = "renew", f"expires within {renew_days} days: the next deploy issues it again"
        out.certs.append(
            CertState(
                name,
                usage,
                path,
                cert.subject.rfc4514_string(),
                (*dns, *ips),
                cert.not_valid_after_utc,
                left.days,
                state,
                reason,
            )
        )
    return out
