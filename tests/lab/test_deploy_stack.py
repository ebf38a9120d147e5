"""The core stack deployed from a signed bundle onto the lab's real systemd hosts.

lab up → build + import a debian-channel bundle → `vigil deploy` (the bundle's own roles; the
session's deployed stack, shared with the other lab modules, which run after this one) →
VictoriaMetrics healthy and node_exporter `up == 1` on all four hosts, vmalert's rules loaded,
Alertmanager ready, units running as their own users with the hardening applied, a second deploy
changes nothing, and still no route out of the lab.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.lab import labhttp
from tests.lab.labhttp import ALERTMANAGER, VM, VMALERT, get, query

if TYPE_CHECKING:
    from tests.lab.conftest import DeployedStack

pytestmark = pytest.mark.lab

UNITS = {
    "vigil-victoriametrics": ["mon01"],
    "vigil-vmalert": ["mon01"],
    "vigil-alertmanager": ["mon01"],
    "vigil-node-exporter": ["mon01", "ctl01", "gpu01", "gpu02"],
}


@pytest.fixture(scope="module")
def stack(deployed_stack: DeployedStack) -> DeployedStack:
    """The session's deployed stack (tests/lab/conftest.py): its first deploy is the one checked here."""
    return deployed_stack


def test_first_deploy_succeeds_on_every_host(stack: DeployedStack) -> None:
    first: dict[str, Any] = stack.first
    assert first["ok"] is True
    assert sorted(first["hosts"]) == ["ctl01", "gpu01", "gpu02", "mon01"]
    for host, counts in first["hosts"].items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts)
        assert counts["changed"] > 0, f"{host}: a first deploy must change something"
    assert Path(first["run_dir"], "artifacts", "job_events").is_dir()


def test_victoriametrics_healthy_and_node_exporter_up_everywhere(stack: DeployedStack) -> None:
    assert get(f"{VM}/health") == (200, "OK")
    deadline = time.monotonic() + 120
    while True:
        series = query('up{job="node_exporter"}')
        up = {s["metric"]["instance"]: s["value"][1] for s in series}
        if up == {"mon01": "1", "ctl01": "1", "gpu01": "1", "gpu02": "1"} or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert up == {"mon01": "1", "ctl01": "1", "gpu01": "1", "gpu02": "1"}


def test_every_scrape_target_is_up(stack: DeployedStack) -> None:
    deadline = time.monotonic() + 120
    while True:
        series = query("up")
        jobs = {(s["metric"]["job"], s["metric"]["instance"]): s["value"][1] for s in series}
        if (
            jobs
            and all(v == "1" for v in jobs.values())
            and {"victoriametrics", "vmalert", "alertmanager", "node_exporter"} <= {j for j, _ in jobs}
        ):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"targets not all up: {jobs}")
        time.sleep(3)


