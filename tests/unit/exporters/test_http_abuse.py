"""The exporters' HTTP server under a hostile client on the cluster network (issue 11, finding 10).

Before: 300 half-open connections held 301 threads for as long as the clients liked (no read timeout,
no cap); now each read waits at most the timeout, and connections over the cap are closed at once.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from vigil.exporters._http import make_server


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    srv = make_server(("127.0.0.1", 0), lambda: "up 1\n", title="t", max_connections=8, timeout=1.0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[:2]  # type: ignore[misc]
    srv.shutdown()
    srv.server_close()


def scrape(addr: tuple[str, int]) -> str:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
        f"http://{addr[0]}:{addr[1]}/metrics", timeout=5
    ) as resp:
        return resp.read().decode()


def test_half_open_connections_hold_no_more_than_the_cap_and_time_out(server: tuple[str, int]) -> None:
    before = threading.active_count()
    idle = [socket.create_connection(server) for _ in range(100)]
    try:
        time.sleep(0.5)
        assert threading.active_count() - before <= 8  # one thread per served connection, at most the cap
        # the connections over the cap were closed at once: reading them gives EOF, not a wait
        closed = 0
        for s in idle:
            s.settimeout(0.2)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except socket.timeout:  # TimeoutError from 3.10 on; these tests run on 3.9 too
                pass
        assert closed >= 100 - 8
        # and the held ones are dropped after the read timeout, so a real scrape gets through
        time.sleep(1.5)
        assert scrape(server) == "up 1\n"
    finally:
        for s in idle:
            s.close()


def test_a_trickling_client_is_dropped_after_the_timeout(server: tuple[str, int]) -> None:
    s = socket.create_connection(server)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")  # never finishes its headers
        s.settimeout(5)
        started = time.monotonic()
        assert s.recv(1024) == b""  # closed by the server
        assert time.monotonic() - started < 3
    finally:
        s.close()
