"""A webhook receiver that counts Alertmanager's notifications, for the lab and the tests.

Each POST whose body is one JSON object (Alertmanager's webhook payload) is recorded as one JSON line
(when it came, the path, the sender's address, the payload) in memory and, when a log is given, in
that file, and is answered 200. Everything else is refused, and nothing of it is recorded:

1. a body without a Content-Length, or over ``max_bytes``: 411 or 413, the body not read;
2. a body that is not one JSON object (garbage, an array, bad UTF-8): 400;
3. a client slower than ``timeout`` seconds for its whole request (one byte at a time included):
   its connection is shut, and it holds no thread after that;
4. more than ``max_clients`` connections at once: the next ones are closed unanswered.

Run it on the lab's network: ``python -m vigil.installer.lab.webhook --listen 198.18.0.1:9095
--log notifications.jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MAX_BYTES = 1 << 20
TIMEOUT = 5.0
MAX_CLIENTS = 32


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: WebhookReceiver

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away mid-answer: nothing to record, nothing to print
        return


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "vigil-webhook"
    sys_version = ""

    def setup(self) -> None:
        receiver = self.server.receiver
        self.request.settimeout(receiver.timeout)  # each read of the socket
        super().setup()
        # the whole request: a client that trickles its bytes is cut off all the same
        self._deadline = threading.Timer(receiver.timeout, self._cut)
        self._deadline.daemon = True
        self._deadline.start()

    def _cut(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._deadline.cancel()
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _answer(self, code: int, text: str) -> None:
        body = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        receiver = self.server.receiver
        length_text = self.headers.get("Content-Length")
        if length_text is None or self.headers.get("Transfer-Encoding"):
            receiver._refuse()
            self._answer(411, "a Content-Length is required")
            return
        try:
            length = int(length_text)
        except ValueError:
            length = -1
        if not 0 <= length <= receiver.max_bytes:
            receiver._refuse()
            self._answer(413, f"the body must be at most {receiver.max_bytes} bytes")
            return
        try:
            raw = self.rfile.read(length)
        except OSError:  # cut off, or timed out
            receiver._refuse()
            self.close_connection = True
            return
        if len(raw) != length:
            receiver._refuse()
            self.close_connection = True
            return
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            payload = None
        if not isinstance(payload, dict):
            receiver._refuse()
            self._answer(400, "the body must be one JSON object")
            return
        receiver._record(self.path, self.client_address[0], payload)
        self._answer(200, "recorded")

    def _not_allowed(self) -> None:
        self._answer(405, "only POST")

    do_GET = do_PUT = do_DELETE = do_HEAD = do_PATCH = _not_allowed  # noqa: N815


class WebhookReceiver:
    """A threaded HTTP server recording each notification; ``with WebhookReceiver() as hook: …``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log: Path | None = None,
        max_bytes: int = MAX_BYTES,
        timeout: float = TIMEOUT,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.log = log
        self.refused = 0
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_clients)
        self._server = _Server((host, port), _Handler, bind_and_activate=True)
        self._server.receiver = self
        self._server.verify_request = self._admit  # type: ignore[method-assign]
        self._server.process_request_thread = self._serve_one  # type: ignore[method-assign]
        self._thread: threading.Thread | None = None

    # the connections at once: a slot taken on accept, given back when the connection is done
    def _admit(self, request: Any, client_address: Any) -> bool:
        return self._slots.acquire(blocking=False)

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            ThreadingHTTPServer.process_request_thread(self._server, request, client_address)
        finally:
            self._slots.release()

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}/"

    def start(self) -> WebhookReceiver:
        self._thread = threading.Thread(target=self._server.serve_forever, name="vigil-webhook", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _refuse(self) -> None:
        with self._lock:
            self.refused += 1

    def _record(self, path: str, peer: str, payload: dict[str, Any]) -> None:
        entry = {"received": time.time(), "path": path, "peer": peer, "payload": payload}
        line = json.dumps(entry, sort_keys=True, separators=(",", ":"))
        with self._lock:
            self._records.append(entry)
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as f:
                    f.write(line + "\n")

    def notifications(self) -> list[dict[str, Any]]:
        """Every notification recorded so far, oldest first (each: received, path, peer, payload)."""
        with self._lock:
            return list(self._records)

    def count(self, **labels: str) -> int:
        """How many notifications carried an alert with all of LABELS (every notification: none given)."""
        return sum(
            1
            for n in self.notifications()
            if not labels
            or any(
                isinstance(a, dict) and all((a.get("labels") or {}).get(k) == v for k, v in labels.items())
                for a in n["payload"].get("alerts") or []
            )
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vigil.installer.lab.webhook",
        description="Record Alertmanager's webhook notifications, one JSON line each.",
    )
    parser.add_argument("--listen", default="127.0.0.1:9095", help="ADDRESS:PORT (default %(default)s)")
    parser.add_argument("--log", type=Path, required=True, help="JSON lines file the notifications go to")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, help="largest body (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds a request may take")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    receiver = WebhookReceiver(
        host=host.strip("[]"), port=int(port), log=args.log, max_bytes=args.max_bytes, timeout=args.timeout
    )
    print(f"OK: recording notifications sent to {receiver.url} in {args.log}", flush=True)
    try:
        receiver._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        receiver._server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
