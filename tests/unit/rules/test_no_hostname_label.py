"""Nothing that reads the GPU series depends on dcgm-exporter's host label: they use ``instance``.

dcgm-exporter 4.8.2 (the version vigil pins) labels every series ``Hostname``; the release after it
renames that label ``hostname``, and ``--no-hostname`` drops it. ``instance`` is set by the scraper
from the target, the same for every exporter of a node, so the alert and recording rules, the Grafana
dashboards and the report queries select, group, join and print by ``instance`` only. This test
finds any use of either spelling as a label: in a selector or matcher, a ``by``/``without``/``on``/
``ignoring``/``group_left``/``group_right`` list, ``$labels.…``, a legend ``{{…}}``, or
``label_values(…, …)``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
RULES = sorted((REPO / "roles" / "vmalert" / "files").rglob("*.yml"))
DASHBOARDS = sorted((REPO / "roles" / "grafana" / "files").rglob("*.json"))
#: where report queries live (vigil report usage|energy) and the other admin-side code that queries VM
PYTHON = sorted(p for p in (REPO / "installer").rglob("*.py") if "__pycache__" not in p.parts)

_LABEL = r"[Hh]ostname"
USES = [
    (re.compile(rf"\b{_LABEL}\s*(=~|!~|!=|=)"), "a matcher"),
    (
        re.compile(rf"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\b{_LABEL}\b"),
        "a grouping or join list",
    ),
    (re.compile(rf"\$labels\.{_LABEL}\b"), "an alert template"),
    (re.compile(rf"\{{\{{\s*\.?{_LABEL}\s*\}}\}}"), "a legend"),
    (re.compile(rf"label_values\([^)]*\b{_LABEL}\b"), "a template variable"),
    (re.compile(rf"\[\s*['\"]{_LABEL}['\"]\s*\]|\.get\(\s*['\"]{_LABEL}['\"]"), "a lookup in a query result"),
]
#: a Python string is a query when it names a metric vigil reads
_QUERY = re.compile(r"\b(DCGM_FI_|slurm_|node_|instance_gpu:|account:|job:|cluster:)")


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def uses(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for rx, what in USES for m in rx.finditer(text)]


def _python_queries(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _QUERY.search(node.value):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
            if _QUERY.search(text):
                yield text
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value in ("Hostname", "hostname")
        ):
            yield f'["{node.slice.value}"]'


def test_the_sources_are_found() -> None:
    assert len(RULES) >= 3 and len(DASHBOARDS) >= 4 and len(PYTHON) >= 20


@pytest.mark.parametrize("path", RULES + DASHBOARDS, ids=lambda p: str(p.relative_to(REPO)))
def test_rules_and_dashboards_use_instance_not_the_host_label(path: Path) -> None:
    data = yaml.safe_load(path.read_text()) if path.suffix == ".yml" else json.loads(path.read_text())
    found = [u for s in _strings(data) for u in uses(s)]
    assert found == [], f"{path.relative_to(REPO)}: use `instance`, not the exporter's host label: {found}"


def test_report_and_admin_queries_use_instance_not_the_host_label() -> None:
    found = [
        f"{p.relative_to(REPO)}: {u}"
        for p in PYTHON
        if p.name != Path(__file__).name
        for q in _python_queries(p)
        for u in uses(q)
    ]
    assert found == [], found


@pytest.mark.parametrize(
    "text",
    [
        "sum by (instance, Hostname) (DCGM_FI_DEV_POWER_USAGE)",
        'DCGM_FI_DEV_GPU_TEMP{hostname="gpu01"}',
        'DCGM_FI_DEV_GPU_TEMP{Hostname=~"gpu.*"}',
        "x * on (hostname, gpu) group_left (user) y",
        "max without (hpc_job, Hostname) (DCGM_FI_DEV_XID_ERRORS)",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}",
        "{{Hostname}} / {{gpu}}",
        "label_values(DCGM_FI_DEV_GPU_TEMP, hostname)",
        's["metric"]["Hostname"]',
        "m.get('hostname')",
    ],
)
def test_the_check_catches_what_it_looks_for(text: str) -> None:
    assert uses(text), text


def test_the_check_leaves_other_words_alone() -> None:
    for text in (
        "sum by (instance, gpu) (DCGM_FI_DEV_POWER_USAGE)",
        "{{ $labels.instance }}",
        "ansible_host | default(inventory_hostname)",
        "urllib.parse.urlsplit(url).hostname",
    ):
        assert uses(text) == [], text
