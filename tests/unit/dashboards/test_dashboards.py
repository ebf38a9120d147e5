"""The Grafana dashboards: the committed JSON is what tools/generate_dashboards.py writes, the role
ships exactly those, and every panel is well-formed, reads the provisioned data source, and queries
only series vigil records or its exporters emit. The queries also pass the real vmalert's parser
(`-dryRun`, integration: the binary comes from a debian bundle, as in tests/integration).

Every check is a function returning problems, run on the shipped dashboards and on a broken copy,
so each test can fail.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "grafana"
FILES = ROLE / "files" / "dashboards"
RULES = REPO / "roles" / "vmalert" / "files" / "rules"
COUNTERS_CSV = REPO / "roles" / "dcgm_exporter" / "files" / "vigil-counters.csv"
EXPORTERS_DOC = REPO / "docs" / "exporters.md"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_dashboards", REPO / "tools" / "generate_dashboards.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
DASHBOARDS: dict[str, dict[str, Any]] = GEN.DASHBOARDS
DATASOURCE_UID = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_grafana_datasource_uid"]
OVERVIEW = "vigil-cluster-overview"

# Grafana's variables, with a value each (any value of the right kind: the check is the syntax).
VARIABLES = {
    "$__rate_interval": "2m",
    "$__interval": "30s",
    "$__range": "6h",
    "$instance": "gpu01",
    "$hpc_job": "1234",
}


def substitute(expr: str) -> str:
    for var, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, value)
    return expr


def panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])


def exprs(d: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for p in panels(d):
        for t in p.get("targets", []):
            yield f"{d['uid']}/{p.get('id')}/{t.get('refId')}", t.get("expr", "")


# --- checks (each returns a list of problems) ---------------------------------------------------


def panel_problems(d: dict[str, Any]) -> list[str]:
    out = []
    ids = [p.get("id") for p in panels(d)]
    if len(ids) != len(set(ids)):
        out.append(f"{d['uid']}: duplicated panel ids {ids}")
    if d.get("schemaVersion") != 39:
        out.append(f"{d['uid']}: schemaVersion {d.get('schemaVersion')}")
    for p in panels(d):
        name = f"{d['uid']}/{p.get('id')} {p.get('title')!r}"
        if p.get("type") == "row":
            continue
        if (p.get("datasource") or {}).get("uid") != DATASOURCE_UID:
            out.append(f"{name}: datasource {p.get('datasource')}")
        targets = p.get("targets") or []
        if not targets:
            out.append(f"{name}: no targets")
        for t in targets:
            if not str(t.get("expr", "")).strip():
                out.append(f"{name}: target {t.get('refId')} has no expr")
            if (t.get("datasource") or {}).get("uid") != DATASOURCE_UID:
                out.append(f"{name}: target {t.get('refId')} datasource {t.get('datasource')}")
        refs = [t.get("refId") for t in targets]
        if len(refs) != len(set(refs)):
            out.append(f"{name}: duplicated refIds {refs}")
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query" and (v.get("datasource") or {}).get("uid") != DATASOURCE_UID:
            out.append(f"{d['uid']}: variable {v.get('name')} datasource {v.get('datasource')}")
    return out


def overlap_problems(d: dict[str, Any]) -> list[str]:
    out = []
    boxes = [(p["id"], p["gridPos"]) for p in d["panels"]]
    for pid, g in boxes:
        if g["x"] < 0 or g["y"] < 0 or g["w"] <= 0 or g["h"] <= 0 or g["x"] + g["w"] > 24:
            out.append(f"{d['uid']}/{pid}: gridPos {g} outside the 24-column grid")
    for i, (a, ga) in enumerate(boxes):
        for b, gb in boxes[i + 1 :]:
            if (
                ga["x"] < gb["x"] + gb["w"]
                and gb["x"] < ga["x"] + ga["w"]
                and ga["y"] < gb["y"] + gb["h"]
                and gb["y"] < ga["y"] + ga["h"]
            ):
                out.append(f"{d['uid']}: panels {a} and {b} overlap ({ga}, {gb})")
    return out


KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "offset",
    "bool",
    "inf",
    "nan",
}


def metric_names(expr: str) -> set[str]:
    """Series names an expression selects (strings, label matchers, grouping lists, durations,
    numbers and function names are dropped)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', substitute(expr))
    e = re.sub(r"\{[^}]*\}", "{}", e)
    e = re.sub(r"\[[^\]]*\]", "[]", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\b\d[\d.e+]*(?:ms|[smhdwyi])*\b", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end() :].lstrip()
        if rest.startswith("(") or m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def known_names() -> set[str]:
    """Recording rules, the dcgm-exporter collectors vigil ships, the metrics documented in
    docs/exporters.md, and the series vmalert and the scraper write themselves."""
    names = {"ALERTS", "up"}
    for f in RULES.glob("*.yml"):
        for g in yaml.safe_load(f.read_text())["groups"]:
            names |= {r["record"] for r in g["rules"] if "record" in r}
    for line in COUNTERS_CSV.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(line.split(",")[0].strip())
    names |= set(re.findall(r"`((?:DCGM_FI|slurm|redfish)_[A-Za-z0-9_]+)", EXPORTERS_DOC.read_text()))
    return names


def name_problems(d: dict[str, Any], known: set[str]) -> list[str]:
    return [f"{where}: unknown series {n}" for where, e in exprs(d) for n in sorted(metric_names(e) - known)]


def rules_file(exprs_: list[tuple[str, str]]) -> str:
    rules = [
        {"record": f"dashboard:check_{i}:value", "expr": substitute(e)} for i, (_, e) in enumerate(exprs_)
    ]
    return yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}, sort_keys=False)


