"""A small threaded HTTP server serving ``/metrics`` (and a short index page) from a render function.

Anyone on the cluster network can connect, and any local user through the loopback interface, so a
connection cannot hold the exporter:

1. at most ``max_connections`` are served at once (one thread each), and at most ``max_per_source``
   from one source (one IPv4 address, one IPv6 /64; the whole loopback network, 127/8 and ::1, is one
   source, since any local user can pick any address of it): a connection over either cap is closed
   at once and logged, so a scrape from the monitoring host finds a free slot while one source
   floods the exporter;
2. a request's line and headers must be complete within ``header_timeout`` seconds of the accept,
   TLS handshake included (a later request on the connection: of the end of the answer before it),
   however the client paces its bytes, and each read waits at most ``timeout``: a client that sends
   nothing, or trickles, is dropped at that deadline;
3. before the credentials are checked a request may take at most ``max_header_bytes`` for its line
   and headers together, and ``max_header_fields`` header lines: over that it is answered ``414`` (a
   request line that alone is over) or ``431`` and the connection closed, having read no more.

With ``tls`` (an SSLContext from :func:`server_context`) the server speaks HTTPS only. The accept
loop wraps each connection without a handshake; the handshake happens in the connection's own
thread, under the deadline of point 2 (and within ``timeout``), so a client that connects and never
finishes it (or trickles it) holds one of the slots until then and stops no one else. A handshake
that fails (a plain HTTP request, a client that trusts another CA) closes the connection with one
log line. With ``auth`` (a :class:`BasicAuth`, loaded from a file ``USER:sha256:HEX``) every
request, whatever its method and path, needs HTTP Basic credentials of that user; one without them,
or with a malformed Authorization header, is answered ``401`` and the connection closed.
Credentials are never logged.
"""

from __future__ import annotations

import argparse
import base64
import errno
import hashlib
import hmac
import io
import ipaddress
import itertools
import logging
import os
import re
import socket
import ssl
import stat
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, cast

from vigil.exporters._expo import CONTENT_TYPE

log = logging.getLogger("vigil.exporters.http")


class ScrapeError(Exception):
    """Raised by a render function for a scrape that fails as a whole: answered with HTTP 500 and
    one log line (the message names the object and the reason), not a traceback."""


#: connections served at once; Prometheus-style scrapers use one or two each
MAX_CONNECTIONS = 32
#: connections served at once from one source (see :func:`source_of`): a monitoring host needs one
#: or two per exporter; a node's local users have the loopback source and the node's few own
#: addresses, far from the MAX_CONNECTIONS / MAX_PER_SOURCE = 8 sources it takes to fill the slots
MAX_PER_SOURCE = 4
#: seconds a read on a connection may wait for the client (and the whole TLS handshake may take)
TIMEOUT = 10.0
#: seconds from the accept to the end of the request's headers, TLS handshake included; a scraper
#: sends its request at once, in well under a second
HEADER_TIMEOUT = 5.0
#: the request line and headers together, read before the credentials are checked: a scraper sends
#: under 1 KiB, the Authorization header is at most MAX_AUTH_HEADER
MAX_HEADER_BYTES = 16384
#: header lines at most (a scraper sends under 10)
MAX_HEADER_FIELDS = 32
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
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ServerConfigError(f"{path}: {e.strerror or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ServerConfigError(f"{path}: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_PEM_FILE + 1)
    except OSError as e:
        raise ServerConfigError(f"{path}: {e.strerror or e}") from None
    finally:
        os.close(fd)
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


