#!/usr/bin/env python3
"""Generate vigil's Grafana dashboards (roles/grafana/files/dashboards/*.json) from code.

Plain Python, standard library only. The dashboards themselves are in tools/dashboards/ (a
panel-building library and one module per dashboard); this script writes them. The output is
deterministic (sorted keys, panel ids in layout order), so `python3 tools/generate_dashboards.py`
after a change shows a reviewable diff and tests/unit/dashboards checks that the committed JSON is
what this script writes.

    python3 tools/generate_dashboards.py            # write the files
    python3 tools/generate_dashboards.py --check    # exit 1 if a committed file differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "roles" / "grafana" / "files" / "dashboards"

# Run as a script, only tools/ is on the path: the dashboards are imported as tools.dashboards.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.dashboards import DATASOURCE, Dashboard, build_all, render  # noqa: E402

__all__ = ["DASHBOARDS", "DATASOURCE", "OUT", "main", "render"]

DASHBOARDS: dict[str, Dashboard] = build_all()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Generate vigil's Grafana dashboards (roles/grafana/files/dashboards/*.json) from code."
    )
    ap.add_argument("--check", action="store_true", help="fail if a committed dashboard differs")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    stale = []
    for uid, d in DASHBOARDS.items():
        path = args.out / f"{uid}.json"
        text = render(d)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print("stale (run tools/generate_dashboards.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
