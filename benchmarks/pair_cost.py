#!/usr/bin/env python3
"""What the monitoring pair costs beside one monitoring host, on the same simulated fleet, in one run.

One ``vigil-fleetsim`` of --gpus GPUs (HTTPS, Basic auth) serves both topologies in turn:

* **one host**: VictoriaMetrics scrapes every target; vmalert evaluates every rule file the vmalert
  role deploys and writes back to it (the single-host layout);
* **the pair** (docs/ha.md): on each of two "hosts" (process groups on this machine) a
  VictoriaMetrics with ``-dedup.minScrapeInterval`` at the scrape interval, a vmagent that scrapes
  every target and writes to both VictoriaMetrics with an on-disk queue per destination
  (``-promscrape.noStaleMarkers`` as the role sets it), and a vmalert reading its own
  VictoriaMetrics and writing through its own vmagent.

Each runs --minutes; over the last --window seconds, the CPU cores each process used (from /proc) and
its resident memory at the end (VmRSS), and each VictoriaMetrics' samples a second. The figures are
this machine's (2 cores, shared): the ratio of the pair's per host to one host's is the result.

    python benchmarks/pair_cost.py [--gpus 512] [--minutes 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_fleet", ROOT / "benchmarks" / "fleet.py")
assert _spec and _spec.loader
fleet = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fleet)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def measure(procs: dict[str, Any], vms: dict[str, str], window: float) -> dict[str, Any]:
    rows_before = {
        n: sum(fleet.pick(fleet.metrics(f"{u}/metrics"), r"vm_rows_inserted_total\{.*\}").values())
        for n, u in vms.items()
    }
    cpu_before = {n: fleet.cpu_seconds(p.pid) for n, p in procs.items()}
    t0 = time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - t0
    rows_after = {
        n: sum(fleet.pick(fleet.metrics(f"{u}/metrics"), r"vm_rows_inserted_total\{.*\}").values())
        for n, u in vms.items()
    }
    return {
        "cores": {
            n: round((fleet.cpu_seconds(p.pid) - cpu_before[n]) / elapsed, 3) for n, p in procs.items()
        },
        "rss_mib": {n: rss_mib(p.pid) for n, p in procs.items()},
        "samples_per_s": {n: round((rows_after[n] - rows_before[n]) / elapsed, 1) for n in vms},
    }


def stop(procs: dict[str, Any]) -> None:
    for p in procs.values():
        p.terminate()
    for p in procs.values():
        try:
            p.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a benchmark's teardown: kill what does not stop
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=512)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--scrape-interval", type=int, default=30)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--window", type=float, default=120.0)
    ap.add_argument(
        "--bin-dir", type=Path, help="the victoria-metrics component's bin/ (default: the bundle's)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    bins = args.bin_dir or fleet.find("victoria-metrics", None).parent
    vm_bin, agent_bin, alert_bin = bins / "victoria-metrics", bins / "vmagent", bins / "vmalert"
    tmp = Path(tempfile.mkdtemp(prefix="vigil-bench-pair-"))
    nodes = max(1, args.gpus // args.gpus_per_node)
    shape = ["--nodes", str(nodes), "--gpus-per-node", str(args.gpus_per_node)]
    interval = f"{args.scrape_interval}s"
    out: dict[str, Any] = {"gpus": nodes * args.gpus_per_node, "scrape_interval_s": args.scrape_interval}
    cert, key = fleet.tls_files(tmp)
    password = "pair-bench-" + str(time.time_ns())
    (tmp / "auth").write_text(f"vigil:sha256:{fleet.hashlib.sha256(password.encode()).hexdigest()}\n")
    (tmp / "password").write_text(password)
    fport = fleet.free_port()
    sim = fleet.launch(
        [sys.executable, "-m", "vigil.exporters.fleetsim", *shape, "-a", f"127.0.0.1:{fport}",
         "--tls-cert-file", str(cert), "--tls-key-file", str(key), "--basic-auth-file", str(tmp / "auth")],
        tmp / "fleet.log",
    )  # fmt: skip
    try:
        doc = json.loads(
            fleet.subprocess.run(
                [sys.executable, "-m", "vigil.exporters.fleetsim", "scrape-config", *shape, "--target",
                 f"127.0.0.1:{fport}", "--ca-file", str(cert), "--username", "vigil", "--password-file",
                 str(tmp / "password")],
                check=True, capture_output=True, text=True,
            ).stdout
        )  # fmt: skip
        doc["global"] = {"scrape_interval": interval, "scrape_timeout": interval}
        (tmp / "scrape.yml").write_text(json.dumps(doc))
        rules = f"-rule={fleet.RULES}/*.yml"

        # one host
        procs: dict[str, Any] = {}
        port = {n: fleet.free_port() for n in ("vm", "alert")}
        url = f"http://127.0.0.1:{port['vm']}"
        procs["victoriametrics"] = fleet.launch(
            [str(vm_bin), f"-storageDataPath={tmp / 'one'}", f"-httpListenAddr=127.0.0.1:{port['vm']}",
             f"-promscrape.config={tmp / 'scrape.yml'}", "-loggerLevel=WARN"],
            tmp / "one-vm.log",
        )  # fmt: skip
        fleet.wait_up(f"{url}/health", procs["victoriametrics"], tmp / "one-vm.log", "VictoriaMetrics")
        procs["vmalert"] = fleet.launch(
            [str(alert_bin), rules, f"-datasource.url={url}", f"-remoteWrite.url={url}",
             f"-remoteRead.url={url}", "-notifier.url=http://127.0.0.1:9",
             f"-httpListenAddr=127.0.0.1:{port['alert']}", "-loggerLevel=WARN"],
            tmp / "one-alert.log",
        )  # fmt: skip
        print(f"... one host, {args.minutes} min", file=sys.stderr, flush=True)
        try:
            time.sleep(max(0.0, args.minutes * 60 - args.window))
            out["one_host"] = measure(procs, {"victoriametrics": url}, args.window)
        finally:
            stop(procs)
        print(json.dumps(out["one_host"]), file=sys.stderr, flush=True)

        # the pair
        procs = {}
        hosts = ("a", "b")
        ports = {h: {n: fleet.free_port() for n in ("vm", "agent", "alert")} for h in hosts}
        urls = {h: f"http://127.0.0.1:{ports[h]['vm']}" for h in hosts}
        for h in hosts:
            procs[f"{h}/victoriametrics"] = fleet.launch(
                [str(vm_bin), f"-storageDataPath={tmp / h / 'data'}",
                 f"-httpListenAddr=127.0.0.1:{ports[h]['vm']}", f"-dedup.minScrapeInterval={interval}",
                 "-loggerLevel=WARN"],
                tmp / f"{h}-vm.log",
            )  # fmt: skip
            fleet.wait_up(
                f"{urls[h]}/health", procs[f"{h}/victoriametrics"], tmp / f"{h}-vm.log", "VictoriaMetrics"
            )
        for h in hosts:
            procs[f"{h}/vmagent"] = fleet.launch(
                [str(agent_bin), f"-httpListenAddr=127.0.0.1:{ports[h]['agent']}",
                 f"-promscrape.config={tmp / 'scrape.yml'}", "-promscrape.noStaleMarkers",
                 f"-remoteWrite.tmpDataPath={tmp / h / 'queue'}",
                 "-remoteWrite.maxDiskUsagePerURL=1073741824",
                 *(f"-remoteWrite.url={urls[o]}/api/v1/write" for o in hosts), "-loggerLevel=WARN"],
                tmp / f"{h}-agent.log",
            )  # fmt: skip
            agent = f"http://127.0.0.1:{ports[h]['agent']}"
            procs[f"{h}/vmalert"] = fleet.launch(
                [str(alert_bin), rules, f"-datasource.url={urls[h]}", f"-remoteWrite.url={agent}",
                 f"-remoteRead.url={urls[h]}", "-notifier.url=http://127.0.0.1:9",
                 f"-httpListenAddr=127.0.0.1:{ports[h]['alert']}", "-loggerLevel=WARN"],
                tmp / f"{h}-alert.log",
            )  # fmt: skip
        print(f"... the pair, {args.minutes} min", file=sys.stderr, flush=True)
        try:
            time.sleep(max(0.0, args.minutes * 60 - args.window))
            out["pair"] = measure(procs, {f"{h}/victoriametrics": urls[h] for h in hosts}, args.window)
        finally:
            stop(procs)
        print(json.dumps(out["pair"]), file=sys.stderr, flush=True)
    finally:
        stop({"fleetsim": sim})
        shutil.rmtree(tmp, ignore_errors=True)
    one, pair = out["one_host"], out["pair"]
    one_cores, one_rss = sum(one["cores"].values()), sum(one["rss_mib"].values())
    per_host = {
        h: (
            sum(v for k, v in pair["cores"].items() if k.startswith(h)),
            sum(v for k, v in pair["rss_mib"].items() if k.startswith(h)),
        )
        for h in ("a", "b")
    }
    print(f"| {out['gpus']} GPUs | cores | resident MiB | samples/s per VictoriaMetrics |")
    print("| --- | --- | --- | --- |")
    print(f"| one host | {one_cores:.3f} | {one_rss:.0f} | {one['samples_per_s']['victoriametrics']} |")
    for h, (c, r) in per_host.items():
        print(
            f"| pair, host {h} | {c:.3f} ({c / one_cores:.2f}×) | {r:.0f} ({r / one_rss:.2f}×) "
            f"| {pair['samples_per_s'][f'{h}/victoriametrics']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
