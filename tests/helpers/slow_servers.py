"""Hostile servers on 127.0.0.1 for the stack client's tests: a tarpit that accepts connections and
never answers, and a trickler that answers one byte at a time, forever. Each counts the connections
it took and stops with the test."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

#: what the trickler sends before the body it never finishes
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"


@dataclass
class Slow:
    url: str
    port: int
    connections: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def slow_server(*, trickle: float | None = None, port: int = 0) -> Iterator[Slow]:
    """A server on 127.0.0.1 (PORT, or a free one). Without TRICKLE it reads nothing and writes
    nothing (a tarpit); with it, it sends a valid status line and headers and then one byte of body
    every TRICKLE seconds, never finishing."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    listener.settimeout(0.05)
    server = Slow(f"http://127.0.0.1:{listener.getsockname()[1]}", listener.getsockname()[1])
    held: list[socket.socket] = []

    def feed(conn: socket.socket) -> None:
        assert trickle is not None
        with contextlib.suppress(OSError):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            )
            while not server._stop.is_set():
                conn.sendall(b" ")
                time.sleep(trickle)

    def run() -> None:
        while not server._stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server.connections += 1
            held.append(conn)
            if trickle is not None:
                threading.Thread(target=feed, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server._stop.set()
        thread.join(5)
        listener.close()
        for conn in held:
            conn.close()
