"""How vigil's own clients on the admin host reach the monitoring services (VictoriaMetrics,
vmalert, Alertmanager): the scheme, the trust and the login.

A site deployed with TLS keeps on the admin host the site CA's certificate
(``secrets/pki/ca.crt``) and the API credential (user ``vigil-api``, ``secrets/api.password``):
its services answer https only, with a certificate from the site CA that names the host's
inventory name and its ``ansible_host`` address, and want HTTP Basic authentication. A site with
neither (deployed before TLS) is plain http, without a login, and its clients keep working.

Every request goes straight to the server, never through a proxy from the environment (the
monitoring host is inside the cluster), and the login goes with https requests only: it is never
sent in clear, so a plain ``http://`` URL given by hand gets no password. The login is sent with
the first request rather than after a challenge, since VictoriaMetrics' 401 does not lead
urllib's Basic handler to retry.
"""

from __future__ import annotations

import base64
import shlex
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from vigil.installer.deploy.credentials import API_USER, read_password
from vigil.installer.pki import PkiError, PkiPaths


@dataclass(frozen=True)
class SiteAccess:
    """The site CA to check the services against and the login to give them; all None for a
    plain-http site."""

    ca_file: Path | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        """Whether the site's services answer https with a login."""
        return self.ca_file is not None and bool(self.password)

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def url(self, address: str, port: int) -> str:
        """The base URL of the service at ADDRESS (a host's ``ansible_host``) and PORT."""
        host = f"[{address}]" if ":" in address else address
        return f"{self.scheme}://{host}:{port}"

    def ssl_context(self) -> ssl.SSLContext:
        """A verifying TLS client context (1.2 or later) that trusts the site CA; the system's CAs
        when there is none (an https URL given by hand on a plain site)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx

    def opener(self) -> urllib.request.OpenerDirector:
        """An opener that goes to the server directly, checks https servers with
        :meth:`ssl_context` and sends the login with every https request."""
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=self.ssl_context()),
        ]
        if self.user and self.password:
            handlers.append(_BasicAuth(self.user, self.password))
        return urllib.request.build_opener(*handlers)

    def unauthorized(self, url: str) -> str:
        """Why a server at URL may have answered 401, in a few words."""
        if not (self.user and self.password):
            return "no login was sent: there is no API credential here (secrets/api.password)"
        if not url.startswith("https://"):
            return "no login was sent: it goes over https only"
        return f"the login {self.user} was refused"


class _BasicAuth(urllib.request.BaseHandler):
    """Adds ``Authorization: Basic`` to every https request, without waiting for a challenge.

    The header is not carried over by a redirect; the redirected request gets it again only when
    it is https, to a server the same context trusts."""

    def __init__(self, user: str, password: str) -> None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        self._header = f"Basic {token}"

    def https_request(self, req: urllib.request.Request) -> urllib.request.Request:
        req.add_unredirected_header("Authorization", self._header)
        return req


def api_password_file(home: Path) -> Path:
    """Where the site's API password is kept on the admin host (0600; never printed)."""
    return home / "secrets" / "api.password"


def site_access(home: Path) -> SiteAccess:
    """How to reach the monitoring services of the site whose state is HOME: over TLS with the
    API login when both the site CA and the API password are there, plain http otherwise.
    Raises ``CredentialError`` for a password file that is a link, another user's or open to
    others, and ``PkiError`` for a CA certificate that is a link."""
    password = read_password(home, "api")
    ca = PkiPaths.of(home).ca_cert
    if ca.is_symlink():
        raise PkiError(str(ca), "is a link; the site CA must not lead elsewhere")
    if not password or not ca.is_file():
        return SiteAccess()
    return SiteAccess(ca_file=ca, user=API_USER, password=password)


def login_hint(home: Path, access: SiteAccess | None = None) -> str | None:
    """How an operator logs in to the services' UIs and APIs (the paths, never the password);
    None for a plain-http site."""
    access = site_access(home) if access is None else access
    if not access.tls:
        return None
    return (
        f"log in as {access.user} with the password in {api_password_file(home)}; "
        f"the site CA is {access.ca_file}"
    )


def curl_options(home: Path, access: SiteAccess) -> str:
    """The curl options that reach the services as ACCESS does: the site CA and the login, the
    password read from its file by the shell; empty for a plain-http site."""
    if not access.tls:
        return ""
    password_file = shlex.quote(str(api_password_file(home)))
    return f'--cacert {shlex.quote(str(access.ca_file))} -u {access.user}:"$(cat {password_file})"'


def failure_reason(exc: BaseException) -> str:
    """A one-line reason for a request that got no HTTP answer: the TLS failure said plainly
    (an untrusted or misnamed certificate, a server that does not speak TLS), else the
    connection's own reason."""
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ssl.SSLCertVerificationError):
        why = reason.verify_message or reason.reason or str(reason)
        return f"TLS: the server's certificate is not trusted: {str(why).rstrip('.')}"
    if isinstance(reason, ssl.SSLError):
        why = reason.reason or str(reason)
        hint = " (an http:// server?)" if why == "WRONG_VERSION_NUMBER" else ""
        return f"TLS handshake failed: {why}{hint}"
    return " ".join(str(reason).split()) or type(reason).__name__
