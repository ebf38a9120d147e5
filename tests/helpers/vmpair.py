"""The monitoring pair on 127.0.0.1, from the real binaries: VictoriaMetrics and vmagent processes, a
small exporter serving counters, and reads of what a VictoriaMetrics holds.

Used by tests/integration/test_vm_pair.py and benchmarks/vm_pair_queue.py. Every URL is on
127.0.0.1; the processes are stopped by their own handle, never by name.
"""

from __future__ import annotations

import http.server
import json
import math
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path


def get(url: str, timeout: float = 60) -> bytes:
    assert url.startswith("http://127.0.0.1:"), url
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback, ours
        return bytes(resp.read())


class Exporter:
    """An exporter of ``series`` counters that grow by one each time they are scraped; a scrape whose
    `agent` parameter is in ``failing`` is answered 500."""

    def __init__(self, series: int = 3, *, noisy: bool = False) -> None:
        self.series = series
        #: values that compress as badly as measurements do: a counter plus a pseudo-random fraction
        self.noisy = noisy
        self.scrapes = 0
        self.failing: set[str] = set()
        lock = threading.Lock()
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                agent = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("agent", [""])[0]
                if agent in exporter.failing:
                    self.send_error(500)
                    return
                with lock:
                    exporter.scrapes += 1
                    n = exporter.scrapes
                name = "vigil_pair_test_total"
                if exporter.noisy:
                    fraction = [((n * 7919 + i * 104729) % 100003) / 100003 for i in range(exporter.series)]
                    body = "".join(f'{name}{{series="{i}"}} {n + f:.6f}\n' for i, f in enumerate(fraction))
                else:
                    body = "".join(f'{name}{{series="{i}"}} {n}\n' for i in range(exporter.series))
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Process:
    """One long-running binary, its output in ``log``; ``ready`` is a URL answering once it runs."""

    def __init__(self, argv: Sequence[str], log: Path, ready: str) -> None:
        self.argv, self.log, self.ready = list(argv), log, ready
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603 - ours
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.argv[0]} exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                get(self.ready, timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"{self.argv[0]} did not answer {self.ready} in {timeout} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def flag_value(argv: Sequence[str], name: str) -> str:
    """The value of ``-name=value`` in ``argv`` (the first one)."""
    for arg in argv:
        if arg.startswith(f"-{name}="):
            return arg.split("=", 1)[1]
    raise KeyError(name)


def replace_flag(argv: Sequence[str], name: str, value: str) -> list[str]:
    """``argv`` with every ``-name=...`` given ``value`` (one must be there)."""
    out = [f"-{name}={value}" if a.startswith(f"-{name}=") else a for a in argv]
    assert out != list(argv) or f"-{name}={value}" in argv, f"no -{name} in {argv}"
    return out


def metric(url: str, name: str, labels: dict[str, str] | None = None) -> float:
    """The sum of a process's own /metrics lines named ``name`` (with those labels, when given)."""
    total = 0.0
    for line in get(f"{url}/metrics").decode().splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if labels and not all(f'{k}="{v}"' in head for k, v in labels.items()):
            continue
        total += float(value)
    return total


def export(vm_url: str, match: str, start: float, end: float) -> dict[str, list[tuple[int, float]]]:
    """Every raw sample of the series matching ``match`` between start and end (seconds), by series."""
    query = urllib.parse.urlencode({"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
    out: dict[str, list[tuple[int, float]]] = {}
    for line in get(f"{vm_url}/api/v1/export?{query}").decode().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        key = json.dumps(row["metric"], sort_keys=True)
        pairs = out.setdefault(key, [])
        # a staleness marker is exported as null
        values = (math.nan if v is None else float(v) for v in row["values"])
        pairs.extend(zip(row["timestamps"], values, strict=True))
    return {k: sorted(v) for k, v in out.items()}


def flush(vm_url: str) -> None:
    """Make what a VictoriaMetrics received searchable now, and merge its parts (dedup is applied)."""
    get(f"{vm_url}/internal/force_flush")
    get(f"{vm_url}/internal/force_merge")
