"""``vigil demo``: the main job end to end, in a work directory of its own.

A fresh demo signing key and trust root; a real bundle built from the ``debian`` channel
(Debian's VictoriaMetrics, vmalert, Alertmanager, node_exporter, vigil's own wheels and
Ansible content), verified, inspected and imported into the demo's own state root; the lab
brought up (four systemd hosts, air-gapped) and the stack deployed onto it from the bundle;
every scrape target checked up; a Slurm job whose GPU then overheats, and the alert that reaches
Alertmanager naming the job, its user and account; the audit trail of all of it verified. Every
step is a real ``vigil`` command, recorded as such.
"""

from __future__ import annotations

import argparse
import contextlib
import html.parser
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.basics.errors import VigilError
from vigil.bundle.store import BundleStore
from vigil.installer.cli._output import say
from vigil.installer.lab.hosts import HOSTS, host_by_name
from vigil.installer.ops import (
    Invocation,
    Replicas,
    SiteAccess,
    StackError,
    alert_who,
    curl_options,
    failure_reason,
    login_hint,
    site_access,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="run the main job end to end in a demo directory",
        description="Generate a demo signing key and trust root, build a signed bundle from the debian "
        "channel, verify, inspect and import it, bring the lab up, deploy the stack on it, run a GPU job, "
        "inject a thermal fault on its GPU and show the alert Alertmanager receives, and verify the audit "
        "trail. Everything lives under WORKDIR (state in WORKDIR/home); running it again builds the next "
        "bundle version.",
    )
    p.add_argument("--workdir", type=Path, default=Path("demo"), help="demo directory (default ./demo)")
    p.add_argument("--channel", default="debian", help="channel to build (default debian)")
    p.add_argument("--no-lab", action="store_true", help="stop after the import (no lab, no deploy)")
    p.add_argument(
        "--upgrade",
        metavar="CHANNEL",
        help="after a demo has deployed the lab: build the next bundle from CHANNEL (e.g. debian-next), "
        "import it, show the upgrade's plan, upgrade the lab and show each host's status",
    )
    p.set_defaults(func=_demo, action="demo")


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _run(home: Path, *args: str, capture: bool = False) -> str:
    """Run one vigil command as the demo's step; with CAPTURE, returns what it printed (also shown)."""
    from vigil.installer.cli import main

    print(f"$ vigil {' '.join(args)}", flush=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out) if capture else contextlib.nullcontext():
        rc = main(["--home", str(home), *args])
    print(out.getvalue(), end="", flush=True)
    if rc != 0:
        raise VigilError("demo", f"step `vigil {' '.join(args)}` failed (exit {rc})")
    return out.getvalue()


def _build(home: Path, channel: str, version: int, key: Path, out: Path) -> Path:
    """`vigil bundle build` of CHANNEL as VERSION, signed with the demo key; the bundle's path."""
    build = ["--channel", channel, "--version", str(version), "--key", f"{key}.key", "--out", str(out)]
    _run(home, "bundle", "build", *build)
    return out / f"vigil-{version}-amd64.bundle"


