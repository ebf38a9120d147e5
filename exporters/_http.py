"""A small threaded HTTP server serving ``/metrics`` (and a short index page) from a render function.

Anyone on the cluster network can connect, so a connection cannot hold the exporter: each read
waits at most ``timeout`` seconds (a client that opens a connection and sends nothing, or trickles,
is dropped), and at most ``max_connections`` are served at once (one thread each); a connection
over the cap is closed at once and logged, and the slots free up as the timeouts pass.

With ``tls`` (an SSLContext from :func:`server_context`) the server speaks HTTPS only. The accept
loop wraps each connection without a handshake; the handshake happens in the connection's own
thread, within ``timeout`` seconds in all, so a client that connects and never finishes it (or
trickles it) holds one of the ``max_connections`` slots until then and stops no one else. A
handshake that fails (a plain HTTP request, a client that trusts another CA) closes the connection
with one log line. With ``auth`` (a :class:`BasicAuth`, loaded from a file ``USER:sha256:HEX``)
every request, whatever its method and path, needs HTTP Basic credentials of that user; one without
them, or with a malformed Authorization header, is answered ``401`` and the connection closed.
Credentials are never logged.
"""

from __future__ import annotations

import argparse
import base64
import errno
import hashlib
import hmac
import itertools
import logging
import os
import re
import socket
import ssl
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from vigil.exporters._expo import CONTENT_TYPE

log = logging.getLogger("vigil.exporters.http")


class ScrapeError(Exception):
    """Raised by a render function for a scrape that fails as a whole: answered with HTTP 500 and
    one log line (the message names the object and the reason), not a traceback."""


#: connections served at once; Prometheus-style scrapers use one or two each
MAX_CONNECTIONS = 32
#: seconds a read on a connection may wait for the client (and the whole TLS handshake may take)
TIMEOUT = 10.0
#: the largest Basic auth file and Authorization header taken
MAX_AUTH_FILE = 4096
MAX_AUTH_HEADER = 4096
#: the largest certificate (chain) or key file taken
MAX_PEM_FILE = 1 << 20
REALM = "vigil"


class ServerConfigError(ValueError):
    """A TLS or Basic auth file that cannot be used; the message is one line, ``FILE: reason``."""


_USER = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_PRIVATE_KEY = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")


