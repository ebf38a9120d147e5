"""Shared helpers for the rule tests: the rule files as deployed, promtool runs, annotations.

The files under roles/vmalert/files/rules/ go through the vmalert role's own filter
(`vigil_rule_file`, with every alert's keep_firing_for added, as an upstream-channel deploy does)
and the budgets template is rendered with sample budgets; the promtool tests run against that.

The promtool test files under alerts/ and recording/ are promtool's `test rules` format with
three additions the harness strips: `case:` on each test (fault, healthy, flapping), `value:` on
an expected alert (its `$value`), and expected alerts without annotations or `severity` — both
are filled in from the rule, so a test states only what it is about. The annotations a query fills
in (the jobs on a GPU) are the exception: a test states those it expects, the others are empty.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "vmalert"
RULES = ROLE / "files" / "rules"
HERE = Path(__file__).resolve().parent
KEEP_FIRING_FOR: dict[str, str] = yaml.safe_load((ROLE / "files" / "keep-firing-for.yml").read_text())
SAMPLE_BUDGETS = {"physics": 5000, "chemistry": 2000}
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def load_filter_module() -> Any:
    """The vmalert role's filter plugin (roles/vmalert/filter_plugins/vigil_rules.py) as a module."""
    spec = importlib.util.spec_from_file_location("vigil_rules", ROLE / "filter_plugins" / "vigil_rules.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


vigil_rule_file: Callable[..., str] = load_filter_module().vigil_rule_file


def seconds(duration: str) -> float:
    """A rule's duration (``1m``, ``1h30m``) in seconds, as the role's filter reads it."""
    return float(load_filter_module()._seconds(duration))


def render_budgets(budgets: dict[str, float]) -> str:
    # renders a YAML rules file, not HTML: there is nothing to escape for
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)  # noqa: S701
    env.filters["comment"] = lambda s: "#\n# " + s + "\n#"
    env.filters["to_json"] = lambda v: __import__("json").dumps(v)
    tmpl = env.from_string((ROLE / "templates" / "vigil-budgets.yml.j2").read_text())
    return tmpl.render(ansible_managed="Ansible managed", vmalert_account_energy_budgets=budgets)


def role_rule_files(**settings: Any) -> dict[str, str]:
    """{file name: text} as the role's task "Install the rule files" (tasks/configure.yml) builds them,
    its own Jinja run with the role's defaults, its constants and ``settings`` on top (a debian-channel
    deploy: no keep_firing_for). Ansible's file lookup strips the trailing newline, as here."""
    task = next(
        t
        for t in yaml.safe_load((ROLE / "tasks" / "configure.yml").read_text())
        if t["name"].startswith("Install the rule files")
    )
    constants = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    values = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        "_vmalert_group_params": constants["_vmalert_group_params"],
        "_vmalert_interval_kept_groups": constants["_vmalert_interval_kept_groups"],
        "_vmalert_keep_firing_for": False,
        "_vmalert_keep_firing_for_table": KEEP_FIRING_FOR,
        "_vmalert_check_rules": "vmalert -rule=%s -dryRun",
        **settings,
    }
    # renders YAML rule files into a Python literal, not HTML: there is nothing to escape for
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)  # noqa: S701
    env.filters["vigil_rule_file"] = vigil_rule_file
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
    env.filters["basename"] = lambda v: Path(v).name
    env.filters["regex_replace"] = lambda v, pattern, repl: re.sub(pattern, repl, v)
    env.globals["lookup"] = lambda kind, name: (ROLE / "files" / name).read_text().rstrip()
    out = ast.literal_eval(env.from_string(task["vars"]["_common_files"]).render(**values))
    return {Path(f["path"]).name: f["content"] for f in out if "content" in f}


def shipped() -> list[Path]:
    return sorted(RULES.glob("*.yml"))


def rules_by_alert() -> dict[str, dict[str, Any]]:
    out = {}
    for path in shipped():
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    out[rule["alert"]] = {**rule, "file": path.name, "group": group["name"]}
    return out


