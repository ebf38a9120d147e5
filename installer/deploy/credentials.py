"""The site's two credentials, generated on the admin host at the first deploy that issues
certificates, never a default:

- the **scrape** credential (user ``vigil-scrape``, ``secrets/scrape.password``): what
  VictoriaMetrics gives every exporter it scrapes;
- the **API** credential (user ``vigil-api``, ``secrets/api.password``): the login of the
  monitoring services' APIs and UIs (VictoriaMetrics, vmalert, Alertmanager), used by vmalert,
  Grafana's data source, VictoriaMetrics' scrape of the monitoring services, and vigil's own
  clients on the admin host (reports, the TUI, the demo). VictoriaMetrics and vmalert know one
  user each (``-httpAuth.*``), so operators share this login.

Each password is 40 random letters and digits (0600); beside it sit two derived forms the servers
check it against, neither of which gives the password back:

- ``scrape.password.bcrypt`` — its bcrypt hash, for the ``basic_auth_users`` of the Prometheus
  exporter toolkit's web configuration (node_exporter, dcgm-exporter);
- ``scrape.password.sha256`` — its SHA-256, for vigil's own exporters (stdlib only on the nodes;
  a fast hash is enough for 238 random bits).

Both are 0644 (public: what a host keeps anyway) and made again only when they no longer match the
password, so a rerun changes no exporter's configuration. Replace a password by deleting
it; the next deploy makes a new one and moves every server and client to it.
Links and files of others are refused, and every file is staged and renamed into place.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import string
from dataclasses import dataclass
from pathlib import Path

import bcrypt

from vigil.basics.atomic import write_file_atomic
from vigil.basics.errors import VigilError
from vigil.installer import pki

#: the user name every exporter accepts and VictoriaMetrics sends
SCRAPE_USER = "vigil-scrape"
#: the login of the monitoring services' APIs and UIs
API_USER = "vigil-api"
_ALPHABET = string.ascii_letters + string.digits
_LENGTH = 40
#: bcrypt's work factor: each exporter checks it once and caches the result (exporter toolkit)
_BCRYPT_ROUNDS = 12
_MAX = 4096


class CredentialError(VigilError):
    """A credential of the site could not be made or read."""


@dataclass(frozen=True)
class Credential:
    #: "scrape" or "api": the prefix of its files and of its Ansible variables
    kind: str
    user: str
    password_file: Path
    bcrypt_file: Path
    sha256_file: Path
    #: what was made or remade this time (file names), for the run's record
    made: tuple[str, ...] = ()

    def extravars(self) -> dict[str, str]:
        k = self.kind
        return {
            f"vigil_{k}_user": self.user,
            f"vigil_{k}_password_file": str(self.password_file),
            f"vigil_{k}_bcrypt_file": str(self.bcrypt_file),
            f"vigil_{k}_sha256_file": str(self.sha256_file),
        }


#: the scrape credential's type, by its older name
ScrapeCredential = Credential
_USERS = {"scrape": SCRAPE_USER, "api": API_USER}


def _paths(home: Path, kind: str) -> tuple[Path, Path, Path]:
    base = home / "secrets" / f"{kind}.password"
    return base, base.with_name(base.name + ".bcrypt"), base.with_name(base.name + ".sha256")


def read_password(home: Path, kind: str) -> str | None:
    """The password of the site's ``kind`` credential (None when the site has none yet), read
    under the same rules as when it is made: a 0600 regular file of this user, not a link."""
    data = _read(_paths(home, kind)[0], secret=True)
    return None if data is None else data.decode("ascii", "replace").strip()


def _read(path: Path, *, secret: bool) -> bytes | None:
    """PATH's content (None when it does not exist): a regular file of this user, not a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CredentialError(str(path), f"cannot be read: {exc.strerror} (a link?)") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CredentialError(str(path), "is not a regular file")
        if st.st_uid != os.geteuid():
            raise CredentialError(str(path), "belongs to another user")
        if secret and st.st_mode & 0o077:
            raise CredentialError(
                str(path), f"is open to others (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it"
            )
        data = f.read(_MAX + 1)
    if len(data) > _MAX:
        raise CredentialError(str(path), f"is larger than {_MAX} bytes")
    return data


def _secrets_dir(home: Path) -> None:
    """``secrets/`` private to this user, under the CA's rule (``pki.secrets_dir``)."""
    try:
        pki.secrets_dir(home)
    except pki.PkiError as exc:
        raise CredentialError(exc.obj, exc.reason) from None