class BasicAuth:
    """The one account allowed in: a user name and the SHA-256 of its password.

    A plain, unsalted SHA-256 is enough here: the passwords are generated, 40 random alphanumerics
    (about 238 bits), far beyond guessing however fast the hash; a slow hash would only make every
    scrape cost more.
    """

    def __init__(self, user: str, sha256_hex: str) -> None:
        if not _USER.fullmatch(user):
            raise ValueError("the user name must be 1 to 64 of A-Z a-z 0-9 . _ -")
        if not _SHA256_HEX.fullmatch(sha256_hex):
            raise ValueError("the hash must be 64 lowercase hex digits")
        self.user = user
        self._user_digest = hashlib.sha256(user.encode()).digest()
        self._password_digest = bytes.fromhex(sha256_hex)

    @classmethod
    def from_password(cls, user: str, password: str) -> BasicAuth:
        return cls(user, hashlib.sha256(password.encode()).hexdigest())

    @classmethod
    def load(cls, path: str) -> BasicAuth:
        """Read PATH: one line ``USER:sha256:HEX`` (the SHA-256 of the password in lowercase hex),
        a regular file, not a symbolic link; raises ServerConfigError naming PATH and the reason."""

        def fail(reason: str) -> ServerConfigError:
            return ServerConfigError(f"{path}: {reason}")

        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat rejects it below
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise fail("is a symbolic link (give the file itself)") from None
            raise fail(e.strerror or str(e)) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise fail("not a regular file")
            if st.st_size > MAX_AUTH_FILE:
                raise fail(f"over {MAX_AUTH_FILE} bytes")
            data = os.read(fd, MAX_AUTH_FILE + 1)
        except OSError as e:
            raise fail(e.strerror or str(e)) from None
        finally:
            os.close(fd)
        if len(data) > MAX_AUTH_FILE:
            raise fail(f"over {MAX_AUTH_FILE} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise fail("not UTF-8 text") from None
        if text.endswith("\n"):
            text = text[:-1]
        if not text.strip():
            raise fail("empty (expected one line USER:sha256:HEX)")
        if "\n" in text:
            raise fail("several lines (expected one line USER:sha256:HEX)")
        parts = text.split(":")
        if len(parts) != 3:  # the fields are not echoed: a password may have been put here by mistake
            raise fail("expected one line USER:sha256:HEX (3 fields separated by colons)")
        user, scheme, digest = parts
        if not _USER.fullmatch(user):
            raise fail("bad user name (1 to 64 of A-Z a-z 0-9 . _ -)")
        if scheme != "sha256":
            raise fail(f"unknown hash scheme {scheme[:16]!r} (expected sha256)")
        if not _SHA256_HEX.fullmatch(digest):
            raise fail("the hash is not 64 lowercase hex digits")
        return cls(user, digest)

    def check(self, headers: list[str]) -> bool:
        """Whether HEADERS, the request's Authorization header values, are exactly one that carries
        this user and password; anything malformed is False, never an exception."""
        if len(headers) != 1 or len(headers[0]) > MAX_AUTH_HEADER:
            return False
        scheme, _, token = headers[0].strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = (
                base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
            )
        except ValueError:  # not ASCII, not base64 (binascii.Error), not UTF-8 (UnicodeDecodeError)
            return False
        if not sep:
            return False
        user_ok = hmac.compare_digest(hashlib.sha256(user.encode()).digest(), self._user_digest)
        password_ok = hmac.compare_digest(hashlib.sha256(password.encode()).digest(), self._password_digest)
        return user_ok and password_ok


def _read_pem(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PEM_FILE + 1)
    except OSError as e:
        raise ServerConfigError(f"{path}: {e.strerror or e}") from None
    if len(data) > MAX_PEM_FILE:
        raise ServerConfigError(f"{path}: over {MAX_PEM_FILE} bytes")
    return data


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or later) with CERT_FILE (the certificate, then any
    intermediates, PEM) and KEY_FILE (its private key, PEM, not encrypted; may be CERT_FILE);
    raises ServerConfigError naming the file at fault and the reason."""
    if b"-----BEGIN CERTIFICATE-----" not in _read_pem(cert_file):
        raise ServerConfigError(f"{cert_file}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it")
    key = _read_pem(key_file)
    if not _PRIVATE_KEY.search(key):
        raise ServerConfigError(f"{key_file}: no PEM private key (-----BEGIN ... PRIVATE KEY-----) in it")

    def no_passphrase() -> bytes:  # without a callback, OpenSSL would ask on the terminal
        raise ServerConfigError(f"{key_file}: the private key is encrypted (a passphrase is not supported)")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert_file, key_file, password=no_passphrase)
    except ssl.SSLError as e:
        reason = e.reason or e.strerror or str(e)
        if e.reason == "KEY_VALUES_MISMATCH":
            raise ServerConfigError(
                f"{key_file}: not the private key of the certificate in {cert_file}"
            ) from None
        try:  # which file OpenSSL refused: the certificate, if it cannot be read on its own
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cafile=cert_file)
        except (ssl.SSLError, OSError):
            raise ServerConfigError(f"{cert_file}: cannot load the certificate ({reason})") from None
        raise ServerConfigError(f"{key_file}: cannot load the private key ({reason})") from None
    except OSError as e:
        raise ServerConfigError(f"{e.filename or cert_file}: {e.strerror or e}") from None
    return ctx


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # listen backlog: a burst of connections waits here, not in SYN retries

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
        *,
        tls: ssl.SSLContext | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        super().__init__(address, handler)
        self._cap = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refused = 0
        self._tls = tls
        self._handshake_timeout = timeout
        self._failed_handshakes = itertools.count(1)

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        sock, addr = self.socket.accept()
        if self._tls is None:
            return sock, addr
        # no I/O here: the handshake is the connection thread's (finish_request), under its timeout
        try:
            return self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr
        except (OSError, ValueError):
            sock.close()
            raise

    def finish_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        if isinstance(request, ssl.SSLSocket):
            # the timeout bounds the whole handshake, not each read (Python >= 3.5)
            request.settimeout(self._handshake_timeout)
            try:
                request.do_handshake()
            except (OSError, ValueError) as e:  # ssl.SSLError, socket.timeout, a reset: the client's doing
                n = next(self._failed_handshakes)
                level = logging.INFO if n == 1 or n % 100 == 0 else logging.DEBUG
                reason = "timed out" if isinstance(e, socket.timeout) else (getattr(e, "reason", None) or e)
                log.log(level, "%s: TLS handshake failed: %s (%d so far)", client_address[0], reason, n)
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        e = sys.exc_info()[1]
        if isinstance(e, OSError):  # a connection reset or a TLS error mid-request: one line, no traceback
            log.debug("%s: connection failed: %s", client_address[0], e)
            return
        super().handle_error(request, client_address)

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        if not self._slots.acquire(blocking=False):
            self._refused += 1
            if self._refused == 1 or self._refused % 100 == 0:
                log.warning(
                    "%s: refused (%d connections at once is the cap; %d refused so far)",
                    client_address[0],
                    self._cap,
                    self._refused,
                )
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def make_server(
    address: tuple[str, int],
    render: Callable[[], str],
    *,
    title: str,
    max_connections: int = MAX_CONNECTIONS,
    timeout: float = TIMEOUT,
    tls: ssl.SSLContext | None = None,
    auth: BasicAuth | None = None,
) -> ThreadingHTTPServer:
    """A server on ADDRESS whose ``GET /metrics`` answers ``render()``; not started (call serve_forever).
    With TLS (see :func:`server_context`) it serves HTTPS only; with AUTH every request needs its
    Basic credentials."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "vigil-exporters"
        protocol_version = "HTTP/1.1"

        def parse_request(self) -> bool:
            # every method and path: a request without the credentials goes no further than here
            if not super().parse_request():
                return False
            if auth is None or auth.check(self.headers.get_all("Authorization") or []):
                return True
            body = b"authentication required\n"
            self.close_connection = True
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Basic realm="{REALM}"')
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return False

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = render().encode("utf-8")
                except ScrapeError as e:
                    log.error("scrape failed: %s", e)
                    self._send(500, b"internal error rendering metrics\n", "text/plain; charset=utf-8")
                    return
                except Exception:  # a scrape must never take the exporter down
                    log.exception("rendering /metrics failed")
                    self._send(500, b"internal error rendering metrics\n", "text/plain; charset=utf-8")
                    return
                self._send(200, body, CONTENT_TYPE)
            elif path == "/":
                page = (
                    f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
                    '<p><a href="/metrics">Metrics</a></p></body></html>\n'
                )
                self._send(200, page.encode(), "text/html; charset=utf-8")
            else:
                self._send(404, b"not found\n", "text/plain; charset=utf-8")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    Handler.timeout = timeout  # StreamRequestHandler applies it to the connection's socket
    return _Server(address, Handler, max_connections, tls=tls, timeout=timeout)


