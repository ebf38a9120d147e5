#!/usr/bin/env python3
"""The monitoring pair's queue (docs/ha.md): how fast a vmagent's on-disk queue gives a VictoriaMetrics
that was down what it missed, against the ingest rate, and how many bytes a queued sample takes.

One vmagent (each channel's real binary) scrapes an exporter of SERIES series every INTERVAL
seconds (values with six random-looking decimals, which compress as badly as measurements) and writes
to two VictoriaMetrics on 127.0.0.1; the second is stopped for OUTAGE seconds,
then started again. Printed: the ingest rate (samples/s), the queue's bytes per sample
(vmagent_remotewrite_pending_data_bytes over the samples scraped during the outage), and the
catch-up rate: the samples the restarted VictoriaMetrics took (vm_rows_inserted_total) from its
start until the queue was empty, over that time.

Usage: python benchmarks/vm_pair_queue.py --bin-dir DIR [--series 20000] [--interval 2] [--outage 60]
(DIR: a channel's victoria-metrics/bin, e.g. from `vigil bundle fetch` or the tests' fetch_component)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.components import free_port  # noqa: E402 - the repository's helpers
from tests.helpers.vmpair import Exporter, Process, metric  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", type=Path, required=True)
    ap.add_argument("--series", type=int, default=20000)
    ap.add_argument("--interval", type=int, default=2)
    ap.add_argument("--outage", type=int, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        exporter = Exporter(series=args.series, noisy=True)
        vms, urls = [], []
        for i in range(2):
            port = free_port()
            urls.append(f"http://127.0.0.1:{port}")
            vms.append(
                Process(
                    [
                        str(args.bin_dir / "victoria-metrics"),
                        f"-httpListenAddr=127.0.0.1:{port}",
                        f"-storageDataPath={tmp / f'vm{i}'}",
                        f"-dedup.minScrapeInterval={args.interval}s",
                        "-loggerLevel=ERROR",
                    ],
                    tmp / f"vm{i}.log",
                    f"{urls[-1]}/health",
                )
            )
        scrape = tmp / "scrape.yml"
        scrape.write_text(
            f"global: {{scrape_interval: {args.interval}s, scrape_timeout: {args.interval}s}}\n"
            f"scrape_configs: [{{job_name: bench, static_configs: [{{targets: ['{exporter.address}']}}]}}]\n"
        )
        agent_port = free_port()
        agent_url = f"http://127.0.0.1:{agent_port}"
        agent = Process(
            [
                str(args.bin_dir / "vmagent"),
                f"-httpListenAddr=127.0.0.1:{agent_port}",
                f"-promscrape.config={scrape}",
                "-promscrape.noStaleMarkers",
                f"-remoteWrite.tmpDataPath={tmp / 'queue'}",
                "-remoteWrite.maxDiskUsagePerURL=1073741824",
                *(f"-remoteWrite.url={u}/api/v1/write" for u in urls),
                "-loggerLevel=ERROR",
            ],
            tmp / "agent.log",
            f"{agent_url}/health",
        )
        try:
            for vm in vms:
                vm.start()
            agent.start()
            time.sleep(5 * args.interval)
            vms[1].stop()
            scraped0 = metric(agent_url, "vm_promscrape_scraped_samples_sum")
            t_stop = time.monotonic()
            time.sleep(args.outage)
            scraped = metric(agent_url, "vm_promscrape_scraped_samples_sum") - scraped0
            # the first VictoriaMetrics is up: what is pending is the second's
            pending = metric(agent_url, "vmagent_remotewrite_pending_data_bytes")
            ingest = scraped / (time.monotonic() - t_stop)
            vms[1].start()
            t_start = time.monotonic()
            while metric(agent_url, "vmagent_remotewrite_pending_data_bytes") > 0:
                if time.monotonic() - t_start > 600:
                    raise SystemExit("the queue did not drain in 600 s")
                time.sleep(0.2)
            drain = time.monotonic() - t_start
            rows = metric(urls[1], "vm_rows_inserted_total")
            print(f"vmagent: {args.bin_dir}")
            print(f"series {args.series}, interval {args.interval} s, outage {args.outage} s")
            print(f"ingest: {ingest:.0f} samples/s")
            per_sample = pending / max(scraped, 1)
            print(f"queued: {pending:.0f} bytes for {scraped:.0f} samples = {per_sample:.2f} bytes/sample")
            print(f"catch-up: {rows:.0f} samples in {drain:.1f} s = {rows / max(drain, 1e-9):.0f} samples/s")
            print(f"catch-up / ingest: {rows / max(drain, 1e-9) / max(ingest, 1e-9):.1f}")
        finally:
            agent.stop()
            for vm in vms:
                vm.stop()
            exporter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