def test_every_host_exports_the_expiry_of_its_certificates(lab: Any, stack: DeployedStack) -> None:
    """node_exporter's certificate scan on each host reads what the controller issued (the site CA's
    certificate for the host, the audit trail's TLS), VictoriaMetrics has it, vmalert watches it, and
    the hardened unit runs as installed."""
    from cryptography import x509

    def end(src: Path) -> str:
        return str(int(x509.load_pem_x509_certificate(src.read_bytes()).not_valid_after_utc.timestamp()))

    site_ca = stack.home / "secrets" / "pki"
    want = {}
    for host in UNITS["vigil-node-exporter"]:
        # the audit trail's copies: the receiver's server certificate, the others' client ones
        usage = "server" if host == "mon01" else "client"
        want[(host, f"/etc/vigil/audit/tls/{usage}.crt")] = end(site_ca / "issued" / host / f"{usage}.crt")
        want[(host, "/etc/vigil/audit/tls/ca.crt")] = end(site_ca / "ca.crt")
        want[(host, "/etc/vigil/tls/server.crt")] = end(site_ca / "issued" / host / "server.crt")
        want[(host, "/etc/vigil/tls/ca.crt")] = end(site_ca / "ca.crt")
    assert len(want) == 4 * len(UNITS["vigil-node-exporter"])
    deadline = time.monotonic() + 120
    while True:
        got = {
            (s["metric"]["instance"], s["metric"]["path"]): s["value"][1]
            for s in query('vigil_tls_certificate_not_after_seconds{index="0"}')
        }
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert got == want
    assert query("vigil_tls_certificate_unreadable") == []
    errors = {s["metric"]["instance"]: s["value"][1] for s in query("node_textfile_scrape_error")}
    assert errors == {h: "0" for h in UNITS["vigil-node-exporter"]}
    status, body = get(f"{VMALERT}/api/v1/rules")
    groups = {g["name"]: g for g in json.loads(body)["data"]["groups"]}
    alerts = {r["name"] for r in groups["vigil_certificates"]["rules"]}
    assert alerts == {"CertificateExpiringSoon", "CertificateExpiryImminent", "CertificateUnreadable"}
    assert not [a for a in query("ALERTS") if a["metric"]["alertname"].startswith("Certificate")]

    # The timer's own run, under the unit's hardening, as it will run every hour.
    out = "/var/lib/vigil/node_exporter/textfile/vigil_tls_certificates.prom"
    before = int(lab.ssh("gpu01", f"stat -c %Y {out}").stdout)
    time.sleep(1.1)
    lab.ssh("gpu01", "systemctl start vigil-tls-expiry.service")
    props = lab.ssh("gpu01", "systemctl show vigil-tls-expiry -p Result,ExecMainStatus").stdout.split()
    assert sorted(props) == ["ExecMainStatus=0", "Result=success"], props
    assert int(lab.ssh("gpu01", f"stat -c %Y {out}").stdout) > before  # read again, nothing else changed
    for host in UNITS["vigil-node-exporter"]:
        assert lab.ssh(host, "systemctl is-enabled vigil-tls-expiry.timer").stdout.strip() == "enabled", host
        assert lab.ssh(host, "systemctl is-active vigil-tls-expiry.timer").stdout.strip() == "active", host


def test_every_host_has_its_certificate_from_the_site_ca(lab: Any, stack: DeployedStack) -> None:
    """deploy issued each host a server certificate from the site CA (its name and address) and the
    common role put it, the CA's certificate and the key (root:vigil-tls, 0640) into /etc/vigil/tls."""
    import hashlib

    from cryptography import x509

    site_ca = stack.home / "secrets" / "pki"
    for host in UNITS["vigil-node-exporter"]:
        store = site_ca / "issued" / host
        cert = x509.load_pem_x509_certificate((store / "server.crt").read_bytes())
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert alt.get_values_for_type(x509.DNSName) == [host]
        assert [str(a) for a in alt.get_values_for_type(x509.IPAddress)] == [lab.ip(host)]
        modes = (("ca.crt", "root 644"), ("server.crt", "root 644"), ("server.key", "vigil-tls 640"))
        for name, want in modes:
            src = site_ca / name if name == "ca.crt" else store / name
            path = f"/etc/vigil/tls/{name}"
            out = lab.ssh(host, f"stat -c '%U %G %a' {path} && sha256sum {path}")
            owner, digest = out.stdout.splitlines()
            assert owner == f"root {want}", (host, name, owner)
            assert digest.split()[0] == hashlib.sha256(src.read_bytes()).hexdigest(), (host, name)


def test_vmalert_loaded_its_rules(stack: DeployedStack) -> None:
    status, body = get(f"{VMALERT}/api/v1/rules")
    assert status == 200
    groups = json.loads(body)["data"]["groups"]
    assert groups, "vmalert has no rule groups loaded"
    assert sum(len(g["rules"]) for g in groups) > 0


def test_alertmanager_ready(stack: DeployedStack) -> None:
    status, _ = get(f"{ALERTMANAGER}/-/ready")
    assert status == 200


@pytest.mark.parametrize(("unit", "host"), [(u, h) for u, hs in UNITS.items() for h in hs])
def test_unit_runs_hardened_as_its_own_user(lab: Any, stack: DeployedStack, unit: str, host: str) -> None:
    props = dict(
        line.split("=", 1)
        for line in lab.ssh(
            host,
            f"systemctl show {unit} -p ActiveState,User,NoNewPrivileges,ProtectSystem,"
            "ProtectHome,PrivateTmp,RestrictSUIDSGID,LockPersonality,MainPID",
        ).stdout.splitlines()
        if "=" in line
    )
    if props.get("ActiveState") != "active":
        journal = lab.ssh(host, f"journalctl -u {unit} -n 40 --no-pager", check=False).stdout
        pytest.fail(f"{host}: {unit} is {props.get('ActiveState')}\n{journal}")
    assert props["User"] not in ("", "root"), props
    assert (props["NoNewPrivileges"], props["ProtectSystem"], props["ProtectHome"], props["PrivateTmp"]) == (
        "yes",
        "strict",
        "yes",
        "yes",
    ), props
    assert props["RestrictSUIDSGID"] == "yes" and props["LockPersonality"] == "yes", props
    shell = lab.ssh(host, f"getent passwd {props['User']}").stdout.strip().rsplit(":", 1)[-1]
    assert shell.endswith("nologin"), shell
    owner = lab.ssh(host, f"ps -o user= -p {props['MainPID']}").stdout.strip()
    assert owner == props["User"]