def add_server_arguments(ap: argparse.ArgumentParser) -> None:
    """The exporters' TLS and Basic auth flags; read them with :func:`server_security`."""
    ap.add_argument(
        "--tls-cert-file",
        metavar="FILE",
        help="serve HTTPS only, with this certificate (PEM; the server's first, then any intermediates); "
        "needs --tls-key-file",
    )
    ap.add_argument(
        "--tls-key-file",
        metavar="FILE",
        help="the certificate's private key (PEM, not encrypted); needs --tls-cert-file",
    )
    ap.add_argument(
        "--basic-auth-file",
        metavar="FILE",
        help="require HTTP Basic authentication on every request: FILE holds one line USER:sha256:HEX, "
        "HEX the SHA-256 of the password in lowercase hex (a regular file, not a symbolic link)",
    )


def server_security(a: argparse.Namespace) -> tuple[ssl.SSLContext | None, BasicAuth | None]:
    """The TLS context and Basic auth the flags of :func:`add_server_arguments` ask for; raises
    ServerConfigError (one line: ``FILE: reason``, or the flags that go together)."""
    if bool(a.tls_cert_file) != bool(a.tls_key_file):
        raise ServerConfigError("--tls-cert-file and --tls-key-file go together")
    tls = server_context(a.tls_cert_file, a.tls_key_file) if a.tls_cert_file else None
    auth = BasicAuth.load(a.basic_auth_file) if a.basic_auth_file else None
    if tls is not None:
        log.info("serving HTTPS only (certificate %s)", a.tls_cert_file)
    if auth is not None:
        log.info("Basic authentication required (%s)", a.basic_auth_file)
    return tls, auth


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
