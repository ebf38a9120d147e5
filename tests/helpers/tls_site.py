"""A site deployed with TLS, as the admin host holds it, and an https server of that site on
127.0.0.1: a throwaway site CA (vigil.installer.pki), a server certificate for 127.0.0.1, and the API
password at ``secrets/api.password`` (0600).

The server answers each request with what the test's ``answer`` function gives and records the
request's method, path, body and ``Authorization`` header.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vigil.installer import pki

#: 40 letters and digits, as deploy makes them
PASSWORD = "c2VjcmV0IHRoYXQgaXMgbm90IHJlYWwgYXQgYWxs"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes
    authorization: str | None


#: (status, JSON-able answer) for a request
Answer = Callable[[Request], tuple[int, object]]


def vm_success(request: Request) -> tuple[int, object]:
    """An empty successful VictoriaMetrics instant query."""
    return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}


@dataclass
class Server:
    url: str
    seen: list[Request] = field(default_factory=list)


def make_site(
    home: Path, *, ips: tuple[str, ...] = ("127.0.0.1",), password: str | None = PASSWORD
) -> pki.Issued:
    """HOME as a site deployed with TLS: its CA, a server certificate for IPS, and the API password
    (none with ``password=None``)."""
    pki.init_ca(home)
    issued = pki.issue(home, "mon01", usage="server", dns=[], ips=list(ips))
    if password is not None:
        write_password(home, password)
    return issued


def write_password(home: Path, password: str, mode: int = 0o600) -> Path:
    secrets = home / "secrets"
    secrets.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = secrets / "api.password"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    path.chmod(mode)
    return path


@contextlib.contextmanager
def serve(answer: Answer = vm_success, *, tls: pki.Issued | None = None) -> Iterator[Server]:
    """An http server on 127.0.0.1 (https with TLS's certificate and key) for the test's life."""
    server = Server("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            request = Request(
                self.command, self.path, self.rfile.read(size), self.headers.get("Authorization")
            )
            server.seen.append(request)
            status, doc = answer(request)
            data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer  # noqa: N815 - http.server's names

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls.cert, tls.key)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    server.url = f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