# The second deploy of the stack, which must change nothing, is run once, from the console, after
# jobs have run (tests/lab/test_gpu_accounting.py): a stricter rerun than one right after the first.


def test_check_on_the_unchanged_stack_reports_no_drift(lab: Any, stack: DeployedStack, measured: Any) -> None:
    """`deploy --check` is the daily "does anything differ from the bundle?" question: it must say no
    on the stack just deployed (docs/benchmarks.md compares its time with the rerun's)."""
    t0 = time.monotonic()
    check = stack.vigil.json("deploy", "-i", str(lab.inventory), "--check", "--json")
    measured("lab: deploy --check of the unchanged stack", time.monotonic() - t0)
    assert check["ok"] is True
    assert {h: c["changed"] for h, c in check["hosts"].items()} == {
        "ctl01": 0,
        "gpu01": 0,
        "gpu02": 0,
        "mon01": 0,
    }


NODE_EXPORTER_HOME = "/opt/vigil/prometheus-node-exporter"
TEXTFILE_DIR = "/var/lib/vigil/node_exporter/textfile"


def test_a_changed_host_is_put_back_although_unchanged_roles_skip_their_steps(
    lab: Any, stack: DeployedStack
) -> None:
    """A rerun skips a role's install steps when one round trip finds everything in place
    (roles/_common/library/vigil_install_state.py); that check must see what the steps would put back.
    On gpu02 the node_exporter binary is swapped for a changed copy (renamed over it, as a running
    binary is replaced); on ctl01 the textfile directory, which the root prolog writes into, is made
    writable by everyone. `--check` names both, the run puts both back, the other hosts change nothing."""
    binary = f"{NODE_EXPORTER_HOME}/current/bin/node_exporter"
    want = lab.ssh("mon01", f"sha256sum {binary}").stdout.split()[0]
    lab.ssh("gpu02", f"cp -p {binary} {binary}.new && printf x >> {binary}.new && mv {binary}.new {binary}")
    lab.ssh("ctl01", f"chmod 0777 {TEXTFILE_DIR}")
    check = stack.vigil.json(
        "deploy", "-i", str(lab.inventory), "--tags", "node_exporter", "--check", "--json"
    )
    assert {h: c["changed"] > 0 for h, c in check["hosts"].items()} == {
        "ctl01": True,
        "gpu01": False,
        "gpu02": True,
        "mon01": False,
    }, check
    paths = {
        h: {p for c in check["changes"] if c["host"] == h for p in c["paths"]} for h in ("ctl01", "gpu02")
    }
    assert any(p.endswith("/bin/node_exporter") for p in paths["gpu02"]), check["changes"]
    assert TEXTFILE_DIR in paths["ctl01"], check["changes"]
    run = stack.vigil.json("deploy", "-i", str(lab.inventory), "--tags", "node_exporter", "--json")
    assert run["ok"] is True
    assert {h: c["changed"] > 0 for h, c in run["hosts"].items()} == {
        "ctl01": True,
        "gpu01": False,
        "gpu02": True,
        "mon01": False,
    }, run
    assert lab.ssh("gpu02", f"sha256sum {binary}").stdout.split()[0] == want
    assert lab.ssh("ctl01", f"stat -c %a {TEXTFILE_DIR}").stdout.strip() == "755"
    assert lab.ssh("gpu02", "systemctl is-active vigil-node-exporter").stdout.strip() == "active"


CHECK_TASK = "Compare the host with the last whole run of "


def _events(run_dir: str | Path) -> list[dict[str, Any]]:
    files = Path(run_dir, "artifacts", "job_events").glob("*.json")
    return sorted((json.loads(f.read_text()) for f in files), key=lambda e: e.get("counter", 0))