def _demo(args: argparse.Namespace, inv: Invocation) -> int:
    from vigil.installer.ops import installed_trust_path

    work: Path = args.workdir.resolve()
    home = work / "home"
    work.mkdir(parents=True, exist_ok=True)
    inv.home = home  # the demo's own record goes to the demo's log
    inv.object = str(work)
    keys = work / "keys"
    keys.mkdir(exist_ok=True)
    key = keys / "demo"
    trust = work / "trust.json"
    version = BundleStore(home).highest() + 1
    out = work / "out"
    if args.upgrade:
        return _demo_upgrade(args.upgrade, home, key, version, out, inv)

    if installed_trust_path(home).is_file() and key.with_suffix(".key").is_file():
        _step("1. the demo signing key and trust root, installed by the first demo run")
        _run(home, "trust", "show")
    else:
        _step("1. a demo signing key, a trust root that accepts it (1 of 1), checked and installed")
        _run(home, "keys", "generate", "--out", str(key))
        _run(home, "trust", "init", "--key", f"{key}.pub", "--threshold", "1", "--out", str(trust))
        # as an operator would: compare the key id with the one the release team announced, then install
        _run(home, "keys", "show", f"{key}.pub")
        _run(home, "trust", "show", str(trust))
        _run(home, "trust", "install", str(trust))

    _step(
        f"2. build bundle version {version} from the '{args.channel}' channel (fetch, verify upstream, sign)"
    )
    bundle = _build(home, args.channel, version, key, out)

    _step("3. verify it as the air-gapped admin host would: signatures, threshold, every byte")
    _run(home, "bundle", "verify", str(bundle))

    _step("4. inspect it: components, versions, licences, signers, SBOM")
    _run(home, "bundle", "inspect", str(bundle))

    _step("5. import it into the store (staged, then renamed; rollback-protected)")
    _run(home, "bundle", "import", str(bundle))

    alert: dict[str, Any] | None = None
    if not args.no_lab:
        _step("6. the lab: four Debian 12 hosts under systemd-nspawn on 198.18.0.0/24, no route out")
        _run(home, "lab", "up", "--inventory", str(INVENTORY))
        _step("7. deploy the stack from the imported bundle (its own signed roles) with Ansible")
        _run(home, "deploy", "--inventory", str(INVENTORY))
        # the deploy made the site CA and the API login: from here on the services answer over TLS
        access = site_access(home)
        _step("8. every scrape target up, as VictoriaMetrics on mon01 sees it")
        up = _wait_all_up(access)
        for (job, instance), value in sorted(up.items()):
            say(f'  up{{job="{job}", instance="{instance}"}} = {value}')
        _step("9. a GPU fault end to end: a Slurm job on gpu01, its GPU 0 overheats, Alertmanager is told")
        alert = _fault_to_alert(home, access)
        month = datetime.now(UTC).strftime("%Y-%m")
        _step(f"10. this month's GPU usage per account and user, signed for the auditors ({month})")
        _run(home, "report", "usage", "--period", month)

    _step("11. the audit trail of everything above, hash-chained and signed")
    _run(home, "audit", "show")
    _run(home, "audit", "verify")

    inv.details.update(version=version, bundle=str(bundle), lab=not args.no_lab)
    print(f"\nOK: demo: bundle {bundle} built, verified and imported; state in {home}")
    if alert is not None:
        say(f"  the alert: {_describe(alert)}")
        _print_addresses(home, site_access(home))
    _print_next(home, bundle, lab=not args.no_lab)
    return 0


def _demo_upgrade(channel: str, home: Path, key: Path, version: int, out: Path, inv: Invocation) -> int:
    """`make demo-upgrade`: the lab a demo deployed, moved to the next bundle as an operator would."""
    if not key.with_suffix(".key").is_file() or BundleStore(home).highest() == 0:
        raise VigilError("demo --upgrade", "no demo to upgrade here: run `make demo` first")
    _step(f"1. build bundle version {version} from the '{channel}' channel, signed with the demo key")
    bundle = _build(home, channel, version, key, out)
    _step("2. verify and import it")
    _run(home, "bundle", "import", str(bundle))
    _step("3. what runs now, per host")
    _run(home, "status", "--inventory", str(INVENTORY))
    _step("4. the upgrade's plan: per host and component, old -> new; nothing changes yet")
    _run(home, "upgrade", "--inventory", str(INVENTORY), "--to", str(version), "--check")
    _step("5. upgrade: the nodes, then the services on mon01, VictoriaMetrics last, each step health-checked")
    _run(home, "upgrade", "--inventory", str(INVENTORY), "--to", str(version))
    _step("6. what runs now")
    _run(home, "status", "--inventory", str(INVENTORY))
    inv.details.update(version=version, bundle=str(bundle), upgrade=channel)
    print(
        f"\nOK: demo: the lab upgraded to bundle {version} ({channel}). To go back (VictoriaMetrics "
        "stays, an older one cannot read its data):\n"
        f"  VIGIL_HOME={home} {_vigil_path()} rollback --inventory {INVENTORY} --keep-store"
    )
    return 0


