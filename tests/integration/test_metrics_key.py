"""The monitoring services' own /metrics against the real VictoriaMetrics and vmalert of each channel
we ship (debian: 1.79, debian-next: 1.112), started on 127.0.0.1 as the roles start them, scraping
each other as the role's scrape configuration says.

From 1.86 on, /metrics without -metricsAuthKey wants the API login, so the roles give the key to
neither service, and VictoriaMetrics' own job leaves it out of its URL: /targets, /api/v1/targets,
/config and /service-discovery do not show it there. vmalert's job keeps ?authKey= whatever the
version (a rollback that keeps the store puts vmalert 1.79 back beside a VictoriaMetrics whose
scrape configuration it does not rewrite): 1.112 ignores it, the scrape still needs the login, and
the key opens nothing there. 1.79 takes the key only as ?authKey= (and serves /metrics to anyone
without it), and its pages show both scrape URLs with the key to the API login: what the test pins
for each version is exactly what docs/security.md says of it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers.components import fetched_bin, free_port

pytestmark = pytest.mark.integration

ROLES = Path(__file__).resolve().parents[2] / "roles"
USER, PASSWORD, KEY = "vigil-api", "login0password0of0the0site0", "metrics0key0of0the0site0"
PAGES = ("/api/v1/targets", "/targets", "/config", "/service-discovery")


def _login_since() -> tuple[int, ...]:
    since = yaml.safe_load((ROLES / "victoriametrics" / "vars" / "main.yml").read_text())
    return tuple(int(x) for x in since["_victoriametrics_metrics_login_since"].split("."))


def _version(text: str) -> tuple[int, ...]:
    found = re.search(r"[0-9]+[.][0-9]+[.][0-9]+", text)
    assert found, text
    return tuple(int(x) for x in found.group().split("."))


@pytest.fixture(scope="module", params=["debian", "debian-next"])
def shipped(
    request: pytest.FixtureRequest, vigil_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The victoria-metrics component of a channel's lock, fetched and checked as a build does."""
    version, bin_dir = fetched_bin(request.param, "victoria-metrics", vigil_cache, tmp_path_factory)
    (bin_dir / "version").write_text(version)
    (bin_dir / "channel").write_text(request.param)
    return bin_dir


def _get(url: str, *, login: bool) -> tuple[int, str]:
    assert url.startswith("http://127.0.0.1:")
    req = urllib.request.Request(url)  # noqa: S310 - our own services on 127.0.0.1
    if login:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - as above
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def stack(shipped: Path, tmp_path: Path) -> Iterator[tuple[bool, int, int]]:
    """(key in the query string?, VictoriaMetrics' port, vmalert's port), both running."""
    key_in_url = _version((shipped / "version").read_text()) < _login_since()
    # Debian 13's 1.112 (debian-next) must never carry the key in a URL
    assert key_in_url is ((shipped / "channel").read_text() == "debian")
    vm_port, alert_port = free_port(), free_port()
    (tmp_path / "api.password").write_text(PASSWORD + "\n")
    jobs = []
    for name, port in (("victoriametrics", vm_port), ("vmalert", alert_port)):
        job = {
            "job_name": name,
            "scrape_interval": "1s",
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
            "basic_auth": {"username": USER, "password_file": str(tmp_path / "api.password")},
        }
        if key_in_url or name == "vmalert":  # as roles/victoriametrics/templates/scrape.yml.j2 writes it
            job["params"] = {"authKey": [KEY]}
        jobs.append(job)
    (tmp_path / "scrape.yml").write_text(yaml.safe_dump({"scrape_configs": jobs}))
    (tmp_path / "rules.yml").write_text("groups: []\n")
    auth = [f"-httpAuth.username={USER}", f"-httpAuth.password={PASSWORD}"]
    if key_in_url:
        auth.append(f"-metricsAuthKey={KEY}")
    procs = [
        subprocess.Popen(
            [
                str(shipped / "victoria-metrics"),
                f"-storageDataPath={tmp_path / 'data'}",
                f"-httpListenAddr=127.0.0.1:{vm_port}",
                f"-promscrape.config={tmp_path / 'scrape.yml'}",
                "-loggerLevel=ERROR",
                *auth,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                str(shipped / "vmalert"),
                f"-rule={tmp_path / 'rules.yml'}",
                f"-datasource.url=http://127.0.0.1:{vm_port}",
                f"-datasource.basicAuth.username={USER}",
                f"-datasource.basicAuth.password={PASSWORD}",
                f"-httpListenAddr=127.0.0.1:{alert_port}",
                "-loggerLevel=ERROR",
                *auth,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        deadline = time.monotonic() + 60
        while True:
            status, body = (0, "")
            with contextlib.suppress(OSError):
                status, body = _get(f"http://127.0.0.1:{vm_port}/api/v1/targets", login=True)
            if status == 200:
                targets = json.loads(body)["data"]["activeTargets"]
                if len(targets) == 2 and all(t["health"] == "up" for t in targets):
                    break
            assert time.monotonic() < deadline, f"the two targets never came up: {status} {body[:500]}"
            assert all(p.poll() is None for p in procs), "a service stopped"
            time.sleep(0.5)
        yield key_in_url, vm_port, alert_port
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=20)


def test_the_metrics_key_is_needed_and_shown_only_where_the_version_wants_it(
    stack: tuple[bool, int, int],
) -> None:
    key_in_url, vm_port, alert_port = stack
    for port in (vm_port, alert_port):
        metrics = f"http://127.0.0.1:{port}/metrics"
        assert _get(metrics, login=False)[0] == 401
        if key_in_url:
            # 1.79: the key alone opens /metrics, the login does not
            assert _get(f"{metrics}?authKey={KEY}", login=False)[0] == 200
            assert _get(metrics, login=True)[0] == 401
        else:
            # 1.86 and later: the login opens /metrics, a key does nothing
            assert _get(metrics, login=True)[0] == 200
            assert _get(f"{metrics}?authKey={KEY}", login=False)[0] == 401
    for page in PAGES:
        status, body = _get(f"http://127.0.0.1:{vm_port}{page}", login=True)
        assert status == 200, page
        assert KEY in body, page  # vmalert's job keeps it (above)
        assert PASSWORD not in body, page
        assert _get(f"http://127.0.0.1:{vm_port}{page}", login=False)[0] == 401, page
    # VictoriaMetrics' own job's URL carries the key only where its version wants it
    status, body = _get(f"http://127.0.0.1:{vm_port}/api/v1/targets", login=True)
    urls = {t["labels"]["job"]: t["scrapeUrl"] for t in json.loads(body)["data"]["activeTargets"]}
    assert (KEY in urls["victoriametrics"]) is key_in_url, urls
    assert KEY in urls["vmalert"], urls
    # and with it, 1.86 and later still want the login: the key opens nothing there
    if not key_in_url:
        assert _get(f"http://127.0.0.1:{alert_port}/metrics?authKey={KEY}", login=True)[0] == 200
