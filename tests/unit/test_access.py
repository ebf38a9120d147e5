"""vigil's clients of the monitoring services against a real https server on 127.0.0.1: the site CA
checked, the API login sent with every https request, plain http on a site without TLS, the
credential's file refused when it is a link or open to others, never a proxy, never the password in
a repr or a printout; and the reports' VictoriaMetrics client over it."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.tls_site import PASSWORD, Request, make_site, serve, vm_success, write_password
from vigil.installer.access import (
    SiteAccess,
    api_password_file,
    curl_options,
    failure_reason,
    login_hint,
    site_access,
)
from vigil.installer.audit import AuditLog
from vigil.installer.deploy.credentials import API_USER, CredentialError, read_password
from vigil.installer.ops.report import resolve_vm, victoriametrics
from vigil.installer.pki import PkiError, PkiPaths
from vigil.installer.reports import VictoriaMetrics
from vigil.installer.reports.errors import ReportError

BASIC = "Basic " + base64.b64encode(f"{API_USER}:{PASSWORD}".encode()).decode()


def _get(access: SiteAccess, url: str) -> bytes:
    with access.opener().open(url, timeout=5) as resp:
        body: bytes = resp.read()
    return body


def test_a_tls_site_is_read_over_https_with_the_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    issued = make_site(home)
    access = site_access(home)
    assert (access.tls, access.scheme, access.user) == (True, "https", API_USER)
    assert access.ca_file == PkiPaths.of(home).ca_cert
    assert access.url("198.18.0.10", 8428) == "https://198.18.0.10:8428"
    assert access.url("fd00::10", 9093) == "https://[fd00::10]:9093"
    with serve(tls=issued) as server:
        assert b'"success"' in _get(access, f"{server.url}/api/v1/query?query=up")
        assert _get(access, f"{server.url}/vmui/")
    assert [r.authorization for r in server.seen] == [BASIC, BASIC]


def test_the_context_verifies_and_wants_tls_1_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_site(home)
    ctx = site_access(home).ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_a_server_of_another_ca_is_refused(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    make_site(home)
    foreign = make_site(other)  # a certificate for 127.0.0.1, but from another CA
    access = site_access(home)
    with serve(tls=foreign) as server:
        with pytest.raises(urllib.error.URLError) as exc:
            _get(access, f"{server.url}/api/v1/query")
        assert failure_reason(exc.value) == (
            "TLS: the server's certificate is not trusted: unable to get local issuer certificate"
        )
        with pytest.raises(ReportError) as err:
            VictoriaMetrics(server.url, access=access).query("up", 0)
    assert str(err.value) == (
        f"VictoriaMetrics {server.url}: TLS: the server's certificate is not trusted: unable to get "
        f"local issuer certificate (checked against the site CA {access.ca_file})"
    )
    assert server.seen == []  # nothing, the login least of all, went to it


def test_a_certificate_for_another_address_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    issued = make_site(home, ips=("198.18.0.10",))
    with serve(tls=issued) as server, pytest.raises(urllib.error.URLError) as exc:
        _get(site_access(home), f"{server.url}/")
    reason = failure_reason(exc.value)
    assert reason.startswith("TLS: the server's certificate is not trusted: IP address mismatch"), reason


def test_https_to_a_plain_server_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_site(home)
    with serve() as server, pytest.raises(urllib.error.URLError) as exc:
        _get(site_access(home), server.url.replace("http://", "https://") + "/")
    assert failure_reason(exc.value).startswith("TLS handshake failed: ")
    assert "\n" not in failure_reason(exc.value)


def test_a_plain_site_is_http_without_a_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    access = site_access(home)
    assert access == SiteAccess() and not access.tls
    assert access.url("198.18.0.10", 8428) == "http://198.18.0.10:8428"
    assert login_hint(home) is None and curl_options(home, access) == ""
    with serve() as server:
        assert _get(access, f"{server.url}/api/v1/query")
    assert [r.authorization for r in server.seen] == [None]


@pytest.mark.parametrize("missing", ["ca", "password"])
def test_half_a_tls_site_is_still_plain(tmp_path: Path, missing: str) -> None:
    home = tmp_path / "home"
    make_site(home, password=None if missing == "password" else PASSWORD)
    if missing == "ca":
        PkiPaths.of(home).ca_cert.unlink()
    assert site_access(home) == SiteAccess()


def test_the_login_never_goes_over_plain_http(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_site(home)
    with serve() as server:
        _get(site_access(home), f"{server.url}/api/v1/query")
    assert [r.authorization for r in server.seen] == [None]


def test_a_linked_or_open_password_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_site(home, password=None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(PASSWORD + "\n")
    elsewhere.chmod(0o600)
    api_password_file(home).symlink_to(elsewhere)
    with pytest.raises(CredentialError, match="a link"):
        site_access(home)
    api_password_file(home).unlink()
    write_password(home, PASSWORD, mode=0o644)
    with pytest.raises(CredentialError, match=r"open to others \(mode 644\); chmod 600 it"):
        site_access(home)


def test_a_linked_ca_certificate_is_refused(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    make_site(home)
    make_site(other)
    ca = PkiPaths.of(home).ca_cert
    ca.unlink()
    ca.symlink_to(PkiPaths.of(other).ca_cert)
    with pytest.raises(PkiError, match="is a link"):
        site_access(home)


def test_the_password_file_is_the_one_the_credential_reads(tmp_path: Path) -> None:
    write_password(tmp_path, "x" * 40)
    assert api_password_file(tmp_path) == tmp_path / "secrets" / "api.password"
    assert read_password(tmp_path, "api") == "x" * 40


def test_the_password_is_never_shown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_site(home)
    access = site_access(home)
    assert PASSWORD not in repr(access) and PASSWORD not in str(access)
    assert "password=" not in repr(access)
    hint = login_hint(home)
    assert hint == (
        f"log in as {API_USER} with the password in {home}/secrets/api.password; "
        f"the site CA is {home}/secrets/pki/ca.crt"
    )
    options = curl_options(home, access)
    assert options == (
        f'--cacert {home}/secrets/pki/ca.crt -u {API_USER}:"$(cat {home}/secrets/api.password)"'
    )
    assert PASSWORD not in options
    assert not any(s in repr(access.opener().handlers) for s in (PASSWORD, BASIC))
    client = VictoriaMetrics("https://127.0.0.1:1", access=access)
    assert PASSWORD not in repr(client)


def test_the_opener_takes_no_proxy_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    issued = make_site(home)
    closed = "http://127.0.0.1:1"  # nothing listens there: a request through it fails
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, closed)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with serve() as plain, serve(tls=issued) as tls:
        with pytest.raises(urllib.error.URLError):  # what the environment would do to a default opener
            urllib.request.build_opener().open(f"{plain.url}/", timeout=5)
        assert _get(SiteAccess(), f"{plain.url}/")
        assert _get(site_access(home), f"{tls.url}/")
    assert len(plain.seen) == 1 and [r.authorization for r in tls.seen] == [BASIC]


# --- the reports' VictoriaMetrics client ----------------------------------------------------------


def _vm_wanting_the_login(request: Request) -> tuple[int, object]:
    if request.authorization != BASIC:
        return 401, b"Unauthorized\n"
    return 200, {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"job": "node"}, "value": [1, "1"]}]},
    }


def test_victoriametrics_queries_over_tls_with_the_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    issued = make_site(home)
    with serve(_vm_wanting_the_login, tls=issued) as server:
        client = VictoriaMetrics(server.url, access=site_access(home))
        assert client.query("up", 1_800_000_000) == [({"job": "node"}, 1.0)]
    (request,) = server.seen
    assert (request.method, request.path, request.authorization) == ("POST", "/api/v1/query", BASIC)
    assert b"query=up" in request.body and b"nocache=1" in request.body


def test_a_refused_login_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    issued = make_site(home)
    wrong = SiteAccess(PkiPaths.of(home).ca_cert, API_USER, "nope" * 10)
    with serve(_vm_wanting_the_login, tls=issued) as server:
        with pytest.raises(ReportError) as err:
            VictoriaMetrics(server.url, access=wrong).query("up", 0)
        assert str(err.value) == (
            f"VictoriaMetrics {server.url}: /api/v1/query: HTTP 401: Unauthorized; "
            f"the login {API_USER} was refused"
        )
        with pytest.raises(ReportError) as err:
            VictoriaMetrics(server.url, access=SiteAccess(PkiPaths.of(home).ca_cert)).query("up", 0)
        assert str(err.value).endswith(
            "HTTP 401: Unauthorized; no login was sent: there is no API credential here "
            "(secrets/api.password)"
        )
    assert "\n" not in str(err.value)


def test_the_deployed_inventorys_victoriametrics_takes_the_sites_scheme(tmp_path: Path) -> None:
    home = tmp_path / "home"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    monitoring:\n      hosts:\n        mon01: {ansible_host: 198.18.0.10}\n"
    )
    AuditLog(home).append("deploy", str(inventory), "ok")
    assert resolve_vm(home, None) == ["http://198.18.0.10:8428"]  # deployed before TLS
    make_site(home)
    assert resolve_vm(home, None) == ["https://198.18.0.10:8428"]
    client = victoriametrics(home, None)
    assert client.url == "https://198.18.0.10:8428" and client.access == site_access(home)
    given = victoriametrics(home, "https://127.0.0.1:8428/")  # --vm by hand: the site's CA and login too
    assert given.url == "https://127.0.0.1:8428" and given.access == site_access(home)


def test_victoriametrics_without_access_is_plain_and_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:1")
    monkeypatch.delenv("no_proxy", raising=False)
    with serve(vm_success) as server:
        assert VictoriaMetrics(server.url).query("up", 0) == []
    assert [r.authorization for r in server.seen] == [None]