#: where `vigil lab up` writes the lab's inventory by default, and so where the demo puts it
INVENTORY = Path("inventories/lab")


def next_commands(home: Path, bundle: Path, *, lab: bool) -> list[str]:
    """The operator commands that work on the demo's state once it has run (printed, and tested)."""
    cmds = [
        "trust show",
        f"bundle verify {bundle}",
        f"bundle inspect {bundle}",
        "audit verify",
    ]
    if lab:
        cmds += [
            "lab status",
            f"deploy --inventory {INVENTORY} --check",
            "lab job --account physics --gpus 2 --seconds 120",
            "report list",
        ]
    return cmds


def _vigil_path() -> str:
    """How to call this vigil: the executable beside this Python (a venv's bin/) when it is there."""
    import os
    import shutil
    import sys

    beside = Path(sys.executable).parent / "vigil"
    if beside.is_file() and os.access(beside, os.X_OK):
        found = shutil.which("vigil")
        if found and Path(found).resolve() == beside.resolve():
            return "vigil"
        with contextlib.suppress(ValueError):
            return str(beside.relative_to(Path.cwd()))
        return str(beside)
    return "vigil"


def _print_next(home: Path, bundle: Path, *, lab: bool) -> None:
    import shlex

    vigil = _vigil_path()
    print("\nNext, on this demo's state (its trust root is installed there):")
    print(f"  export VIGIL_HOME={shlex.quote(str(home))}")
    for cmd in next_commands(home, bundle, lab=lab):
        print(f"  {vigil} {cmd}")
    if lab:
        print(f"  {vigil} tui --screen overview      # the cluster's panels and alerts, in the terminal")
        print(f"  {vigil} lab down                   # when you are done")


_MON = host_by_name("mon01").ip
GRAFANA_URL = f"http://{_MON}:3000"
#: the most bytes the demo reads of one API answer
_MAX_ANSWER = 8 << 20


def vm_url(access: SiteAccess) -> str:
    """VictoriaMetrics on the lab's mon01, in the site's scheme (https once deployed with TLS)."""
    return access.url(_MON, 8428)


def am_url(access: SiteAccess) -> str:
    return access.url(_MON, 9093)


def vmalert_url(access: SiteAccess) -> str:
    return access.url(_MON, 8880)


def web_uis(access: SiteAccess) -> tuple[tuple[str, str], ...]:
    """The web UIs a channel may bring; each is printed only once it has answered, assets included."""
    return (
        ("Grafana", f"{GRAFANA_URL}/login"),
        ("VictoriaMetrics UI", f"{vm_url(access)}/vmui/"),
        ("vmalert", f"{vmalert_url(access)}/vmalert/groups"),
        ("Alertmanager UI", f"{am_url(access)}/"),
    )


def apis(access: SiteAccess) -> tuple[tuple[str, str, str], ...]:
    """The APIs every channel has: (what, URL, how to read the answer)."""
    vm = vm_url(access)
    return (
        ("every target up", f"{vm}/api/v1/query?query=min(up)", "(1 = all up)"),
        ("scrape targets", f"{vm}/targets", ""),
        ("alert rules", f"{vmalert_url(access)}/api/v1/rules", ""),
        ("alerts now", f"{am_url(access)}/api/v2/alerts", ""),
    )