def fingerprint_checks(run_dir: str | Path) -> dict[str, dict[str, str]]:
    """{host: {role: "match" or the reason it did not}} from a run's fingerprint checks."""
    out: dict[str, dict[str, str]] = {}
    for e in _events(run_dir):
        data = e.get("event_data", {})
        task = str(data.get("task", ""))
        if e.get("event") == "runner_on_ok" and task.startswith(CHECK_TASK):
            res = data.get("res", {})
            out.setdefault(data["host"], {})[task[len(CHECK_TASK) :]] = (
                "match" if res.get("match") else str(res.get("reason"))
            )
    return out


def _covered(path: str, spec: dict[str, list[str]]) -> bool:
    return path in spec.get("paths", []) or any(
        path == t or path.startswith(t.rstrip("/") + "/") for t in spec.get("trees", [])
    )


def test_every_file_a_role_wrote_is_in_its_fingerprint(lab: Any, stack: DeployedStack) -> None:
    """What the first deploy put in place, read from its own events (each task's path, a vigil_files
    call's every path, each unit a task enabled), lies within the fingerprint its role stored on that
    host: a drift of anything a role manages is seen by the next run's one round trip."""
    specs = {
        h: {r: e["spec"] for r, e in json.loads(lab.ssh(h, f"cat {FINGERPRINTS}").stdout)["roles"].items()}
        for h in ("mon01", "ctl01", "gpu01", "gpu02")
    }
    role_of: dict[str, str] = {}
    missing: set[str] = set()
    seen = 0
    for e in _events(stack.first["run_dir"]):
        data = e.get("event_data", {})
        host, task = data.get("host"), str(data.get("task", ""))
        if task.startswith(CHECK_TASK):
            role_of[host] = task[len(CHECK_TASK) :]
        if data.get("role") not in (None, "", "_common"):
            role_of[host] = data["role"]
        if e.get("event") != "runner_on_ok" or not data.get("res", {}).get("changed") or host not in role_of:
            continue
        res, role = data["res"], role_of[host]
        spec = specs[host].get(role, {})
        paths = [r["path"] for r in res.get("results", []) if isinstance(r, dict) and r.get("path")]
        paths += [res[k] for k in ("dest", "path") if isinstance(res.get(k), str)]
        for path in paths:
            seen += 1
            if not _covered(path, spec):
                missing.add(f"{host} {role}: {path} ({task})")
        unit = res.get("name")
        if data.get("task_action", "").endswith("systemd_service") and isinstance(unit, str):
            seen += 1
            if unit not in spec.get("units", []):
                missing.add(f"{host} {role}: unit {unit} ({task})")
    assert seen > 50, f"only {seen} paths and units seen in the first deploy's events"
    assert sorted(missing) == []


FINGERPRINTS = "/var/lib/vigil/fingerprints.json"