# --- the generator and the role -----------------------------------------------------------------


def test_committed_json_is_what_the_generator_writes(tmp_path: Path) -> None:
    assert GEN.main(["--out", str(tmp_path)]) == 0
    generated = {p.name: p.read_text() for p in tmp_path.glob("*.json")}
    committed = {p.name: p.read_text() for p in FILES.glob("*.json")}
    assert generated == committed, "run: python3 tools/generate_dashboards.py"
    assert GEN.main(["--check"]) == 0


def test_check_mode_notices_a_hand_edit(tmp_path: Path) -> None:
    assert GEN.main(["--out", str(tmp_path)]) == 0
    f = tmp_path / f"{OVERVIEW}.json"
    f.write_text(f.read_text().replace('"schemaVersion": 39', '"schemaVersion": 38'))
    assert GEN.main(["--check", "--out", str(tmp_path)]) == 1


def test_generator_is_deterministic() -> None:
    again = _generator().DASHBOARDS
    assert {u: GEN.render(d) for u, d in again.items()} == {u: GEN.render(d) for u, d in DASHBOARDS.items()}


def test_one_module_per_dashboard() -> None:
    from tools import dashboards

    assert [(m.UID, m.__name__) for m in dashboards.MODULES] == [
        (uid, f"tools.dashboards.{name}")
        for uid, name in zip(DASHBOARDS, ("overview", "node", "job", "account", "alerts"), strict=True)
    ]


def test_role_ships_exactly_the_generated_dashboards() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["grafana_dashboards"]
    assert sorted(defaults) == sorted(DASHBOARDS)
    assert sorted(p.stem for p in FILES.glob("*.json")) == sorted(DASHBOARDS)
    for name in defaults:
        assert json.loads((FILES / f"{name}.json").read_text())["uid"] == name


def test_datasource_uid_is_the_provisioned_one() -> None:
    assert GEN.DATASOURCE == {"type": "prometheus", "uid": DATASOURCE_UID}
    assert "_grafana_datasource_uid" in (ROLE / "templates" / "datasources.yaml.j2").read_text()


# --- the dashboards -----------------------------------------------------------------------------


def test_uids_and_titles_are_unique() -> None:
    ds = list(DASHBOARDS.values())
    assert len({d["uid"] for d in ds}) == len(ds) == 5
    assert len({d["title"] for d in ds}) == len(ds)
    assert all(len(d["uid"]) <= 40 for d in ds)


def test_overview_passes_the_five_second_test() -> None:
    assert len(list(panels(DASHBOARDS[OVERVIEW]))) <= 6


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_panels_are_well_formed(uid: str) -> None:
    assert panel_problems(DASHBOARDS[uid]) == []
    assert overlap_problems(DASHBOARDS[uid]) == []


