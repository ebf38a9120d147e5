"""benchmarks/tui_events.py keeps working: its recorded events load, widen and all reach the screen
(at a small size; the figures themselves are the benchmark's, never asserted here)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.helpers.cli import REPO


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tui_events", REPO / "benchmarks" / "tui_events.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tui_events"] = module
    spec.loader.exec_module(module)
    return module


def test_the_recorded_events_widen_and_every_one_reaches_the_screen() -> None:
    bench = _bench()
    base = bench.recorded()
    assert len(base) > 2000 and base[-1]["event"] == "playbook_on_stats"
    recorded_hosts = {e["event_data"]["host"] for e in base if e["event_data"].get("host")}
    assert recorded_hosts == {"mon01", "ctl01", "gpu01", "gpu02"}
    events = list(bench.widened(base, 40))
    hosts = sorted({e["event_data"]["host"] for e in events if e["event_data"].get("host")})
    assert len(hosts) == 40 and "gpu02-009" in hosts
    per_host = sum(1 for e in base if e["event_data"].get("host"))
    assert len(events) == len(base) + 9 * per_host
    result = bench.measure(events[:300], 600, 0.5, hosts)
    assert result["applied"] == result["offered"] == 300
    assert result["board_events"] == 300
