"""A small threaded HTTP server serving ``/metrics`` (and a short index page) from a render function."""

from __future__ import annotations

import logging
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from vigil.exporters._expo import CONTENT_TYPE

log = logging.getLogger("vigil.exporters.http")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(address: tuple[str, int], render: Callable[[], str], *, title: str) -> ThreadingHTTPServer:
    """A server on ADDRESS whose ``GET /metrics`` answers ``render()``; not started (call serve_forever)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "vigil-exporters"
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = render().encode("utf-8")
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

    return _Server(address, Handler)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