def test_variables() -> None:
    def var(uid: str, name: str) -> dict[str, Any]:
        (v,) = [v for v in DASHBOARDS[uid]["templating"]["list"] if v["name"] == name]
        return v

    assert var("vigil-job", "hpc_job")["definition"] == "label_values(DCGM_FI_DEV_POWER_USAGE, hpc_job)"
    assert var("vigil-node", "instance")["definition"].startswith("label_values(")
    for d in DASHBOARDS.values():
        declared = {v["name"] for v in d["templating"]["list"]}
        for where, e in exprs(d):
            used = set(re.findall(r"\$(\w+)", e)) - {"__range", "__interval", "__rate_interval"}
            assert used <= declared, f"{where}: undeclared {used - declared}"


def test_checks_catch_broken_dashboards() -> None:
    d = copy.deepcopy(DASHBOARDS["vigil-node"])
    d["panels"][1]["id"] = d["panels"][0]["id"]
    d["panels"][2]["datasource"] = {"type": "prometheus", "uid": "other"}
    d["panels"][3]["targets"][0]["expr"] = " "
    d["panels"][4]["targets"] = []
    problems = "\n".join(panel_problems(d))
    for what in ("duplicated panel ids", "datasource", "has no expr", "no targets"):
        assert what in problems
    d = copy.deepcopy(DASHBOARDS[OVERVIEW])
    d["panels"][1]["gridPos"] = dict(d["panels"][0]["gridPos"], x=3)
    assert overlap_problems(d)
    d["panels"][0]["gridPos"]["w"] = 30
    assert any("outside" in p for p in overlap_problems(d))


# --- the series they read -----------------------------------------------------------------------


def test_metric_names_are_extracted() -> None:
    assert metric_names(
        'sum by (gpu) (rate(DCGM_FI_DEV_X{instance="$instance", a=~"b|c"}[$__rate_interval]))'
    ) == {"DCGM_FI_DEV_X"}
    assert metric_names("cluster:gpu_power_draw:sum / 1000 or vector(0)") == {"cluster:gpu_power_draw:sum"}
    assert metric_names("a * on (instance) group_left (user) b unless c offset 5m") == {"a", "b", "c"}


@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_every_series_is_recorded_or_exported(uid: str) -> None:
    assert name_problems(DASHBOARDS[uid], known_names()) == []


def test_name_check_catches_an_unknown_series() -> None:
    known = known_names()
    assert {
        "cluster:gpu_utilization:avg",
        "account:gpu_hours:sum1h",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "slurm_job_info",
    } <= known
    d = copy.deepcopy(DASHBOARDS[OVERVIEW])
    d["panels"][0]["targets"][0]["expr"] = "cluster:gpus_healthy:cnt"
    assert name_problems(d, known) == [f"{OVERVIEW}/1/A: unknown series cluster:gpus_healthy:cnt"]


def test_variables_are_substituted_before_parsing() -> None:
    for d in DASHBOARDS.values():
        for where, e in exprs(d):
            assert "$" not in substitute(e), where


# --- the real parser (vmalert -dryRun) ----------------------------------------------------------


def dry_run(components: Path, rules: Path) -> subprocess.CompletedProcess[str]:
    binary = components / "victoria-metrics" / "bin" / "vmalert"
    return subprocess.run(
        [str(binary), f"-rule={rules}", "-dryRun", "-loggerLevel=ERROR"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.integration
@pytest.mark.parametrize("uid", sorted(DASHBOARDS))
def test_every_query_parses_in_vmalert(components: Path, tmp_path: Path, uid: str) -> None:
    rules = tmp_path / f"{uid}.yml"
    rules.write_text(rules_file(list(exprs(DASHBOARDS[uid]))))
    res = dry_run(components, rules)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.integration
def test_vmalert_refuses_a_broken_query(components: Path, tmp_path: Path) -> None:
    rules = tmp_path / "broken.yml"
    rules.write_text(rules_file([("x", "sum by (gpu) (rate(DCGM_FI_DEV_GPU_TEMP[$__range])")]))
    res = dry_run(components, rules)
    assert res.returncode != 0