def deploy(
    dest: Path,
    *,
    mutate: Callable[[dict[str, Any]], None] | None = None,
    keep_firing_for: dict[str, str] | None = KEEP_FIRING_FOR,
) -> list[Path]:
    """Write the rule files as deployed into ``dest``; ``mutate`` may change each parsed rule."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for path in shipped():
        text = path.read_text()
        if mutate:
            doc = yaml.safe_load(text)
            for group in doc["groups"]:
                for rule in group["rules"]:
                    mutate(rule)
            text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        p = dest / path.name
        p.write_text(vigil_rule_file(text, keep_firing_for=keep_firing_for))
        out.append(p)
    b = dest / "vigil-budgets.yml"
    b.write_text(render_budgets(SAMPLE_BUDGETS))
    out.append(b)
    return out


def is_queried(template: str) -> bool:
    """An annotation vmalert fills in by a query at each evaluation (the jobs on a GPU): the test
    states its expected value (``exp_annotations``; absent means empty), as only promtool can run it."""
    return "query (" in template


_TOKEN = re.compile(r"\{\{\s*(if\s+\$labels\.(\w+)|end|\$labels\.(\w+)|\$value)\s*\}\}")


def go_value(v: float) -> str:
    """$value as Prometheus' templates print it (Go's %v of a float64), for the values the tests use."""
    if float(v).is_integer() and abs(v) < 1e21:
        return str(int(v))
    return repr(float(v))


def render_annotation(text: str, labels: dict[str, str], value: float | None) -> str:
    """The subset of Go templates the shipped annotations use: $labels.x, $value, if $labels.x … end."""
    out: list[str] = []
    skip = 0
    pos = 0
    for m in _TOKEN.finditer(text):
        if not skip:
            out.append(text[pos : m.start()])
        pos = m.end()
        if m.group(2):
            skip = skip + 1 if skip or not labels.get(m.group(2)) else 0
        elif m.group(1) == "end":
            skip = max(0, skip - 1)
        elif skip:
            continue
        elif m.group(3):
            out.append(labels.get(m.group(3), ""))
        else:
            assert value is not None, f"annotation uses $value; give `value:` in the test: {text}"
            out.append(go_value(value))
    if not skip:
        out.append(text[pos:])
    return "".join(out)


def _thirty_days_only(accounting: Path, dest: Path) -> Path:
    """The accounting file with only its 30-day group: the account alerts' tests give the hourly
    series as input, and the hourly group (a subquery of 60 steps every minute) over no raw data
    records nothing but cost a minute of promtool per test file."""
    doc = yaml.safe_load(accounting.read_text())
    doc["groups"] = [g for g in doc["groups"] if g["name"] == "vigil_accounting_30d"]
    assert doc["groups"], f"{accounting}: no group vigil_accounting_30d"
    out = dest / "vigil-accounting-30d.yml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return out


def complete(test_file: Path, rule_files: list[Path], dest: Path) -> tuple[Path, dict[str, Any]]:
    """Fill in the promtool test file (severity, annotations, rule_files); returns its path and the source."""
    src = yaml.safe_load(test_file.read_text())
    doc = copy.deepcopy(src)
    rules = rules_by_alert()
    # Only the files the tested alerts live in (and what the account alerts read): quicker, and a
    # test cannot pass thanks to a rule of another file.
    wanted = {rules[c["alertname"]]["file"] for t in doc["tests"] for c in t.get("alert_rule_test", [])}
    if any(
        rules[n]["file"] == "vigil-accounts.yml"
        for n in {c["alertname"] for t in doc["tests"] for c in t.get("alert_rule_test", [])}
    ):
        wanted |= {"vigil-accounting.yml", "vigil-budgets.yml"}
    if "vigil-gpu-alerts.yml" in wanted:  # GpuEccDoubleBitError reads a series recorded there
        wanted.add("vigil-gpu.yml")
    files = [p for p in rule_files if p.name in wanted]
    if "vigil-accounts.yml" in wanted:
        files = [_thirty_days_only(p, dest) if p.name == "vigil-accounting.yml" else p for p in files]
    doc["rule_files"] = [str(p) for p in files]
    doc.setdefault("evaluation_interval", "30s")
    for test in doc["tests"]:
        test.pop("case", None)
        for check in test.get("alert_rule_test", []):
            rule = rules[check["alertname"]]
            # each expected alert on its own: a YAML alias (`*name`) would share one dict
            check["exp_alerts"] = [copy.deepcopy(a) for a in check.get("exp_alerts", [])]
            for alert in check["exp_alerts"]:
                value = alert.pop("value", None)
                labels = {**alert.get("exp_labels", {}), **rule.get("labels", {})}
                alert["exp_labels"] = labels
                given = alert.get("exp_annotations", {})
                queried = {k for k, v in rule.get("annotations", {}).items() if is_queried(v)}
                assert set(given) <= queried, f"{check['alertname']}: state only queried annotations: {given}"
                alert["exp_annotations"] = {
                    k: given.get(k, "") if k in queried else render_annotation(v, labels, value)
                    for k, v in rule.get("annotations", {}).items()
                }
    out = dest / test_file.name
    out.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return out, src


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=300, check=False)


#: every shipped rule group's `interval:`, as the files under roles/vmalert/files/rules/ set it
SHIPPED_INTERVALS = {
    "vigil_targets": "30s",
    "vigil_nodes": "30s",
    "vigil_slurm": "30s",
    "vigil_gpu_aggregates": "30s",
    "vigil_gpu_alerts": "30s",
    "vigil_redfish": "30s",
    "vigil_pair": "30s",
    "vigil_fabric": "30s",
    "vigil_certificates": "1m",
    "vigil_backups": "1m",
    "vigil_accounting": "1m",
    "vigil_accounting_30d": "5m",
    "vigil_accounts": "5m",
}