def _write(path: Path, data: bytes, mode: int) -> None:
    if path.is_symlink():
        raise CredentialError(str(path), "is a link; refusing to write through it")
    write_file_atomic(path, data, mode=mode)


def scrape_credential(home: Path, *, create: bool = True) -> Credential | None:
    """The site's scrape credential, made (or its derived files remade) as needed; with
    ``create=False`` (a check run) only what exists, or None."""
    return site_credential(home, "scrape", create=create)


def api_credential(home: Path, *, create: bool = True) -> Credential | None:
    """The site's API credential, as :func:`scrape_credential`."""
    return site_credential(home, "api", create=create)


def site_credential(home: Path, kind: str, *, create: bool = True) -> Credential | None:
    user = _USERS[kind]
    pw_file, bc_file, sha_file = _paths(home, kind)
    if pw_file.parent.is_symlink():
        raise CredentialError(str(pw_file.parent), "is a link; the site's secrets must not lead elsewhere")
    made: list[str] = []
    password = _read(pw_file, secret=True)
    if password is None:
        if not create:
            return None
        _secrets_dir(home)
        password = "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH)).encode()
        _write(pw_file, password + b"\n", 0o600)
        made.append(pw_file.name)
    password = password.strip()
    if len(password) < 12 or not password.isascii() or any(c in password for c in b" \t\r\n:"):
        raise CredentialError(
            str(pw_file), "is not a password of 12 or more printable characters without ':'"
        )
    if not create:
        if _read(bc_file, secret=False) is None or _read(sha_file, secret=False) is None:
            return None
        return Credential(kind, user, pw_file, bc_file, sha_file)

    hashed = _read(bc_file, secret=False)
    try:
        fits = hashed is not None and bcrypt.checkpw(password, hashed.strip())
    except ValueError:  # not a bcrypt hash
        fits = False
    if not fits:
        _write(bc_file, bcrypt.hashpw(password, bcrypt.gensalt(_BCRYPT_ROUNDS)) + b"\n", 0o644)
        made.append(bc_file.name)
    digest = hashlib.sha256(password).hexdigest().encode()
    current = _read(sha_file, secret=False)
    if current is None or not hmac.compare_digest(current.strip(), digest):
        _write(sha_file, digest + b"\n", 0o644)
        made.append(sha_file.name)
    return Credential(kind, user, pw_file, bc_file, sha_file, tuple(made))


def metrics_key(home: Path, *, create: bool = True) -> tuple[Path, bool] | None:
    """The site's key for the monitoring services' own ``/metrics`` (VictoriaMetrics' and
    vmalert's ``-metricsAuthKey``: with it, ``/metrics`` wants ``?authKey=`` and not the login),
    ``secrets/metrics.key`` (0600): (its path, whether it was made now), or None in a check run of a
    site that has none yet."""
    path = home / "secrets" / "metrics.key"
    if path.parent.is_symlink():
        raise CredentialError(str(path.parent), "is a link; the site's secrets must not lead elsewhere")
    key = _read(path, secret=True)
    if key is not None:
        key = key.strip()
        if len(key) < 12 or not key.isascii() or not key.isalnum():
            raise CredentialError(str(path), "is not a key of 12 or more letters and digits")
        return path, False
    if not create:
        return None
    _secrets_dir(home)
    _write(path, "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH)).encode() + b"\n", 0o600)
    return path, True


#: the keys the monitoring roles read with Ansible's `password` lookup, one per monitoring host:
#: {file name prefix: length} (roles/grafana/vars/main.yml, roles/victoriametrics/vars/main.yml)
HOST_KEYS = {"grafana-admin-password-": 32, "victoriametrics-delete-auth-key-": 40}
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def monitoring_host_keys(home: Path, hosts: list[str]) -> list[str]:
    """Make, before the run, each monitoring host's keys the roles would otherwise make during it
    (Grafana's admin password, VictoriaMetrics' series-deletion key: 0600, in the form the lookup
    reads): a run's inputs are then whole before it starts (installer/deploy/fingerprint.py), and
    the rerun after a first deploy is one whose inputs are those the first run recorded. A key is
    replaced by deleting it, as the site's credentials are. Returns the names of the files made."""
    made = []
    for host in hosts:
        if not _HOST_NAME.match(host):
            continue  # the role's lookup makes it, as before
        for prefix, length in HOST_KEYS.items():
            path = home / "secrets" / f"{prefix}{host}"
            if _read(path, secret=True) is not None:
                continue
            _secrets_dir(home)
            _write(path, "".join(secrets.choice(_ALPHABET) for _ in range(length)).encode() + b"\n", 0o600)
            made.append(path.name)
    return made
