#!/usr/bin/env python3
"""The stack's own capacity on a simulated fleet: ingest, active series, rule evaluation, the console.

For each size in --gpus (GPUs; --gpus-per-node to a node), on this machine:

1. ``vigil-fleetsim`` serves the fleet over HTTPS with Basic auth (a fresh self-signed certificate
   and password), as the exporters are served on real nodes;
2. VictoriaMetrics (the bundle's binary) scrapes it every --scrape-interval, each node and exporter a
   target of its own, the jobs and ``instance`` labels as the victoriametrics role writes them;
3. vmalert (the bundle's binary) evaluates every rule file the vmalert role deploys, writing back to
   that VictoriaMetrics;
4. after --minutes, over the last --window seconds: samples scraped per second (from VictoriaMetrics'
   own ``vm_rows_inserted_total``), active series (``vm_cache_entries{type="storage/hour_metric_ids"}``),
   each rule group's evaluation time (vmalert's ``vmalert_iteration_duration_seconds``: mean and
   largest), the CPU seconds each process used per second (from /proc), on-disk bytes per sample
   (``vm_data_size_bytes`` over ``vm_rows``: an upper bound, the young parts are merged less), and
   the console Overview's queries (the same functions the Home screen calls), median of --rounds;
5. everything stops; the next size starts from an empty store.

The smallest size is the baseline: each figure is also given as a ratio to it, measured in the same
run. The goals of the issue at 4,096 GPUs: every rule group evaluates within its interval and the
Overview's queries answer in under 2 s.

    python benchmarks/fleet.py [--gpus 64,512,4096] [--minutes 6] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vigil.tui import overview  # noqa: E402

RULES = ROOT / "roles" / "vmalert" / "files" / "rules"


def find(binary: str, given: str | None) -> Path:
    candidates = [Path(given)] if given else []
    files = os.environ.get("VIGIL_BUNDLE_FILES")
    if files:
        candidates.append(Path(files) / "components" / "victoria-metrics" / "bin" / binary)
    candidates.append(ROOT / "demo/home/bundles/1/files/components/victoria-metrics/bin" / binary)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    sys.exit(
        f"FAIL: no {binary} binary (give --vm-binary/--vmalert-binary or VIGIL_BUNDLE_FILES=<bundle>/files)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """ARGV started with its output to LOG (the child keeps its own descriptor)."""
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def get(url: str, timeout: float = 30) -> bytes:
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - our own services on 127.0.0.1
        return bytes(resp.read())


def wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            get(url, timeout=2)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.2)


def metrics(url: str) -> dict[str, float]:
    """A /metrics page as {series text: value} (summed where a series appears twice)."""
    out: dict[str, float] = {}
    for line in get(url).decode().splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return out


def pick(page: dict[str, float], pattern: str) -> dict[str, float]:
    rx = re.compile(pattern)
    return {k: v for k, v in page.items() if rx.fullmatch(k)}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tls_files(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "fleet.crt", tmp / "fleet.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=fleet",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def one_size(args: argparse.Namespace, gpus: int, vm_bin: Path, vmalert_bin: Path) -> dict[str, Any]:
    nodes = max(1, gpus // args.gpus_per_node)
    tmp = Path(tempfile.mkdtemp(prefix=f"vigil-bench-fleet-{gpus}-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        cert, key = tls_files(tmp)
        password = secrets.token_hex(16)
        (tmp / "auth").write_text(f"vigil:sha256:{hashlib.sha256(password.encode()).hexdigest()}\n")
        (tmp / "password").write_text(password)
        fport, vport, aport = free_port(), free_port(), free_port()
        shape = ["--nodes", str(nodes), "--gpus-per-node", str(args.gpus_per_node)]
        flog = tmp / "fleet.log"
        fleet = launch(
            [
                sys.executable,
                "-m",
                "vigil.exporters.fleetsim",
                *shape,
                "--cpus-per-node",
                str(args.cpus_per_node),
                "-a",
                f"127.0.0.1:{fport}",
                "--tls-cert-file",
                str(cert),
                "--tls-key-file",
                str(key),
                "--basic-auth-file",
                str(tmp / "auth"),
            ],
            flog,
        )
        procs.append(fleet)
        config = subprocess.run(
            [
                sys.executable,
                "-m",
                "vigil.exporters.fleetsim",
                "scrape-config",
                *shape,
                "--target",
                f"127.0.0.1:{fport}",
                "--ca-file",
                str(cert),
                "--username",
                "vigil",
                "--password-file",
                str(tmp / "password"),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        doc = json.loads(config)
        doc["global"] = {
            "scrape_interval": f"{args.scrape_interval}s",
            "scrape_timeout": f"{args.scrape_interval}s",
        }
        (tmp / "scrape.yml").write_text(json.dumps(doc))
        vlog = tmp / "vm.log"
        vm = launch(
            [
                str(vm_bin),
                f"-storageDataPath={tmp / 'data'}",
                f"-httpListenAddr=127.0.0.1:{vport}",
                f"-promscrape.config={tmp / 'scrape.yml'}",
                "-retentionPeriod=1y",
                "-loggerLevel=WARN",
            ],
            vlog,
        )
        procs.append(vm)
        vm_url = f"http://127.0.0.1:{vport}"
        wait_up(f"{vm_url}/health", vm, vlog, "VictoriaMetrics")
        alog = tmp / "vmalert.log"
        vmalert = launch(
            [
                str(vmalert_bin),
                f"-rule={RULES}/*.yml",
                f"-datasource.url={vm_url}",
                f"-remoteWrite.url={vm_url}",
                f"-remoteRead.url={vm_url}",
                "-notifier.url=http://127.0.0.1:9",
                f"-httpListenAddr=127.0.0.1:{aport}",
                "-loggerLevel=WARN",
            ],
            alog,
        )
        procs.append(vmalert)
        alert_url = f"http://127.0.0.1:{aport}"
        wait_up(f"{alert_url}/health", vmalert, alog, "vmalert")
        start = time.monotonic()
        time.sleep(max(0.0, args.minutes * 60 - args.window))
        # the window: counters and CPU at its two ends
        before = metrics(f"{vm_url}/metrics"), {p.pid: cpu_seconds(p.pid) for p in procs}, time.monotonic()
        time.sleep(args.window)
        vm_page = metrics(f"{vm_url}/metrics")
        cpu_after = {p.pid: cpu_seconds(p.pid) for p in procs}
        elapsed = time.monotonic() - before[2]
        rows = sum(pick(vm_page, r"vm_rows_inserted_total\{.*\}").values()) - sum(
            pick(before[0], r"vm_rows_inserted_total\{.*\}").values()
        )
        scraped = sum(pick(vm_page, r"vm_promscrape_scraped_samples_sum").values()) - sum(
            pick(before[0], r"vm_promscrape_scraped_samples_sum").values()
        )
        active = sum(pick(vm_page, r'vm_cache_entries\{type="storage/hour_metric_ids"\}').values())
        size = sum(pick(vm_page, r'vm_data_size_bytes\{type="(storage|indexdb)/.*"\}').values())
        stored = sum(pick(vm_page, r'vm_rows\{type="storage/.*"\}').values())
        # the rule groups
        groups: dict[str, dict[str, float]] = {}
        page = get(f"{alert_url}/metrics").decode()
        for line in page.splitlines():
            m = re.match(
                r'vmalert_iteration_duration_seconds_(sum|count)\{.*group="([^"]+)".*\} (\S+)$', line
            )
            if m:
                groups.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))
            m = re.match(
                r'vmalert_iteration_duration_seconds\{.*group="([^"]+)".*quantile="0.99".*\} (\S+)$', line
            )
            if m:
                groups.setdefault(m.group(1), {})["p99"] = float(m.group(2))
        api = json.loads(get(f"{alert_url}/api/v1/rules"))
        intervals = {g["name"]: float(g.get("interval", 0)) for g in api["data"]["groups"]}
        rule_groups = {
            name: {
                "interval_s": intervals.get(name, 0.0),
                "mean_s": round(v.get("sum", 0.0) / v["count"], 3) if v.get("count") else None,
                "p99_s": round(v["p99"], 3) if "p99" in v else None,
                "evaluations": int(v.get("count", 0)),
            }
            for name, v in sorted(groups.items())
        }
        up = json.loads(get(f"{vm_url}/api/v1/query?query=" + urllib.request.quote("count(up == 1)")))
        targets_up = int(float(up["data"]["result"][0]["value"][1])) if up["data"]["result"] else 0
        # the console's Overview: the reads of the Home screen
        client = overview.replicas(vm_url, service="VictoriaMetrics")
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            overview.fetch_panels(client)
            overview.fetch_utilisation(client, now=time.time())
            overview.fetch_energy(client, seconds_today=int(time.time() % 86400))
            times.append(time.perf_counter() - t0)
        return {
            "gpus": nodes * args.gpus_per_node,
            "nodes": nodes,
            "targets": 2 * nodes + 1,
            "targets_up": targets_up,
            "minutes": round((time.monotonic() - start) / 60, 1),
            "samples_per_s": round(rows / elapsed, 1),
            "scraped_samples_per_s": round(scraped / elapsed, 1),
            "active_series": int(active),
            "bytes_per_sample": round(size / stored, 3) if stored else None,
            "cpu_cores": {
                name: round((cpu_after[p.pid] - before[1][p.pid]) / elapsed, 3)
                for name, p in (("fleetsim", fleet), ("victoriametrics", vm), ("vmalert", vmalert))
            },
            "rule_groups": rule_groups,
            "overview_s": round(statistics.median(times), 3),
            "overview_max_s": round(max(times), 3),
        }
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _labelled(line: str, extra: str, ms: int, noise: random.Random | None) -> str:
    """A sample line of a page with EXTRA labels (`instance="x",job="y"`) and a timestamp; with NOISE,
    the value jittered by up to 0.1 % and printed with 6 significant digits (0 stays 0)."""
    head, _, value = line.rpartition(" ")
    if noise is not None:
        value = f"{float(value) * (1 + noise.uniform(-1e-3, 1e-3)):.6g}"
    if head.endswith("}"):
        name, _, rest = head.partition("{")
        return f"{name}{{{extra},{rest} {value} {ms}"
    return f"{head}{{{extra}}} {value} {ms}"


def disk_phase(args: argparse.Namespace, vm_bin: Path, noisy: bool) -> dict[str, Any]:
    """Bytes per sample on disk for the fleet's own series: --disk-hours of --disk-nodes nodes at the
    scrape interval, imported with their timestamps, then merged as VictoriaMetrics merges old data.
    NOISY: every value jittered (see _labelled), a pessimistic stand-in for real measurements, which
    vary more from scrape to scrape than the simulator's."""
    noise = random.Random(1) if noisy else None  # noqa: S311 - test data
    from vigil.exporters.fleetsim.fleet import Fleet, path

    now = time.time()
    t = [now - args.disk_hours * 3600]
    fleet = Fleet(
        nodes=args.disk_nodes,
        gpus=args.gpus_per_node,
        cpus=args.cpus_per_node,
        wall=lambda: t[0],
        clock=lambda: t[0],
    )
    pages = [
        (page, f'instance="{name}",job="{exporter}"')
        for name in fleet.names
        for exporter in ("node_exporter", "dcgm_exporter")
        for p, page in fleet.pages().items()
        if p == path(name, exporter)
    ]
    tmp = Path(tempfile.mkdtemp(prefix="vigil-bench-fleet-disk-"))
    vport = free_port()
    vm = launch(
        [
            str(vm_bin),
            f"-storageDataPath={tmp / 'data'}",
            f"-httpListenAddr=127.0.0.1:{vport}",
            "-retentionPeriod=1y",
            "-loggerLevel=WARN",
        ],
        tmp / "vm.log",
    )
    url = f"http://127.0.0.1:{vport}"
    try:
        wait_up(f"{url}/health", vm, tmp / "vm.log", "VictoriaMetrics")
        samples = 0
        batch: list[str] = []
        size = 0
        while t[0] < now:
            ms = int(t[0] * 1000)
            for page, extra in pages:
                for line in page().splitlines():
                    if line and not line.startswith("#"):
                        text = _labelled(line, extra, ms, noise)
                        batch.append(text)
                        size += len(text) + 1
                        samples += 1
            if size > 16 << 20:
                post(f"{url}/api/v1/import/prometheus", "\n".join(batch) + "\n")
                batch, size = [], 0
            t[0] += args.scrape_interval
        if batch:
            post(f"{url}/api/v1/import/prometheus", "\n".join(batch) + "\n")
        get(f"{url}/internal/force_flush", timeout=300)
        get(f"{url}/internal/force_merge", timeout=300)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:  # force_merge returns before the merge ends
            page = metrics(f"{url}/metrics")
            if sum(pick(page, r"vm_active_merges\{.*\}").values()) == 0:
                break
            time.sleep(2)
        time.sleep(5)
        page = metrics(f"{url}/metrics")
        data = sum(pick(page, r'vm_data_size_bytes\{type="storage/.*"\}').values())
        index = sum(pick(page, r'vm_data_size_bytes\{type="indexdb.*"\}').values())
        rows = sum(pick(page, r'vm_rows\{type="storage/.*"\}').values())
        created = sum(pick(page, r"vm_new_timeseries_created_total").values())
        return {
            "nodes": args.disk_nodes,
            "hours": args.disk_hours,
            "values": "jittered" if noisy else "the simulator's",
            "samples_imported": samples,
            "rows_stored": int(rows),
            "data_bytes": int(data),
            "index_bytes": int(index),
            "bytes_per_sample": round((data + index) / rows, 3) if rows else None,
            "series_created": int(created),
            "data_bytes_per_sample": round(data / rows, 4) if rows else None,
            "index_bytes_per_series": round(index / created, 1) if created else None,
        }
    finally:
        vm.terminate()
        vm.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def post(url: str, body: str) -> None:
    assert url.startswith("http://127.0.0.1:")
    req = urllib.request.Request(url, data=body.encode())  # noqa: S310 - our own VictoriaMetrics
    with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - as above
        resp.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="64,512,4096", help="fleet sizes in GPUs (default: %(default)s)")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--cpus-per-node", type=int, default=64)
    ap.add_argument("--scrape-interval", type=int, default=30, help="seconds, as the role's default")
    ap.add_argument("--minutes", type=float, default=6.0, help="how long each size runs before it is read")
    ap.add_argument("--window", type=float, default=120.0, help="seconds the rates are measured over")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--vm-binary")
    ap.add_argument("--vmalert-binary")
    ap.add_argument("--json", metavar="FILE", help="write the figures here too")
    ap.add_argument(
        "--disk-hours", type=float, default=6.0, help="hours of data for bytes per sample (0: skip)"
    )
    ap.add_argument("--disk-nodes", type=int, default=4, help="nodes of data for bytes per sample")
    args = ap.parse_args()
    vm_bin, vmalert_bin = find("victoria-metrics", args.vm_binary), find("vmalert", args.vmalert_binary)
    sizes = [int(x) for x in args.gpus.split(",")]
    disks = []
    if args.disk_hours > 0:
        for noisy in (False, True):
            print(f"... bytes per sample: {args.disk_hours} h of {args.disk_nodes} nodes", file=sys.stderr)
            disks.append(disk_phase(args, vm_bin, noisy))
            print(json.dumps(disks[-1]), file=sys.stderr, flush=True)
    runs = []
    for gpus in sizes:
        print(f"... {gpus} GPUs for {args.minutes} min", file=sys.stderr, flush=True)
        runs.append(one_size(args, gpus, vm_bin, vmalert_bin))
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    base = runs[0]
    print(
        f"| GPUs | targets up | samples/s | active series | bytes/sample | CPU fleetsim / VM / vmalert | "
        f"slowest group (mean / p99 / interval) | Overview s (ratio to {base['gpus']}) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        worst = max(
            r["rule_groups"].items(), key=lambda kv: (kv[1]["p99_s"] or 0) / (kv[1]["interval_s"] or 1)
        )
        c = r["cpu_cores"]
        print(
            f"| {r['gpus']} | {r['targets_up']}/{r['targets']} | {r['samples_per_s']} | {r['active_series']} "
            f"| {r['bytes_per_sample']} | {c['fleetsim']} / {c['victoriametrics']} / {c['vmalert']} "
            f"| {worst[0]}: {worst[1]['mean_s']} / {worst[1]['p99_s']} / {worst[1]['interval_s']:g} s "
            f"| {r['overview_s']} ({r['overview_s'] / base['overview_s']:.1f}×) |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"runs": runs, "disk": disks, "args": vars(args)}, indent=1) + "\n"
        )
    for disk in disks:
        print(
            f"\nOn disk ({disk['values']} values) after {disk['hours']:g} h of {disk['nodes']} nodes, "
            "merged: "
            f"{disk['bytes_per_sample']} bytes a sample ({disk['data_bytes']} B of data and "
            f"{disk['index_bytes']} B of index for {disk['rows_stored']} samples)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
