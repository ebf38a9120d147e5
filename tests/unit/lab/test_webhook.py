"""The lab's webhook receiver (installer/lab/webhook.py) under attack: a huge body, a slow client, a
flood of connections and garbage are refused, recorded nowhere, and do not stop it recording the next
real notification."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from pathlib import Path

import pytest

from vigil.installer.lab.webhook import WebhookReceiver, main

NOTIFICATION = {"receiver": "vigil-default", "status": "firing", "alerts": [{"labels": {"alertname": "X"}}]}


def _post(hook: WebhookReceiver, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, str]:
    host, port = hook._server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(
            "POST", "/hook", body=body, headers={"Content-Type": "application/json", **(headers or {})}
        )
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


@pytest.fixture
def hook(tmp_path: Path) -> WebhookReceiver:
    with WebhookReceiver(log=tmp_path / "n.jsonl", max_bytes=4096, timeout=1.0, max_clients=4) as h:
        yield h


def _still_records(hook: WebhookReceiver, before: int) -> None:
    assert _post(hook, json.dumps(NOTIFICATION).encode())[0] == 200
    assert hook.count(alertname="X") == before + 1


def test_a_notification_is_recorded_in_memory_and_as_one_json_line(hook: WebhookReceiver) -> None:
    assert _post(hook, json.dumps(NOTIFICATION).encode()) == (200, "recorded\n")
    assert hook.count() == 1 and hook.count(alertname="X") == 1 and hook.count(alertname="Y") == 0
    assert hook.log is not None
    (line,) = hook.log.read_text().splitlines()
    entry = json.loads(line)
    assert entry["payload"] == NOTIFICATION and entry["path"] == "/hook" and entry["peer"] == "127.0.0.1"


def test_a_huge_body_is_refused_unread(hook: WebhookReceiver) -> None:
    status, text = _post(hook, b"{" + b" " * 10_000 + b"}")
    assert status == 413 and "at most 4096 bytes" in text
    # announced, never sent: refused on the header alone
    host, port = hook._server.server_address[:2]
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 413")
    assert hook.count() == 0 and hook.refused == 2
    _still_records(hook, 0)


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'"a string"', b"\xff\xfe{}", b'{"alerts": [', b""])
def test_garbage_is_refused_and_not_recorded(hook: WebhookReceiver, body: bytes) -> None:
    status, text = _post(hook, body)
    assert status == 400 and "one JSON object" in text
    assert hook.count() == 0 and hook.log is not None and not hook.log.exists()
    _still_records(hook, 0)


def test_a_body_without_a_length_and_other_methods_are_refused(hook: WebhookReceiver) -> None:
    host, port = hook._server.server_address[:2]
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 411")
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request("GET", "/")
    assert conn.getresponse().status == 405
    conn.close()
    assert hook.count() == 0


def test_a_slow_client_is_cut_off_whole_and_holds_nothing(hook: WebhookReceiver) -> None:
    host, port = hook._server.server_address[:2]
    body = json.dumps(NOTIFICATION).encode()
    start = time.monotonic()
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
        # one byte every 0.3 s: each read is quick, the whole request is not
        cut = False
        for b in body:
            try:
                s.sendall(bytes([b]))
            except OSError:
                cut = True
                break
            time.sleep(0.3)
            if time.monotonic() - start > 5:
                break
        if not cut:
            cut = s.recv(100) == b""
    assert cut and time.monotonic() - start < 3.5, "the slow client was not cut off within the deadline"
    assert hook.count() == 0
    _still_records(hook, 0)


def test_a_flood_of_idle_connections_is_bounded_and_passes() -> None:
    with WebhookReceiver(timeout=4.0, max_clients=4) as hook:
        host, port = hook._server.server_address[:2]
        idle = [socket.create_connection((host, port), timeout=5) for _ in range(10)]
        try:
            # the 4 slots are taken: the rest are closed unanswered at once, long before the deadline
            closed = 0
            for s in idle[4:]:
                s.settimeout(2.0)
                with contextlib.suppress(TimeoutError):
                    closed += s.recv(1) == b""
            assert closed == 6
        finally:
            for s in idle:
                s.close()
        time.sleep(0.5)  # closed by their clients: the slots are given back
        _still_records(hook, 0)


def test_main_refuses_without_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--listen", "127.0.0.1:0"])
    assert "--log" in capsys.readouterr().err
