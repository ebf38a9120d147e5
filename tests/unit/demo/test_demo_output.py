"""What the demo prints must work: every address is checked before it is printed, with the
stylesheets and scripts its page loads; the job placement `lab job` reports is Slurm's own."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.tls_site import PASSWORD, make_site, serve
from vigil.installer.access import SiteAccess, site_access
from vigil.installer.cli.demo import address_lines, check_address, next_commands
from vigil.installer.cli.lab import samples_command
from vigil.installer.lab.jobs import parse_placement

PAGES = {
    "/ok/": b'<html><head><link rel="stylesheet" href="/static/app.css"><script src="app.js"></script>'
    b'<link rel="icon" href="/nothing.ico"></head><body>ok</body></html>',
    "/ok/app.js": b"void 0;",
    "/static/app.css": b"body{}",
    # vmalert from Debian: the page answers, its stylesheet does not
    "/bare/": b'<html><head><link href="/bare/static/css/bootstrap.min.css" rel="stylesheet" />'
    b"</head></html>",
    # another server's asset is not this UI's to answer for (and unreachable in the air gap)
    "/foreign/": b'<html><head><script src="http://192.0.2.1/x.js"></script></head></html>',
    "/api": b'{"status":"success"}',
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/slow/":
            time.sleep(3)
        body = PAGES.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        kind = "application/json" if self.path == "/api" else "text/html; charset=utf-8"
        if self.path.endswith((".css", ".js")):
            kind = "text/plain"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_page_whose_assets_answer_is_printed(server: str) -> None:
    assert check_address(f"{server}/ok/") is None


def test_a_page_whose_stylesheet_is_missing_is_not(server: str) -> None:
    assert check_address(f"{server}/bare/") == "404 Not Found for /bare/static/css/bootstrap.min.css"


def test_a_missing_page_says_its_status(server: str) -> None:
    assert check_address(f"{server}/vmui/") == "404 Not Found"


def test_another_servers_assets_are_not_fetched(server: str) -> None:
    assert check_address(f"{server}/foreign/", timeout=2) is None


def test_an_api_answer_is_not_parsed_as_a_page(server: str) -> None:
    assert check_address(f"{server}/api") is None


def test_a_closed_port_is_no_answer() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        why = check_address(f"http://127.0.0.1:{port}/")
    assert why is not None and why.startswith("no answer"), why


def test_a_server_that_does_not_answer_in_time_is_no_answer(server: str) -> None:
    t0 = time.monotonic()
    why = check_address(f"{server}/slow/", timeout=0.5)
    assert why is not None and why.startswith("no answer"), why
    assert time.monotonic() - t0 < 2.5


def test_next_commands_use_the_installed_root_and_the_lab_inventory(tmp_path: Path) -> None:
    cmds = next_commands(tmp_path, tmp_path / "vigil-3-amd64.bundle", lab=True)
    assert not any("--trust" in c for c in cmds), cmds  # the demo installs its trust root
    assert "deploy --inventory inventories/lab --check" in cmds
    assert next_commands(tmp_path, tmp_path / "b", lab=False)[-1] == "audit verify"


def test_a_tls_page_is_checked_with_the_site_ca_and_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    issued = make_site(home)
    access = site_access(home)
    with serve(lambda r: (200, b"{}"), tls=issued) as server:
        assert check_address(f"{server.url}/vmui/", access=access) is None
        why = check_address(f"{server.url}/vmui/")  # without the site CA: not trusted
    assert why is not None and why.startswith("no answer (TLS: the server's certificate is not trusted: ")
    assert [r.authorization is not None for r in server.seen] == [True]


def test_the_addresses_of_a_tls_site_are_https_with_how_to_log_in(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_site(home)
    text = "\n".join(address_lines(home, site_access(home), lambda url: None))
    assert PASSWORD not in text
    assert "  VictoriaMetrics UI:  https://198.18.0.10:8428/vmui/" in text
    assert "  Grafana:             http://198.18.0.10:3000/login" in text  # Grafana is not the site's TLS yet
    assert "  vmalert:             https://198.18.0.10:8880/vmalert/groups" in text
    assert "  Alertmanager UI:     https://198.18.0.10:9093/" in text
    assert (
        f"log in as vigil-api with the password in {home}/secrets/api.password; "
        f"the site CA is {home}/secrets/pki/ca.crt"
    ) in text
    curl = f'curl -s --cacert {home}/secrets/pki/ca.crt -u vigil-api:"$(cat {home}/secrets/api.password)"'
    assert f"    alerts now:       {curl} 'https://198.18.0.10:9093/api/v2/alerts'" in text
    assert "http://198.18.0.10:8428" not in text


def test_the_addresses_of_a_plain_site_are_as_before(tmp_path: Path) -> None:
    down = "no answer (Connection refused)"
    lines = address_lines(tmp_path, SiteAccess(), lambda url: down if ":3000" in url else None)
    assert "  VictoriaMetrics UI:  http://198.18.0.10:8428/vmui/" in lines
    assert not any("Grafana" in line or "log in" in line for line in lines)
    assert "    scrape targets:   curl -s 'http://198.18.0.10:8428/targets'" in lines


def test_lab_job_prints_how_to_read_its_samples(tmp_path: Path) -> None:
    sel = 'DCGM_FI_DEV_POWER_USAGE{hpc_job="7"}'
    assert samples_command(tmp_path, sel) == (
        f"curl -s http://198.18.0.10:8428/api/v1/query --data-urlencode 'query={sel}'"
    )
    make_site(tmp_path)
    secrets = tmp_path / "secrets"
    assert samples_command(tmp_path, sel) == (
        f'curl -s --cacert {secrets}/pki/ca.crt -u vigil-api:"$(cat {secrets}/api.password)" '
        f"https://198.18.0.10:8428/api/v1/query --data-urlencode 'query={sel}'"
    )
    (secrets / "api.password").chmod(0o644)
    assert samples_command(tmp_path, sel).startswith("(cannot tell how to reach VictoriaMetrics: ")


# `scontrol show job -d 1` on the lab's Slurm 22.05, as it answered for a 4-GPU job on gpu01
SCONTROL = """JobId=1 JobName=vigil-lab-physics
   UserId=alice(2001) GroupId=alice(2001) MCS_label=N/A
   Priority=4294901759 Nice=0 Account=physics QOS=(null)
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=gpu01
   BatchHost=gpu01
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   JOB_GRES=gpu:4
     Nodes=gpu01 CPU_IDs=7 Mem=0 GRES=gpu:4(IDX:0-3)
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
"""


def test_placement_from_scontrol() -> None:
    assert parse_placement(SCONTROL) == ("RUNNING", "gpu01", (0, 1, 2, 3))


def test_placement_with_scattered_gpus() -> None:
    text = SCONTROL.replace("GRES=gpu:4(IDX:0-3)", "GRES=gpu:3(IDX:0,2-3)")
    assert parse_placement(text) == ("RUNNING", "gpu01", (0, 2, 3))


def test_a_pending_job_has_no_placement() -> None:
    pending = (
        "JobId=7 JobName=x\n   JobState=PENDING Reason=Resources Dependency=(null)\n   NodeList=(null)\n"
    )
    assert parse_placement(pending) == ("PENDING", "", ())


def test_garbage_has_no_placement() -> None:
    assert parse_placement("slurm_load_jobs error: Invalid job id specified\n") == ("", "", ())
