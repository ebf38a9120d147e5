"""The PDF of a 2,000-account usage report: this tree's writer against an earlier one, in one run.

The document is the test suite's sample usage report (tests/unit/reports/test_report_store.py) with
its accounts multiplied: ``--accounts`` accounts of ``--users`` users each (default 2,000 × 5:
12,000 table rows). The baseline writer is ``installer/reports/pdf.py`` as it was at ``--baseline``
(a git revision; default the hand-written PDF 1.4 writer before typst), loaded from git into this
process; both render the same document ``--rounds`` times, alternating, and the medians are printed
side by side with their ratio, the page count (pdfinfo) and the size. Also prints what the typst
wheel takes installed (the files its RECORD lists).

    python benchmarks/report_pdf.py [--accounts 2000] [--users 5] [--rounds 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.unit.reports.test_report_store, for the sample report

from tests.unit.reports.test_report_store import sample_doc  # noqa: E402
from vigil.installer.reports.pdf import render_pdf  # noqa: E402

#: the last revision of installer/reports/pdf.py before typst drew the PDF
BASELINE = "d430fa0"


def document(accounts: int, users: int) -> dict[str, Any]:
    doc = sample_doc()
    first = doc["accounts"][0]
    user = first["users"][0]
    doc["accounts"] = [
        {
            **first,
            "account": f"acct{i:04d}",
            "users": [{**user, "user": f"user{i:04d}{j}"} for j in range(users)],
        }
        for i in range(accounts)
    ]
    return doc


def baseline_writer(rev: str) -> Callable[[dict[str, Any]], bytes]:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:installer/reports/pdf.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("baseline_pdf")
    exec(compile(source, f"{rev}:installer/reports/pdf.py", "exec"), module.__dict__)  # noqa: S102 - our own file
    render: Callable[[dict[str, Any]], bytes] = module.render_pdf
    return render


def pages(data: bytes) -> int:
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(data)
        f.flush()
        out = subprocess.run(["pdfinfo", f.name], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in out.splitlines() if line.startswith("Pages:")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accounts", type=int, default=2000)
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the baseline writer")
    args = ap.parse_args()
    doc = document(args.accounts, args.users)
    writers = {
        "typst (this tree)": render_pdf,
        f"hand-written ({args.baseline})": baseline_writer(args.baseline),
    }
    times: dict[str, list[float]] = {name: [] for name in writers}
    out: dict[str, bytes] = {}
    for _ in range(args.rounds):
        for name, render in writers.items():
            start = time.perf_counter()
            out[name] = render(doc)
            times[name].append(time.perf_counter() - start)
    rows = args.accounts * (args.users + 1)
    print(f"usage report: {args.accounts} accounts, {args.accounts * args.users} users ({rows} rows)")
    print(f"{'writer':<28} {'median s':>9} {'runs s':>24} {'pages':>6} {'MB':>6}")
    for name in writers:
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(
            f"{name:<28} {statistics.median(times[name]):>9.2f} {runs:>24} "
            f"{pages(out[name]):>6} {len(out[name]) / 1e6:>6.2f}"
        )
    new, old = (statistics.median(times[name]) for name in writers)
    print(f"ratio (typst / hand-written): {new / old:.2f}")
    dist = importlib.metadata.distribution("typst")
    installed = sum((Path(str(dist.locate_file(f))).stat().st_size for f in dist.files or ()), 0)
    print(f"typst {dist.version}: installed {installed / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