def source_of(host: str) -> str:
    """The source a connection from HOST (a peer address) counts against for ``max_per_source``:
    the address itself for IPv4, its /64 for IPv6 (one host's usual share), and ``loopback`` for the
    whole loopback network (127/8 and ::1), where any local user can pick any address."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d
    if ip.is_loopback:
        return "loopback"
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class _HeadRefused(Exception):
    """A request line or header block over the budget: answered with STATUS, then closed."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _read_head(
    rfile: io.BufferedReader,
    sock: socket.socket,
    *,
    deadline: float,
    read_timeout: float,
    max_bytes: int,
    max_fields: int,
) -> tuple[bytes, bytes] | None:
    """The request line and the header block (its blank line included) from RFILE, the buffered
    reader of SOCK; None when the client closes before the end of them.

    Raises socket.timeout at DEADLINE (a monotonic time) or when a read waits READ_TIMEOUT, whatever
    the pace of the client's bytes: each read of the socket is held to the time left. Raises
    _HeadRefused past MAX_BYTES (line and headers together) or MAX_FIELDS header lines, having read
    no more than MAX_BYTES of the request."""
    lines: list[bytes] = []
    line = bytearray()
    used = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("request headers not complete in time")
        sock.settimeout(min(read_timeout, left))
        data = rfile.peek(1)  # what is buffered, else at most one read of the socket
        if not data:
            return None
        room = max_bytes - used
        end = data.find(b"\n", 0, room)
        take = end + 1 if end >= 0 else min(len(data), room)
        line += rfile.read(take)  # buffered already: no read of the socket
        used += take
        if end < 0:
            if used >= max_bytes:
                if not lines:
                    raise _HeadRefused(414, f"request line over {max_bytes} bytes")
                raise _HeadRefused(431, f"request line and headers over {max_bytes} bytes")
            continue
        lines.append(bytes(line))
        line.clear()
        if len(lines) == 1:
            continue  # the request line
        if lines[-1] in (b"\r\n", b"\n"):
            return lines[0], b"".join(lines[1:])
        if len(lines) - 1 > max_fields:
            raise _HeadRefused(431, f"over {max_fields} header lines")


def _every_100th(n: int) -> int:
    """The level of the Nth log line of a kind a client can cause at will: the first and every 100th
    at INFO, the others at DEBUG."""
    return logging.INFO if n == 1 or n % 100 == 0 else logging.DEBUG


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
        max_per_source: int = MAX_PER_SOURCE,
        source_key: Callable[[str], str] = source_of,
        tls: ssl.SSLContext | None = None,
        timeout: float = TIMEOUT,
        header_timeout: float = HEADER_TIMEOUT,
    ) -> None:
        super().__init__(address, handler)
        self._cap = max_connections
        self._per_source_cap = max_per_source
        self._source_key = source_key
        self._lock = threading.Lock()
        self._active = 0
        self._by_source: dict[str, int] = {}
        self._refused = 0
        self._tls = tls
        self._timeout = timeout
        self.header_timeout = header_timeout
        self._deadlines: dict[socket.socket, float] = {}  # a connection's first headers are due by then
        self._failed_handshakes = itertools.count(1)
        self.header_timeouts = itertools.count(1)
        self.header_refusals = itertools.count(1)

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        sock, addr = self.socket.accept()
        if self._tls is None:
            return sock, addr
        # no I/O here: the handshake is the connection thread's (finish_request), under its deadline
        try:
            return self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr
        except (OSError, ValueError):
            sock.close()
            raise

    def first_deadline(self, request: socket.socket) -> float:
        """When the headers of REQUEST's first request are due: HEADER_TIMEOUT after its accept."""
        return self._deadlines.pop(request, time.monotonic() + self.header_timeout)

    def finish_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        if isinstance(request, ssl.SSLSocket):
            deadline = self._deadlines.get(request, time.monotonic() + self.header_timeout)
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("the deadline passed before the handshake")
                # the timeout bounds the whole handshake, not each read (Python >= 3.5)
                request.settimeout(min(self._timeout, left))
                request.do_handshake()
            except (OSError, ValueError) as e:  # ssl.SSLError, socket.timeout, a reset: the client's doing
                n = next(self._failed_handshakes)
                reason = "timed out" if isinstance(e, socket.timeout) else (getattr(e, "reason", None) or e)
                log.log(
                    _every_100th(n), "%s: TLS handshake failed: %s (%d so far)", client_address[0], reason, n
                )
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        e = sys.exc_info()[1]
        if isinstance(e, OSError):  # a connection reset or a TLS error mid-request: one line, no traceback
            log.debug("%s: connection failed: %s", client_address[0], e)
            return
        super().handle_error(request, client_address)

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        accepted = time.monotonic()
        source = self._source_key(client_address[0])
        with self._lock:
            held = self._by_source.get(source, 0)
            full = self._active >= self._cap
            if full or held >= self._per_source_cap:
                self._refused += 1
                refused = self._refused
            else:
                refused = 0
                self._active += 1
                self._by_source[source] = held + 1
        if refused:
            if refused == 1 or refused % 100 == 0:
                log.warning(
                    "%s: refused (%d connections at once%s is the cap; %d refused so far)",
                    client_address[0],
                    self._cap if full else self._per_source_cap,
                    "" if full else f" from {source}",
                    refused,
                )
            self.shutdown_request(request)
            return
        self._deadlines[request] = accepted + self.header_timeout
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request, source)
            raise

    def _release(self, request: socket.socket, source: str) -> None:
        self._deadlines.pop(request, None)
        with self._lock:
            self._active -= 1
            left = self._by_source[source] - 1
            if left:
                self._by_source[source] = left
            else:
                del self._by_source[source]

    def process_request_thread(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request, self._source_key(client_address[0]))


