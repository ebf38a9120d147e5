"""``vigil demo``: the main job end to end, in a work directory of its own.

A fresh demo signing key and trust root; a real bundle built from the ``debian`` channel
(Debian's VictoriaMetrics, vmalert, Alertmanager, node_exporter, vigil's own wheels and
Ansible content), verified, inspected and imported into the demo's own state root; the lab
brought up (four systemd hosts, air-gapped) and the stack deployed onto it from the bundle;
every scrape target checked up; the audit trail of all of it verified. Every step is a real
``vigil`` command, recorded as such.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from bundle.errors import VigilError
from bundle.store import BundleStore
from installer.cli._context import Context


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="run the main job end to end in a demo directory",
        description="Generate a demo signing key and trust root, build a signed bundle from the debian "
        "channel, verify, inspect and import it, and verify the audit trail. Everything lives under "
        "WORKDIR (state in WORKDIR/home); running it again builds the next bundle version.",
    )
    p.add_argument("--workdir", type=Path, default=Path("demo"), help="demo directory (default ./demo)")
    p.add_argument("--channel", default="debian", help="channel to build (default debian)")
    p.add_argument("--no-lab", action="store_true", help="stop after the import (no lab, no deploy)")
    p.set_defaults(func=_demo, action="demo")


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _run(home: Path, *args: str) -> None:
    from installer.cli import main

    print(f"$ vigil {' '.join(args)}", flush=True)
    rc = main(["--home", str(home), *args])
    sys.stdout.flush()
    if rc != 0:
        raise VigilError("demo", f"step `vigil {' '.join(args)}` failed (exit {rc})")


def _demo(args: argparse.Namespace, ctx: Context) -> int:
    work: Path = args.workdir.resolve()
    home = work / "home"
    work.mkdir(parents=True, exist_ok=True)
    ctx.home = home  # the demo's own record goes to the demo's log
    ctx.audit_object = str(work)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    keys = work / "keys"
    keys.mkdir(exist_ok=True)
    key = keys / f"demo-{stamp}"
    trust = work / f"trust-{stamp}.json"
    version = BundleStore(home).highest() + 1
    out = work / "out"

    _step("1. a fresh demo signing key and a trust root that accepts it (1 of 1)")
    _run(home, "keys", "generate", "--out", str(key))
    _run(home, "trust", "init", "--key", f"{key}.pub", "--threshold", "1", "--out", str(trust))

    _step(f"2. build bundle version {version} from the '{args.channel}' channel (fetch, verify upstream, sign)")
    _run(home, "bundle", "build", "--channel", args.channel, "--version", str(version), "--key", f"{key}.key",
         "--out", str(out))
    bundle = out / f"vigil-{version}-amd64.bundle"

    _step("3. verify it as the air-gapped admin host would: signatures, threshold, every byte")
    _run(home, "bundle", "verify", str(bundle), "--trust", str(trust))

    _step("4. inspect it: components, versions, licences, signers, SBOM")
    _run(home, "bundle", "inspect", str(bundle))

    _step("5. import it into the store (staged, then renamed; rollback-protected)")
    _run(home, "bundle", "import", str(bundle), "--trust", str(trust))

    if not args.no_lab:
        inventory = work / "inventory"
        _step("6. the lab: four Debian 12 hosts under systemd-nspawn on 198.18.0.0/24, no route out")
        _run(home, "lab", "up", "--inventory", str(inventory))
        _step("7. deploy the stack from the imported bundle (its own signed roles) with Ansible")
        _run(home, "deploy", "--inventory", str(inventory), "--trust", str(trust))
        _step("8. every scrape target up, as VictoriaMetrics on mon01 sees it")
        up = _wait_all_up()
        for (job, instance), value in sorted(up.items()):
            print(f"  up{{job=\"{job}\", instance=\"{instance}\"}} = {value}")

    _step("9. the audit trail of everything above, hash-chained and signed")
    _run(home, "audit", "show")
    _run(home, "audit", "verify")

    ctx.audit_details.update(version=version, bundle=str(bundle), lab=not args.no_lab)
    print(f"\nOK: demo: bundle {bundle} built, verified and imported; state in {home}")
    if not args.no_lab:
        print(f"  VictoriaMetrics UI:  {VM_URL}/vmui/")
        print(f"  every target up:     curl -s '{VM_URL}/api/v1/query?query=min(up)'   (1 = all up)")
        print(f"  per target:          {VM_URL}/vmui/?#/?g0.expr=up")
        print("  stop the lab with:   vigil lab down")
    return 0


VM_URL = "http://198.18.0.10:8428"


def _wait_all_up(timeout: float = 120) -> dict[tuple[str, str], str]:
    """Poll VictoriaMetrics until every target reports up == 1 (or the time runs out)."""
    import json
    import time
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # lab addresses only
    deadline = time.monotonic() + timeout
    up: dict[tuple[str, str], str] = {}
    while time.monotonic() < deadline:
        try:
            with opener.open(f"{VM_URL}/api/v1/query?query=up", timeout=5) as resp:
                result = json.loads(resp.read())["data"]["result"]
            up = {(r["metric"].get("job", ""), r["metric"].get("instance", "")): r["value"][1] for r in result}
        except (OSError, ValueError, KeyError):
            up = {}
        if up and all(v == "1" for v in up.values()) and len({j for j, _ in up}) >= 4:
            return up
        time.sleep(3)
    down = sorted(k for k, v in up.items() if v != "1") or ["(no targets yet)"]
    raise VigilError("demo", f"targets not up after {int(timeout)} s: {down}")
