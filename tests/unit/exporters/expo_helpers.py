"""Helpers for the exporters' tests: a fake clock and exposition checks (strict parser, promtool)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

_SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    r'(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)?\})? '
    r"(-?[0-9][0-9.e+-]*|NaN|[+-]Inf)$"
)


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A strict parser for what we emit: HELP then TYPE before samples, each family once, valid lines."""
    families: dict[str, list[tuple[dict[str, str], float]]] = {}
    types: dict[str, str] = {}
    current = None
    seen_series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in families, f"line {n}: family {name} appears twice"
            families[name] = []
            current = name
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert name == current, f"line {n}: TYPE for {name} after HELP for {current}"
            assert typ in ("gauge", "counter", "untyped"), f"line {n}: type {typ}"
            types[name] = typ
            continue
        m = _SAMPLE.match(line)
        assert m, f"line {n} is not a valid sample: {line!r}"
        name = m.group(1)
        assert name == current and name in types, f"line {n}: sample of {name} outside its family"
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen_series, f"line {n}: duplicate series {key}"
        seen_series.add(key)
        families[name].append((labels, float(m.group(5))))
    return families


def promtool_check(text: str, *, allow: tuple[str, ...] = ()) -> None:
    """`promtool check metrics` (Debian package prometheus, installed by scripts/system-deps.sh).

    ALLOW lists lint messages accepted on purpose (the DCGM names and labels are kept exactly as
    dcgm-exporter emits them, which the naming lint dislikes); a parse error is never accepted.
    """
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is missing: run `bash scripts/system-deps.sh` as root"
    cp = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    out = (cp.stdout + cp.stderr).strip()
    if cp.returncode == 0:
        return
    problems = [ln for ln in out.splitlines() if ln.strip() and not any(a in ln for a in allow)]
    assert out and not problems, f"promtool: {out}"
    assert "error while linting" not in out, out


#: lint messages dcgm-exporter's own output gets: camelCase labels (modelName, UUID, Hostname) and
#: counters without _total (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
DCGM_LINT = (
    "label names should be written in 'snake_case'",
    'counter metrics should have "_total" suffix',
    "metric name should not include type 'counter'",
)