def make_server(
    address: tuple[str, int],
    render: Callable[[], str],
    *,
    title: str,
    max_connections: int = MAX_CONNECTIONS,
    max_per_source: int = MAX_PER_SOURCE,
    timeout: float = TIMEOUT,
    header_timeout: float = HEADER_TIMEOUT,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_header_fields: int = MAX_HEADER_FIELDS,
    tls: ssl.SSLContext | None = None,
    auth: BasicAuth | None = None,
    source_key: Callable[[str], str] = source_of,
    paths: Mapping[str, Callable[[], str]] | None = None,
) -> ThreadingHTTPServer:
    """A server on ADDRESS whose ``GET /metrics`` answers ``render()``; not started (call serve_forever).
    With TLS (see :func:`server_context`) it serves HTTPS only; with AUTH every request needs its
    Basic credentials. SOURCE_KEY maps a peer address to the source it counts against for
    MAX_PER_SOURCE (:func:`source_of`). PATHS serves further exposition pages, each at its exact
    path (the query string ignored, nothing decoded: a path is a key, never parsed)."""
    pages: dict[str, Callable[[], str]] = dict(paths or {})
    pages["/metrics"] = render

    class Handler(BaseHTTPRequestHandler):
        server_version = "vigil-exporters"
        protocol_version = "HTTP/1.1"
        first = True  # the connection's first request, whose deadline counts from the accept

        def handle_one_request(self) -> None:
            # the stdlib's, but with the request line and headers read under a deadline and a budget
            server = cast(_Server, self.server)
            if self.first:
                self.first = False
                deadline = server.first_deadline(self.connection)
            else:
                deadline = time.monotonic() + header_timeout
            stream = cast(io.BufferedReader, self.rfile)  # makefile("rb") with the default buffer
            try:
                head = _read_head(
                    stream,
                    self.connection,
                    deadline=deadline,
                    read_timeout=timeout,
                    max_bytes=max_header_bytes,
                    max_fields=max_header_fields,
                )
            except socket.timeout:
                n = next(server.header_timeouts)
                log.log(
                    _every_100th(n),
                    "%s: request headers not complete within %gs; closed (%d so far)",
                    self.client_address[0],
                    header_timeout,
                    n,
                )
                self.close_connection = True
                return
            except _HeadRefused as e:
                n = next(server.header_refusals)
                log.log(_every_100th(n), "%s: refused: %s (%d so far)", self.client_address[0], e.reason, n)
                self.requestline = self.request_version = self.command = ""
                self.close_connection = True
                self.connection.settimeout(timeout)
                self.send_error(e.status, explain=e.reason)
                return
            if head is None:
                self.close_connection = True
                return
            self.connection.settimeout(timeout)  # the answer's writes
            self.raw_requestline, block = head
            self.rfile = io.BytesIO(block)  # parse_request reads the headers from here
            try:
                parsed = self.parse_request()
            finally:
                self.rfile = stream
            if not parsed:
                return
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            try:
                method()
                self.wfile.flush()
            except socket.timeout as e:
                log.debug("%s: answer timed out: %s", self.client_address[0], e)
                self.close_connection = True

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
            page = pages.get(path)
            if page is not None:
                try:
                    body = page().encode("utf-8")
                except ScrapeError as e:
                    log.error("scrape failed: %s", e)
                    self._send(500, b"internal error rendering metrics\n", "text/plain; charset=utf-8")
                    return
                except Exception:  # a scrape must never take the exporter down
                    log.exception("rendering %s failed", path)
                    self._send(500, b"internal error rendering metrics\n", "text/plain; charset=utf-8")
                    return
                self._send(200, body, CONTENT_TYPE)
            elif path == "/":
                html = (
                    f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
                    '<p><a href="/metrics">Metrics</a></p></body></html>\n'
                )
                self._send(200, html.encode(), "text/html; charset=utf-8")
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
    return _Server(
        address,
        Handler,
        max_connections,
        max_per_source=max_per_source,
        source_key=source_key,
        tls=tls,
        timeout=timeout,
        header_timeout=header_timeout,
    )


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
