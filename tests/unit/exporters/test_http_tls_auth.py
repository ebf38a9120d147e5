"""TLS and HTTP Basic authentication on the exporters' HTTP server, and the flags that turn them on.

A throwaway CA signs a certificate for 127.0.0.1; a second CA stands for the one a wrong client
trusts. The servers run with a small cap and timeout so that the hostile-client cases stay fast.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.unit.exporters.tls_helpers import (
    PASSWORD,
    USER,
    Pki,
    basic,
    client_context,
    make_pki,
    new_key,
    write_key,
)
from vigil.exporters._http import BasicAuth, ServerConfigError, make_server, server_context
from vigil.exporters.gpusim.__main__ import main as gpusim_main
from vigil.exporters.redfish.__main__ import main as redfish_main
from vigil.exporters.slurm.__main__ import main as slurm_main

BODY = "up 1\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


Serve = Callable[..., tuple[str, int]]


@pytest.fixture
def serve(pki: Pki) -> Iterator[Serve]:
    """Start a TLS server with Basic auth (overridable) on 127.0.0.1 and a free port."""
    servers = []

    def start(**kw: object) -> tuple[str, int]:
        kw.setdefault("max_connections", 4)
        kw.setdefault("timeout", 1.0)
        kw.setdefault("tls", server_context(str(pki.cert), str(pki.key)))
        kw.setdefault("auth", BasicAuth.from_password(USER, PASSWORD))
        srv = make_server(("127.0.0.1", 0), lambda: BODY, title="t", **kw)  # type: ignore[arg-type]
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return srv.server_address[:2]  # type: ignore[return-value]

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def get(
    addr: tuple[str, int],
    ca: Path,
    path: str = "/metrics",
    authorization: list[str | bytes] | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPSConnection(addr[0], addr[1], context=client_context(ca), timeout=5)
    try:
        conn.putrequest("GET", path)
        for value in authorization or []:
            conn.putheader("Authorization", value)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def test_tls_with_the_right_credentials_serves_the_metrics(serve: Serve, pki: Pki) -> None:
    addr = serve()
    status, headers, body = get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])
    assert (status, body) == (200, BODY.encode())
    assert headers["Content-Type"].startswith("text/plain")
    # the scheme is case-insensitive (RFC 7617)
    status, _, _ = get(addr, pki.ca, authorization=["basic " + basic(USER, PASSWORD).split()[1]])
    assert status == 200


@pytest.mark.parametrize("path", ["/metrics", "/", "/nowhere"])
@pytest.mark.parametrize(
    "authorization",
    [[], [basic(USER, "wrong")], [basic("grafana", PASSWORD)], [basic(USER, PASSWORD[:-1])]],
    ids=["none", "wrong-password", "wrong-user", "password-prefix"],
)
def test_no_or_wrong_credentials_get_401_on_every_path(
    serve: Serve, pki: Pki, path: str, authorization: list[str | bytes]
) -> None:
    addr = serve()
    status, headers, body = get(addr, pki.ca, path, authorization)
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Basic realm="vigil"'
    assert BODY.encode() not in body and b"<html" not in body
    assert headers["Connection"] == "close"
    assert get(addr, pki.ca, path, [basic(USER, PASSWORD)])[0] == (200 if path != "/nowhere" else 404)


def test_the_connection_is_closed_after_a_401(serve: Serve, pki: Pki) -> None:
    addr = serve(timeout=2.0)
    with client_context(pki.ca).wrap_socket(
        socket.create_connection(addr, timeout=3), server_hostname="127.0.0.1"
    ) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive asked for
        started = time.monotonic()
        received = b""
        while chunk := s.recv(4096):
            received += chunk
        assert received.startswith(b"HTTP/1.1 401 ")
        assert time.monotonic() - started < 1.0  # closed by the server, not by its read timeout


def test_auth_without_tls_and_tls_without_auth(serve: Serve, pki: Pki) -> None:
    plain = serve(tls=None)
    conn = http.client.HTTPConnection(*plain, timeout=5)
    conn.request("GET", "/metrics")
    assert conn.getresponse().status == 401
    conn.close()
    status, _, body = get(serve(auth=None), pki.ca)
    assert (status, body) == (200, BODY.encode())


TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
HOSTILE: dict[str, list[str | bytes]] = {
    "wrong-scheme": ["Bearer " + TOKEN],
    "digest": ["Digest username=prometheus"],
    "no-token": ["Basic"],
    "not-base64": ["Basic !!!not-base64!!!"],
    "bad-padding": ["Basic " + TOKEN[:-2]],
    "no-colon": ["Basic " + base64.b64encode(f"{USER}{PASSWORD}".encode()).decode()],
    "not-utf8": [b"Basic " + base64.b64encode(b"\xff\xfe:" + PASSWORD.encode())],
    "not-ascii": [b"Basic \xc3\xa9\xff" + TOKEN.encode()],
    "twice": [basic(USER, PASSWORD), basic(USER, PASSWORD)],
    "good-and-bad": [basic(USER, PASSWORD), basic(USER, "wrong")],
    "over-4kib": ["Basic " + "A" * 5000],
}


@pytest.mark.parametrize("authorization", HOSTILE.values(), ids=list(HOSTILE))
def test_hostile_authorization_headers_get_401_and_the_server_serves_on(
    serve: Serve, pki: Pki, authorization: list[str | bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    addr = serve()
    status, headers, _ = get(addr, pki.ca, authorization=authorization)
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Basic realm="vigil"'
    assert get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])[0] == 200
    assert "Traceback" not in capsys.readouterr().err


def test_right_credentials_in_a_header_over_4_kib_are_refused(serve: Serve, pki: Pki) -> None:
    long_password = "x" * 4000
    addr = serve(auth=BasicAuth.from_password(USER, long_password))
    assert get(addr, pki.ca, authorization=[basic(USER, long_password[:2000])])[0] == 401
    assert get(addr, pki.ca, authorization=[basic(USER, long_password)])[0] == 401
    addr = serve(auth=BasicAuth.from_password(USER, long_password[:2000]))
    assert get(addr, pki.ca, authorization=[basic(USER, long_password[:2000])])[0] == 200


def test_credentials_are_not_logged(
    serve: Serve, pki: Pki, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level("DEBUG", logger="vigil.exporters")
    addr = serve()
    get(addr, pki.ca, authorization=[basic(USER, "wrong-" + PASSWORD)])
    get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])
    logged = caplog.text + capsys.readouterr().err
    assert "401" in logged  # the requests are logged ...
    for secret in (PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()[8:]):
        assert secret not in logged  # ... their credentials are not


def test_plain_http_to_the_tls_port_gets_no_http_response(
    serve: Serve, pki: Pki, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level("DEBUG", logger="vigil.exporters")
    addr = serve()
    login = basic(USER, PASSWORD).encode()
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " + login + b"\r\n\r\n"
    with socket.create_connection(addr, timeout=3) as s:
        received = b""
        started = time.monotonic()
        # The server may read the first bytes, see they are no TLS record and close before the
        # rest is sent: a broken pipe or a reset is that close, seen from this side.
        try:
            s.sendall(request)
            while chunk := s.recv(4096):
                received += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert time.monotonic() - started < 2  # closed at once, not after a timeout
    assert not received.startswith(b"HTTP/")
    assert get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])[0] == 200
    assert "TLS handshake failed" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    assert "Traceback" not in capsys.readouterr().err


def test_a_client_that_resets_mid_request_leaves_no_traceback(
    serve: Serve, pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    addr = serve()
    raw = socket.create_connection(addr, timeout=3)
    s = client_context(pki.ca).wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # then a reset, not a close
    time.sleep(0.1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    time.sleep(0.2)
    assert get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])[0] == 200
    assert "Traceback" not in capsys.readouterr().err


def test_a_client_that_trusts_another_ca_refuses_the_server(serve: Serve, pki: Pki) -> None:
    addr = serve()
    with (
        socket.create_connection(addr, timeout=3) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        client_context(pki.other_ca).wrap_socket(raw, server_hostname="127.0.0.1")
    assert get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])[0] == 200


def test_clients_that_never_send_a_client_hello_hold_no_more_than_the_cap_and_time_out(
    serve: Serve, pki: Pki
) -> None:
    addr = serve(max_connections=4, timeout=1.0)
    started = time.monotonic()
    silent = [socket.create_connection(addr, timeout=3) for _ in range(40)]
    try:
        time.sleep(0.3)
        # the accept loop is not stuck in a handshake: the connections over the cap were closed at once
        closed = 0
        for s in silent:
            s.settimeout(0.05)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except (socket.timeout, ConnectionResetError):  # socket.timeout: TimeoutError from 3.10 on
                pass
        assert closed >= 40 - 4
        # a good client while the 4 slots are held is turned away at once, not left waiting ...
        with pytest.raises((ssl.SSLError, OSError)):
            get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])
        assert time.monotonic() - started < 1.0
        # ... and served once the silent ones are dropped after the timeout
        time.sleep(max(0.0, started + 1.4 - time.monotonic()))
        for s in silent:
            s.settimeout(0.5)
            with contextlib.suppress(ConnectionResetError):
                assert s.recv(1) == b""
        assert get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])[0] == 200
    finally:
        for s in silent:
            s.close()


def test_a_trickled_handshake_is_dropped_after_the_timeout_in_all(serve: Serve, pki: Pki) -> None:
    addr = serve(max_connections=4, timeout=1.0)
    # a real ClientHello, sent a byte every 0.2 s: each read is quick, the whole handshake is not
    hello = ssl.MemoryBIO()
    client = client_context(pki.ca).wrap_bio(ssl.MemoryBIO(), hello, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    data = hello.read()
    with socket.create_connection(addr, timeout=3) as s:
        started = time.monotonic()
        try:
            for b in data:
                s.sendall(bytes([b]))
                time.sleep(0.2)
                if time.monotonic() - started > 2.5:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert time.monotonic() - started < 2.0  # the server hung up after about 1 s
    assert get(addr, pki.ca, authorization=[basic(USER, PASSWORD)])[0] == 200


# -- BasicAuth.load -----------------------------------------------------------------------------

GOOD_LINE = f"{USER}:sha256:{hashlib.sha256(PASSWORD.encode()).hexdigest()}"


@pytest.mark.parametrize("content", [GOOD_LINE, GOOD_LINE + "\n"], ids=["no-newline", "newline"])
def test_basic_auth_file_loads(tmp_path: Path, content: str) -> None:
    f = tmp_path / "auth"
    f.write_text(content)
    auth = BasicAuth.load(str(f))
    assert auth.user == USER
    assert auth.check([basic(USER, PASSWORD)])
    assert not auth.check([basic(USER, PASSWORD + "x")])


HEX = hashlib.sha256(b"x").hexdigest()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "empty"),
        ("\n", "empty"),
        (f"{GOOD_LINE}\n{GOOD_LINE}\n", "several lines"),
        (f"{GOOD_LINE}\n\n", "several lines"),
        (f"{GOOD_LINE}\r\n", "hex"),
        (f"bad user:sha256:{HEX}", "user name"),
        (f"{'u' * 65}:sha256:{HEX}", "user name"),
        (f":sha256:{HEX}", "user name"),
        (f"{USER}:md5:{HEX}", "scheme"),
        (f"{USER}:SHA256:{HEX}", "scheme"),
        (f"{USER}:sha256:{HEX.upper()}", "hex"),
        (f"{USER}:sha256:{HEX[:-1]}", "hex"),
        (f"{USER}:sha256:{HEX[:-1]}g", "hex"),
        (f"{USER}:sha256:{HEX}0", "hex"),
        (f"{USER}:{PASSWORD}", "USER:sha256:HEX"),
        (f"{USER}:sha256:{HEX}:extra", "USER:sha256:HEX"),
        (GOOD_LINE + "\n" + "#" * 5000, "4096"),
        (b"\xff\xfe".decode("latin-1"), "UTF-8"),
    ],
    ids=[
        "empty",
        "newline-only",
        "two-lines",
        "blank-second-line",
        "crlf",
        "space-in-user",
        "long-user",
        "no-user",
        "md5",
        "upper-scheme",
        "upper-hex",
        "short-hex",
        "non-hex",
        "long-hex",
        "plain-password",
        "four-fields",
        "over-4kib",
        "not-utf8",
    ],
)
def test_basic_auth_file_rejections(tmp_path: Path, content: str, reason: str) -> None:
    f = tmp_path / "auth-file"
    f.write_bytes(content.encode("latin-1") if reason == "UTF-8" else content.encode())
    with pytest.raises(ServerConfigError) as e:
        BasicAuth.load(str(f))
    msg = str(e.value)
    assert msg.startswith(f"{f}: ") and reason in msg and "\n" not in msg
    assert PASSWORD not in msg


def test_basic_auth_file_that_is_not_a_regular_file(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_text(GOOD_LINE)
    BasicAuth.load(str(good))
    link = tmp_path / "link"
    link.symlink_to(good)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, reason in [
        (link, "symbolic link"),
        (fifo, "not a regular file"),
        (tmp_path, "not a regular file"),
        (tmp_path / "missing", "No such file"),
    ]:
        errors: list[BaseException] = []

        def load(path: Path = path, errors: list[BaseException] = errors) -> None:
            try:
                BasicAuth.load(str(path))
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=load, daemon=True)
        t.start()
        t.join(2)  # opening the FIFO must not wait for a writer
        assert not t.is_alive(), f"{path}: load hangs"
        assert len(errors) == 1 and isinstance(errors[0], ServerConfigError), errors
        assert str(errors[0]).startswith(f"{path}: ") and reason in str(errors[0])
    with contextlib.suppress(OSError):  # let a thread stuck on the FIFO (a failed run) go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# -- server_context ------------------------------------------------------------------------------


def test_server_context_requires_tls_1_2(pki: Pki) -> None:
    ctx = server_context(str(pki.cert), str(pki.key))
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_server_context_names_the_file_at_fault(pki: Pki, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    bad_key = tmp_path / "bad.key"
    bad_key.write_text("-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n")
    encrypted = tmp_path / "encrypted.key"
    write_key(encrypted, new_key(), b"passphrase")
    cert, key = str(pki.cert), str(pki.key)
    cases = [
        (str(tmp_path / "missing.pem"), key, "missing.pem: No such file"),
        (key, key, "server.key: no PEM certificate"),
        (cert, cert, "server.pem: no PEM private key"),
        (str(garbage), key, "garbage.pem: cannot load the certificate"),
        (cert, str(bad_key), "bad.key: cannot load the private key"),
        (cert, str(pki.other_key), "other.key: not the private key of the certificate in"),
        (cert, str(encrypted), "encrypted.key: the private key is encrypted"),
    ]
    for c, k, expected in cases:
        with pytest.raises(ServerConfigError) as e:
            server_context(c, k)
        assert expected in str(e.value) and "\n" not in str(e.value), (c, k, str(e.value))


def test_server_context_refuses_a_fifo_at_once(pki: Pki, tmp_path: Path) -> None:
    """Opening a FIFO waits for a writer: the exporter's start hung on one given as the certificate
    or the key."""
    fifo = tmp_path / "tls.fifo"
    os.mkfifo(fifo, 0o600)
    for cert, key in [(fifo, pki.key), (pki.cert, fifo)]:
        errors: list[BaseException] = []

        def load(cert: Path = cert, key: Path = key, errors: list[BaseException] = errors) -> None:
            try:
                server_context(str(cert), str(key))
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=load, daemon=True)
        t.start()
        t.join(2)
        stuck = t.is_alive()
        with contextlib.suppress(OSError):  # let a thread stuck on the FIFO (a failed run) go
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        assert not stuck, f"server_context({cert}, {key}) waits on the FIFO"
        assert len(errors) == 1 and isinstance(errors[0], ServerConfigError), errors
        assert str(errors[0]) == f"{fifo}: not a regular file"


# -- the command lines -----------------------------------------------------------------------------

MAINS = {
    "slurm": (slurm_main, ["--listen-address", "127.0.0.1:1"]),
    "redfish": (redfish_main, ["--listen-address", "127.0.0.1:1", "--config", "/nonexistent/config.yml"]),
    "gpusim": (gpusim_main, ["--address", "127.0.0.1:1"]),
}


@pytest.mark.parametrize("name", MAINS)
@pytest.mark.parametrize("flag", ["--tls-cert-file", "--tls-key-file"])
def test_cli_one_tls_flag_alone_is_a_usage_error(
    name: str, flag: str, pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = MAINS[name]
    assert main([*argv, flag, str(pki.cert)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("FAIL: ") and "--tls-cert-file and --tls-key-file" in err


@pytest.mark.parametrize("name", MAINS)
def test_cli_bad_auth_file_fails_with_its_name(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = MAINS[name]
    bad = tmp_path / "exporter.auth"
    bad.write_text(f"{USER}:{PASSWORD}\n")
    assert main([*argv, "--basic-auth-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"FAIL: {bad}: ") and PASSWORD not in err


@pytest.mark.parametrize("name", MAINS)
def test_cli_bad_certificate_fails_with_its_name(
    name: str, pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = MAINS[name]
    assert main([*argv, "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.other_key)]) == 2
    assert capsys.readouterr().err.startswith(f"FAIL: {pki.other_key}: not the private key")


def test_the_bmc_simulator_reads_gpu_power_from_a_tls_exporter_with_the_credential(
    pki: Pki, tmp_path: Path
) -> None:
    """The lab's BMC simulator feeds on the GPU simulator, which serves TLS with Basic auth once the
    site has its scrape credential: it reads it with the site CA and the credential, and refuses it
    with another CA or without the credential."""
    from vigil.exporters.redfish.bmcsim.sim import read_gpu_power

    power = 'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 120.5\nDCGM_FI_DEV_POWER_USAGE{gpu="1"} 79.5\n'
    srv = make_server(
        ("127.0.0.1", 0),
        lambda: power,
        title="t",
        max_connections=4,
        timeout=1.0,
        tls=server_context(str(pki.cert), str(pki.key)),
        auth=BasicAuth.from_password(USER, PASSWORD),
    )
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"https://127.0.0.1:{srv.server_address[1]}/metrics"
        site = client_context(pki.ca)
        assert read_gpu_power(url, 5, context=site, auth=(USER, PASSWORD)) == 200.0
        with pytest.raises(OSError, match="401"):
            read_gpu_power(url, 5, context=site)
        with pytest.raises(OSError) as refused:  # urllib's URLError, around the verification error
            read_gpu_power(url, 5, context=client_context(pki.other_ca), auth=(USER, PASSWORD))
        assert isinstance(getattr(refused.value, "reason", None), ssl.SSLCertVerificationError), refused.value
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_bmc_simulator_cli_refuses_a_feed_credential_others_can_read(tmp_path: Path, capsys) -> None:
    from vigil.exporters.redfish.bmcsim.__main__ import main as bmcsim_main

    own = tmp_path / "bmc.cred"
    own.write_text("admin:some-bmc-password\n")
    own.chmod(0o600)
    feed = tmp_path / "feed.cred"
    feed.write_text(f"{USER}:{PASSWORD}\n")
    feed.chmod(0o644)
    argv = [
        "--listen-address=127.0.0.1:0",
        f"--credentials-file={own}",
        f"--gpu-metrics-credentials-file={feed}",
    ]
    assert bmcsim_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("FAIL: vigil-bmcsim:") and str(feed) in err and "must be 0600 or 0400" in err
    assert PASSWORD not in err