def test_a_rerun_ends_every_role_at_its_fingerprint_and_puts_back_each_drift(
    lab: Any, stack: DeployedStack, measured: Any
) -> None:
    """A rerun that changes nothing: every role on every host ends after one round trip (issue's goal:
    seconds per host). Then three kinds of drift, each on one host: a file edited (gpu01, the
    node_exporter's web configuration), a unit disabled (ctl01, the Slurm exporter), a package removed
    (gpu02, rsyslog-gnutls of the audit role): a plain rerun finds each in that role alone, puts it
    back, and every other role on every host still ends at its fingerprint."""
    t0 = time.monotonic()
    run = stack.vigil.json("deploy", "-i", str(lab.inventory), "--json")
    measured("lab: rerun of the unchanged stack (fingerprints)", time.monotonic() - t0)
    assert run["ok"] is True and {h: c["changed"] for h, c in run["hosts"].items()} == dict.fromkeys(
        ("ctl01", "gpu01", "gpu02", "mon01"), 0
    ), run["hosts"]
    checks = fingerprint_checks(run["run_dir"])
    assert sorted(checks) == ["ctl01", "gpu01", "gpu02", "mon01"]
    assert len(checks["mon01"]) >= 10, checks["mon01"]
    assert {
        f"{h} {r}: {why}" for h, roles in checks.items() for r, why in roles.items() if why != "match"
    } == set()

    web = "/etc/vigil/node_exporter/web.yml"
    lab.ssh("gpu01", f"echo '# edited by hand' >> {web}")
    lab.ssh("ctl01", "systemctl disable vigil-slurm-exporter.service")
    lab.ssh("gpu02", "dpkg --remove rsyslog-gnutls")
    run = stack.vigil.json("deploy", "-i", str(lab.inventory), "--json")
    assert run["ok"] is True, run
    checks = fingerprint_checks(run["run_dir"])
    differs = {f"{h} {r}" for h, roles in checks.items() for r, why in roles.items() if why != "match"}
    assert differs == {"gpu01 node_exporter", "ctl01 slurm_exporter", "gpu02 audit"}, checks
    assert checks["gpu01"]["node_exporter"].startswith(f"tree {web}:"), checks["gpu01"]
    assert checks["ctl01"]["slurm_exporter"].startswith("unit vigil-slurm-exporter.service: enabled"), checks
    assert checks["gpu02"]["audit"].startswith("package rsyslog-gnutls:"), checks["gpu02"]
    assert {h: c["changed"] > 0 for h, c in run["hosts"].items()} == {
        "ctl01": True,
        "gpu01": True,
        "gpu02": True,
        "mon01": False,
    }, run["hosts"]
    assert "# edited by hand" not in lab.ssh("gpu01", f"cat {web}").stdout
    assert lab.ssh("ctl01", "systemctl is-enabled vigil-slurm-exporter.service").stdout.strip() == "enabled"
    assert (
        " ii" in lab.ssh("gpu02", "dpkg-query -W -f '${Version} ${db:Status-Abbrev}' rsyslog-gnutls").stdout
    )
    run = stack.vigil.json("deploy", "-i", str(lab.inventory), "--json")
    checks = fingerprint_checks(run["run_dir"])
    assert {f"{h} {r}" for h, roles in checks.items() for r, why in roles.items() if why != "match"} == set()


def test_no_host_has_a_route_out_of_the_lab(lab: Any, stack: DeployedStack) -> None:
    for host in lab.hosts:
        res = lab.ssh(host, "ip route get 192.0.2.1", check=False)
        assert res.returncode != 0 and "Network is unreachable" in res.stderr, (host, res.stdout, res.stderr)


def test_deploy_is_audited(stack: DeployedStack) -> None:
    stack.vigil("audit", "verify")
    log = Path(stack.home, "audit", "log.jsonl").read_text().splitlines()
    deploys = [json.loads(line) for line in log if '"action":"deploy"' in line]
    assert len(deploys) >= 1 and deploys[0]["outcome"] == "ok"
    assert deploys[0]["details"]["bundle_version"] == 1
    tls = deploys[0]["details"]["tls"]
    assert tls["ca_made"] is True and sorted(tls["issued"]) == ["ctl01", "gpu01", "gpu02", "mon01"], tls


def test_deleting_series_needs_the_key_the_controller_keeps(lab: Any, stack: DeployedStack) -> None:
    """Issue 11: anyone on the cluster network could delete series. Now the delete API wants the key
    generated on the controller (0600), which reaches VictoriaMetrics through a root-only environment
    file, never its command line."""
    import urllib.error
    import urllib.parse
    import urllib.request

    key_file = stack.home / "secrets" / "victoriametrics-delete-auth-key-mon01"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    key = key_file.read_text().strip()
    opener = labhttp.opener()  # the API login: the key is asked for on top of it

    def delete(auth: str | None) -> int:
        form = {"match[]": '{__name__="vigil_test_never_written"}', **({"authKey": auth} if auth else {})}
        req = urllib.request.Request(  # noqa: S310 - VM is the lab's https://198.18.0.10:8428
            f"{VM}/api/v1/admin/tsdb/delete_series", data=urllib.parse.urlencode(form).encode()
        )
        try:
            with opener.open(req, timeout=20) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    assert delete(None) >= 400
    assert delete("not-the-key") >= 400
    assert delete(key) == 204
    env_file = lab.ssh("mon01", "stat -c '%U %a' /etc/vigil/victoriametrics/secrets.env").stdout.strip()
    assert env_file == "root 600"
    cmdline = lab.ssh("mon01", "systemctl show -p ExecStart vigil-victoriametrics").stdout
    assert key not in cmdline and "-envflag.enable" in cmdline
