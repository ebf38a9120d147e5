"""A small threaded HTTP server serving ``/metrics`` (and a short index page) from a render function.

Anyone on the cluster network can connect, so a connection cannot hold the exporter: each read
waits at most ``timeout`` seconds (a client that opens a connection and sends nothing, or trickles,
is dropped), and at most ``max_connections`` are served at once (one thread each); a connection
over the cap is closed at once and logged, and the slots free up as the timeouts pass.
"""

from __future__ import annotations

import logging
import socket
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
#: seconds a read on a connection may wait for the client
TIMEOUT = 10.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # listen backlog: a burst of connections waits here, not in SYN retries

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int
    ) -> None:
        super().__init__(address, handler)
        self._cap = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refused = 0

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
) -> ThreadingHTTPServer:
    """A server on ADDRESS whose ``GET /metrics`` answers ``render()``; not started (call serve_forever)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "vigil-exporters"
        protocol_version = "HTTP/1.1"

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
    return _Server(address, Handler, max_connections)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
