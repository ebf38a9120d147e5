"""A hostile VictoriaMetrics: a small HTTP server on 127.0.0.1 serves the answers the real one cannot
make (a lone surrogate in a label, 60 MB of tiny values); a report fails in one line, stores nothing,
and stays within its memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vigil.installer.cli import main

ROOT = Path(__file__).resolve().parents[3]
Answer = Callable[[str], bytes]


def vector(metric: str) -> bytes:
    """An instant query's answer: one series, ``metric`` its labels as JSON text (escapes kept)."""
    return (
        '{"status":"success","data":{"resultType":"vector","result":[{"metric":' + metric + ',"value":'
        '[1761955200,"2"]}]}}'
    ).encode()


def every_hour() -> bytes:
    """A range query's answer: a series with a value every hour of 2025-10 (every hour recorded)."""
    values = ",".join(f'[{t},"1"]' for t in range(1759280400, 1761955200 + 1, 3600))
    return (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":['
        + values
        + "]}]}}"
    ).encode()


@pytest.fixture
def hostile_vm() -> Iterator[Callable[[Answer], str]]:
    """``serve(answer)``: the URL of a server answering each API path with ``answer(path)``."""
    servers: list[ThreadingHTTPServer] = []

    def serve(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = answer(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def usage(capsys: pytest.CaptureFixture[str], home: Path, url: str) -> tuple[int, str]:
    """``vigil report usage``'s exit status and its stderr but the progress lines (``... ``)."""
    capsys.readouterr()
    rc = main(["--home", str(home), "report", "usage", "--period", "2025-10", "--vm", url])
    return rc, failures(capsys.readouterr().err)


def failures(stderr: str) -> str:
    return "\n".join(line for line in stderr.strip().splitlines() if not line.startswith("... "))


def nothing_stored(home: Path) -> bool:
    objects = home / "reports" / "objects"
    return not objects.exists() or not any(objects.iterdir())


@pytest.mark.parametrize(
    ("metric", "label"),
    [
        (r'{"account":"\ud800","user":"alice"}', "'account'"),
        (r'{"account":"physics","user":"al\udfffce"}', "'user'"),
        (r'{"account":"physics","user":"alice","\ud83d":"x"}', "'\\ud83d'"),
    ],
)
def test_a_lone_surrogate_in_a_label_is_refused_in_one_line(
    hostile_vm: Callable[[Answer], str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    metric: str,
    label: str,
) -> None:
    url = hostile_vm(lambda path: every_hour() if path.endswith("query_range") else vector(metric))
    home = tmp_path / "home"
    rc, err = usage(capsys, home, url)
    assert rc == 1
    assert err.splitlines() == [
        f"FAIL: VictoriaMetrics {url}: /api/v1/query: result 1: label {label} is not valid Unicode "
        "(a lone surrogate), which VictoriaMetrics does not store; refused"
    ]
    assert nothing_stored(home)


def test_a_valid_surrogate_pair_is_a_character_and_is_kept(
    hostile_vm: Callable[[Answer], str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    metric = r'{"account":"\ud83d\ude80","user":"alice","hpc_job":"7"}'
    url = hostile_vm(lambda path: every_hour() if path.endswith("query_range") else vector(metric))
    home = tmp_path / "home"
    rc, err = usage(capsys, home, url)
    assert rc == 0, err
    (stored,) = (home / "reports" / "objects").iterdir()
    doc = json.loads((stored / "report.json").read_bytes())
    assert [a["account"] for a in doc["accounts"]] == ["\U0001f680"]


#: runs ``vigil report usage`` against argv[2] in VIGIL_HOME argv[1], in at most 3 GiB of address
#: space, and prints its exit status and peak resident memory (KiB) on the last line of stdout. The
#: peak is the process's own (VmHWM): getrusage's ru_maxrss carries the parent's peak across exec.
_MEASURED_REPORT = """
import re, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from vigil.installer.cli import main
rc = main(["--home", sys.argv[1], "report", "usage", "--period", "2025-10", "--vm", sys.argv[2]])
with open("/proc/self/status") as f:
    print(rc, re.search(r"^VmHWM:\\s+(\\d+) kB", f.read(), re.M)[1])
"""


def many_small_values(size: int) -> bytes:
    """A range query's answer of ``size`` bytes: one series of ``[1,"1"]`` pairs (8 bytes each, 4
    values; about 200 bytes each once parsed and read)."""
    head = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":['
    tail = b"]}]}}"
    pairs = (size - len(head) - len(tail)) // 8
    return head + (b'[1,"1"],' * pairs)[:-1] + tail


def test_a_60_mb_answer_is_refused_within_a_bounded_memory(
    hostile_vm: Callable[[Answer], str], tmp_path: Path
) -> None:
    big = many_small_values(60_000_000)
    url = hostile_vm(lambda path: big)
    home = tmp_path / "home"
    res = subprocess.run(
        [sys.executable, "-c", _MEASURED_REPORT, str(home), url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert res.stdout.split(), res.stderr[-2000:]
    rc, peak_kib = (int(x) for x in res.stdout.split()[-2:])
    assert peak_kib < 400 << 10, f"peak resident memory {peak_kib >> 10} MiB"
    assert rc == 1
    assert failures(res.stderr).splitlines() == [
        f"FAIL: VictoriaMetrics {url}: /api/v1/query_range: answer holds more than 6,000,000 values "
        "(counted before reading them); refused"
    ], res.stderr[-2000:]
    assert nothing_stored(home)


def test_raw_samples_with_a_lone_surrogate_are_refused_and_out_of_order_ones_sorted(
    hostile_vm: Callable[[Answer], str],
) -> None:
    from vigil.installer.reports import ReportError, VictoriaMetrics

    lines = {
        "bad": rb'{"metric":{"__name__":"m","circuit":"it\udc80"},"values":[1,2],"timestamps":[1000,2000]}',
        "good": b'{"metric":{"__name__":"m"},"values":[2,1,null],"timestamps":[2000,1000,3000]}',
    }
    for case, line in lines.items():
        url = hostile_vm(lambda path, line=line: line + b"\n")
        vm = VictoriaMetrics(url)
        if case == "good":
            assert vm.export("m", 0, 4) == [({"__name__": "m"}, [(1.0, 1.0), (2.0, 2.0)])]
            continue
        with pytest.raises(ReportError) as exc:
            vm.export("m", 0, 4)
        assert str(exc.value) == (
            f"VictoriaMetrics {url}: /api/v1/export: line 1: label 'circuit' is not valid Unicode (a lone "
            "surrogate), which VictoriaMetrics does not store; refused"
        )