class _Assets(html.parser.HTMLParser):
    """The stylesheets and scripts a page loads (what makes a UI look broken when they are missing)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "link" and "stylesheet" in (a.get("rel") or "").split() and a.get("href"):
            self.urls.append(str(a["href"]))
        elif tag == "script" and a.get("src"):
            self.urls.append(str(a["src"]))


def check_address(url: str, *, timeout: float = 5, access: SiteAccess | None = None) -> str | None:
    """None when URL answers 200 and so does every stylesheet and script its page loads from the same
    server (read with ACCESS: the site CA and login; default plain); else the reason, e.g.
    ``404 Not Found`` or ``404 Not Found for /static/app.css``."""
    import urllib.error
    import urllib.parse

    opener = (access or SiteAccess()).opener()

    def get(u: str) -> tuple[str, bytes]:
        with opener.open(u, timeout=timeout) as resp:
            return resp.headers.get_content_type(), resp.read(4 << 20)

    try:
        kind, body = get(url)
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.reason}"
    except (OSError, ValueError) as exc:
        return f"no answer ({failure_reason(exc)})"
    if kind != "text/html":
        return None
    assets = _Assets()
    assets.feed(body.decode("utf-8", "replace"))
    base = urllib.parse.urlsplit(url)
    for ref in assets.urls:
        full = urllib.parse.urljoin(url, ref)
        if urllib.parse.urlsplit(full).netloc != base.netloc:
            continue  # another server's: not this UI's to answer for (and not reachable in the air gap)
        try:
            get(full)
        except urllib.error.HTTPError as exc:
            return f"{exc.code} {exc.reason} for {urllib.parse.urlsplit(full).path}"
        except (OSError, ValueError) as exc:
            return f"no answer for {urllib.parse.urlsplit(full).path} ({failure_reason(exc)})"
    return None


def address_lines(home: Path, access: SiteAccess, check: Callable[[str], str | None]) -> list[str]:
    """What the demo prints of the lab's monitoring services: the web UIs that answer (CHECK gives
    None), the ones that do not and why, how to log in when the site has TLS (the password's file,
    never the password), and the API queries that answer, as curl commands."""
    lines: list[str] = []
    broken: list[str] = []
    for name, url in web_uis(access):
        why = check(url)
        if why is None:
            lines.append(f"  {name + ':':20} {url}")
        elif not why.startswith("no answer") or name != "Grafana":
            broken.append(f"{name}: {why}")
    hint = login_hint(home, access)
    if hint:
        lines.append(f"  VictoriaMetrics, vmalert and Alertmanager: {hint}")
    if broken:
        lines.append("  web UIs this channel's builds do not serve (see 'Web UIs' in the README):")
        lines += [f"    {b}" for b in broken]
    lines.append("  what answers from a shell:")
    options = curl_options(home, access)
    curl = f"curl -s {options} " if options else "curl -s "
    for what, url, note in apis(access):
        if check(url) is None:
            lines.append(f"    {what + ':':17} {curl}'{url}'{'   ' + note if note else ''}")
    return lines


def _print_addresses(home: Path, access: SiteAccess) -> None:
    """The web UIs that answer, the ones that do not (and why), and the API queries, all checked."""
    for line in address_lines(home, access, lambda url: check_address(url, access=access)):
        print(line)


#: the demo's fault: thermal runaway on GPU 0 of gpu01, under a job of alice's in account physics
FAULT_HOST, FAULT_GPU, FAULT_ALERT = "gpu01", "0", "GpuTemperatureCritical"


def _get_json(base: str, path: str, access: SiteAccess, **params: str) -> Any:
    """PATH?PARAMS of the lab's service at BASE, read through the stack's client (the site CA and
    login, no proxy, a bounded answer)."""
    import json
    import urllib.parse

    if urllib.parse.urlsplit(base).hostname not in {h.ip for h in HOSTS}:  # the lab's hosts only
        raise VigilError(base, "not a lab address")
    client = Replicas(base, service="demo", access=access, timeout=5, max_bytes=_MAX_ANSWER)
    return json.loads(client.get(path, list(params.items())).body)


def _poll(what: str, check: Callable[[], Any], timeout: float, every: float = 3) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except (OSError, ValueError, KeyError, TypeError, StackError):
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise VigilError("demo", f"no {what} after {int(timeout)} s")
        time.sleep(every)


def _describe(alert: dict[str, Any]) -> str:
    lab = alert["labels"]
    state = alert["status"]["state"]
    who = alert_who(alert)
    job = (
        f", job {who['hpc_job']} (user {who['user'] or '?'}, account {who['account'] or '?'})"
        if who["hpc_job"]
        else ""
    )
    where = f"{lab.get('instance')} GPU {lab.get('gpu')}"
    return f"{lab['alertname']} [{lab.get('severity', '?')}, {state}] {where}{job}"


def _fault_to_alert(home: Path, access: SiteAccess) -> dict[str, Any]:
    """Run a job on gpu01, overheat its GPU 0, wait for the alert at Alertmanager, then undo both."""
    from vigil.installer.lab import LabPaths
    from vigil.installer.lab.jobs import cancel

    job = _run(
        home,
        "lab",
        "job",
        "--account",
        "physics",
        "--user",
        "alice",
        "--gpus",
        "4",
        "--seconds",
        "600",
        "--node",
        FAULT_HOST,
        capture=True,
    )
    placed = re.search(r"^OK: job ([0-9]+):", job, re.MULTILINE)
    if placed is None:
        raise VigilError("demo", f"`vigil lab job` printed no job id: {job.strip()!r}")
    job = placed.group(1)
    injected = False
    try:
        sel = f'DCGM_FI_DEV_GPU_TEMP{{instance="{FAULT_HOST}",gpu="{FAULT_GPU}",hpc_job="{job}"}}'
        _poll(
            f"GPU {FAULT_GPU} of {FAULT_HOST} tagged with job {job}",
            lambda: _get_json(vm_url(access), "/api/v1/query", access, query=sel)["data"]["result"],
            120,
        )
        print(f'  job {job} runs on {FAULT_HOST}; its GPUs\' samples carry hpc_job="{job}"')
        _run(home, "lab", "fault", "thermal", FAULT_HOST, FAULT_GPU)
        injected = True
        print(
            f"  waiting for {FAULT_ALERT} at Alertmanager ({am_url(access)}); the temperature ramps 1 °C/s",
            flush=True,
        )

        def mine() -> list[dict[str, Any]]:
            return [
                a
                for a in _get_json(am_url(access), "/api/v2/alerts", access)
                if a["labels"].get("instance") == FAULT_HOST and a["labels"].get("gpu") == FAULT_GPU
            ]

        def critical() -> dict[str, Any] | None:
            return next(
                (
                    a
                    for a in mine()
                    if a["labels"]["alertname"] == FAULT_ALERT
                    and job in alert_who(a)["hpc_job"].split(", ")
                    and a["status"]["state"] == "active"
                ),
                None,
            )

        alert: dict[str, Any] = _poll(f"{FAULT_ALERT} for job {job} at Alertmanager", critical, 300)
        for a in sorted(mine(), key=lambda a: a["labels"]["alertname"]):
            say(f"  {_describe(a)}")  # alert labels: an account is what a Slurm user typed
            if a["status"]["inhibitedBy"]:
                print("      held back by the critical one (inhibition: one page, not two)")
        say(f"      summary: {alert['annotations'].get('summary', '')}")
        say(f"      runbook: {alert['annotations'].get('runbook_url', '')}")
        return alert
    finally:
        if injected:
            _run(home, "lab", "fault", "thermal", FAULT_HOST, FAULT_GPU, "--clear")
        cancel(LabPaths.from_env(), [job])
        print(f"  fault cleared and job {job} cancelled; the alert resolves at the next evaluations")


def _wait_all_up(access: SiteAccess, timeout: float = 120) -> dict[tuple[str, str], str]:
    """Poll VictoriaMetrics until every target reports up == 1 (or the time runs out)."""
    import time

    deadline = time.monotonic() + timeout
    up: dict[tuple[str, str], str] = {}
    while time.monotonic() < deadline:
        try:
            result = _get_json(vm_url(access), "/api/v1/query", access, query="up")["data"]["result"]
            up = {
                (r["metric"].get("job", ""), r["metric"].get("instance", "")): r["value"][1] for r in result
            }
        except (OSError, ValueError, KeyError, StackError):
            up = {}
        if up and all(v == "1" for v in up.values()) and len({j for j, _ in up}) >= 4:
            return up
        time.sleep(3)
    down = [f"{job} {instance}" for (job, instance), v in sorted(up.items()) if v != "1"] or [
        "(no targets yet)"
    ]
    raise VigilError("demo", f"targets not up after {int(timeout)} s: {down}")
