#!/usr/bin/env python3
"""Generate vigil's Grafana dashboards (roles/grafana/files/dashboards/*.json) from code.

Plain Python, standard library only. The output is deterministic (sorted keys, panel ids in
layout order), so `python3 tools/generate_dashboards.py` after a change shows a reviewable diff and
tests/unit/dashboards checks that the committed JSON is what this script writes.

The queries read the recording rules of roles/vmalert/files/rules/ where one exists (cluster:*,
node:*, account:*) and the dcgm-exporter series of roles/dcgm_exporter/files/vigil-counters.csv
otherwise. Every DCGM series of an allocated GPU carries `hpc_job`; a GPU shared by several jobs
has one series per job, hence the `max by (instance, gpu)` before any sum.

    python3 tools/generate_dashboards.py            # write the files
    python3 tools/generate_dashboards.py --check    # exit 1 if a committed file differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "roles" / "grafana" / "files" / "dashboards"

# The data source roles/grafana/templates/datasources.yaml.j2 provisions (_grafana_datasource_uid).
DATASOURCE = {"type": "prometheus", "uid": "vigil-victoriametrics"}

Panel = dict[str, Any]


def target(
    expr: str,
    legend: str = "",
    ref: str = "A",
    *,
    instant: bool = False,
    table: bool = False,
    interval: str = "",
) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DATASOURCE, "expr": expr, "refId": ref, "legendFormat": legend}
    if instant:
        t["instant"] = True
        t["range"] = False
    if table:
        t["format"] = "table"
    if interval:
        t["interval"] = interval
    return t


def thresholds(*steps: tuple[float | None, str]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}


GREEN = ((None, "green"),)


def panel(
    kind: str,
    title: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    *,
    unit: str = "short",
    description: str = "",
    steps: tuple[tuple[float | None, str], ...] = GREEN,
    options: dict[str, Any] | None = None,
    decimals: int | None = None,
    custom: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Panel:
    x, y, w, h = grid
    defaults: dict[str, Any] = {
        "unit": unit,
        "thresholds": thresholds(*steps),
        "color": {"mode": "thresholds"},
    }
    if kind in ("timeseries", "barchart"):
        defaults["color"] = {"mode": "palette-classic"}
    if decimals is not None:
        defaults["decimals"] = decimals
    if custom:
        defaults["custom"] = custom
    p: Panel = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options or {},
        "targets": targets,
    }
    if extra:
        p.update(extra)
    return p


def stat(title: str, grid: tuple[int, int, int, int], targets: list[dict[str, Any]], **kw: Any) -> Panel:
    opts = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "value",
        "graphMode": "none",
        "textMode": "value_and_name",
        "orientation": "auto",
    }
    return panel("stat", title, grid, targets, options=opts, **kw)


def timeseries(
    title: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    *,
    bars: bool = False,
    **kw: Any,
) -> Panel:
    custom = {
        "drawStyle": "bars" if bars else "line",
        "fillOpacity": 60 if bars else 10,
        "lineWidth": 1,
        "showPoints": "never",
        "stacking": {"group": "A", "mode": "normal" if bars else "none"},
    }
    opts = {
        "legend": {
            "displayMode": "table",
            "placement": "right",
            "showLegend": True,
            "calcs": ["lastNotNull"],
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return panel("timeseries", title, grid, targets, options=opts, custom=custom, **kw)


def status_history(
    title: str, grid: tuple[int, int, int, int], targets: list[dict[str, Any]], **kw: Any
) -> Panel:
    """One row per GPU, coloured by value: the per-GPU heat map."""
    opts = {
        "showValue": "auto",
        "rowHeight": 0.9,
        "colWidth": 0.9,
        "legend": {"showLegend": False},
        "tooltip": {"mode": "single", "sort": "none"},
    }
    return panel(
        "status-history", title, grid, targets, options=opts, custom={"fillOpacity": 80, "lineWidth": 0}, **kw
    )


def table(
    title: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    *,
    merge: bool = False,
    hide: tuple[str, ...] = ("Time",),
    **kw: Any,
) -> Panel:
    transformations: list[dict[str, Any]] = []
    if merge:
        transformations.append({"id": "merge", "options": {}})
    transformations.append({"id": "organize", "options": {"excludeByName": {h: True for h in hide}}})
    opts = {
        "showHeader": True,
        "cellHeight": "sm",
        "footer": {"show": False, "reducer": ["sum"], "fields": ""},
    }
    return panel(
        "table", title, grid, targets, options=opts, extra={"transformations": transformations}, **kw
    )


def bargauge(title: str, grid: tuple[int, int, int, int], targets: list[dict[str, Any]], **kw: Any) -> Panel:
    opts = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "orientation": "horizontal",
        "displayMode": "basic",
        "showUnfilled": True,
    }
    return panel("bargauge", title, grid, targets, options=opts, **kw)


def query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
        "definition": query,
        "refresh": 2,
        "sort": 3,
        "multi": False,
        "includeAll": False,
        "current": {},
        "options": [],
        "hide": 0,
        "regex": "",
    }


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[Panel],
    *,
    variables: tuple[dict[str, Any], ...] = (),
    time_from: str = "now-6h",
    time_to: str = "now",
    refresh: str = "1m",
) -> dict[str, Any]:
    for i, p in enumerate(panels, start=1):
        p["id"] = i
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["vigil"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "graphTooltip": 1,
        "refresh": refresh,
        "time": {"from": time_from, "to": time_to},
        "templating": {"list": list(variables)},
        "annotations": {"list": []},
        "links": [
            {
                "type": "dashboards",
                "tags": ["vigil"],
                "asDropdown": True,
                "title": "vigil",
                "includeVars": False,
                "keepTime": True,
                "targetBlank": False,
                "icon": "external link",
                "tooltip": "",
                "url": "",
            }
        ],
        "panels": panels,
    }


TEMP_STEPS = ((None, "green"), (85, "orange"), (92, "red"))
# A subquery at a 1h step tiles a window with the non-overlapping hours of the *:increase1h and
# *:sum1h rules (the pattern of account:gpu_energy_kwh:sum30d); joules / 3.6e6 = kWh.
ACCOUNT_KWH = "sum by (account) (sum_over_time(account:gpu_energy_joules:increase1h[{w}:1h])) / 3.6e6"
ACCOUNT_GPU_HOURS = "sum by (account) (sum_over_time(account:gpu_hours:sum1h[{w}:1h]))"


def cluster_overview() -> dict[str, Any]:
    """The five-second test: six panels, every one a single recording rule (or a sum of one)."""
    return dashboard(
        "vigil-cluster-overview",
        "vigil — cluster overview",
        "Is the GPU cluster healthy, busy, hot, and who is using its energy today?",
        [
            stat(
                "GPUs healthy / total",
                (0, 0, 6, 5),
                [
                    target("cluster:gpus_healthy:count", "healthy", "A"),
                    target("cluster:gpus:count", "total", "B"),
                ],
                description="Healthy: reporting, below 92 °C, no hardware XID, no row-remap failure, no double-bit "
                "ECC error in the last hour. Total: every GPU seen in the last day.",
            ),
            stat(
                "GPU power now",
                (6, 0, 6, 5),
                [target("cluster:gpu_power_draw:sum / 1000", "kW")],
                unit="kwatt",
                decimals=1,
                description="Power drawn by all GPUs (DCGM), in kW.",
            ),
            stat(
                "Hottest GPU",
                (12, 0, 6, 5),
                [target("cluster:gpu_temp:max", "°C")],
                unit="celsius",
                steps=TEMP_STEPS,
                description="The hottest GPU of the cluster; 85 °C warns, 92 °C pages.",
            ),
            stat(
                "Active jobs on GPUs",
                (18, 0, 6, 5),
                [target("cluster:hpc_jobs_on_gpus:count", "jobs")],
                description="Slurm jobs holding at least one GPU now.",
            ),
            timeseries(
                "GPU utilisation",
                (0, 5, 12, 9),
                [target("cluster:gpu_utilization:avg", "cluster")],
                unit="percent",
                extra={
                    "fieldConfig": {
                        "defaults": {
                            "unit": "percent",
                            "min": 0,
                            "max": 100,
                            "color": {"mode": "palette-classic"},
                            "thresholds": thresholds(*GREEN),
                            "custom": {
                                "drawStyle": "line",
                                "fillOpacity": 10,
                                "lineWidth": 1,
                                "showPoints": "never",
                                "stacking": {"group": "A", "mode": "none"},
                            },
                        },
                        "overrides": [],
                    }
                },
                description="Average utilisation of all GPUs.",
            ),
            bargauge(
                "GPU energy per account today",
                (12, 5, 12, 9),
                [target(ACCOUNT_KWH.format(w="$__range"), "{{account}}", instant=True)],
                unit="kwatth",
                decimals=1,
                extra={"timeFrom": "now/d"},
                description="kWh the GPUs of each account's jobs used since midnight UTC (whole hours).",
            ),
        ],
    )


def node_detail() -> dict[str, Any]:
    sel = 'instance="$instance"'
    return dashboard(
        "vigil-node",
        "vigil — node",
        "One node's GPUs: heat, power, memory and links.",
        [
            status_history(
                "GPU temperature",
                (0, 0, 24, 7),
                [target(f"max by (gpu) (DCGM_FI_DEV_GPU_TEMP{{{sel}}})", "GPU {{gpu}}")],
                unit="celsius",
                steps=TEMP_STEPS,
            ),
            status_history(
                "GPU power",
                (0, 7, 24, 7),
                [target(f"max by (gpu) (DCGM_FI_DEV_POWER_USAGE{{{sel}}})", "GPU {{gpu}}")],
                unit="watt",
                steps=((None, "blue"), (200, "green"), (500, "orange"), (650, "red")),
            ),
            timeseries(
                "GPU utilisation",
                (0, 14, 12, 8),
                [target(f"max by (gpu) (DCGM_FI_DEV_GPU_UTIL{{{sel}}})", "GPU {{gpu}}")],
                unit="percent",
            ),
            timeseries(
                "Framebuffer used",
                (12, 14, 12, 8),
                [target(f"instance_gpu:gpu_memory_used:ratio{{{sel}}}", "GPU {{gpu}}")],
                unit="percentunit",
            ),
            timeseries(
                "NVLink traffic",
                (0, 22, 8, 8),
                [
                    target(
                        f"sum by (gpu) (rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{sel}}}[$__rate_interval]))",
                        "GPU {{gpu}}",
                    )
                ],
                description="Rate of DCGM's NVLink bandwidth counter.",
            ),
            timeseries(
                "NVLink CRC errors",
                (8, 22, 8, 8),
                [
                    target(
                        f"sum by (gpu) (rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{sel}}}[$__rate_interval]))",
                        "GPU {{gpu}} flit",
                        "A",
                    ),
                    target(
                        f"sum by (gpu) (rate(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{{{sel}}}[$__rate_interval]))",
                        "GPU {{gpu}} data",
                        "B",
                    ),
                ],
                unit="cps",
                description="More than 0.1/s for 15 minutes raises GpuNvlinkCrcErrorsRising.",
            ),
            timeseries(
                "PCIe replays",
                (16, 22, 8, 8),
                [
                    target(
                        f"sum by (gpu) (increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{sel}}}[$__rate_interval]))",
                        "GPU {{gpu}}",
                    )
                ],
                description="PCIe link replays per interval: a flaky riser or slot.",
            ),
        ],
        variables=(query_variable("instance", "Node", "label_values(DCGM_FI_DEV_GPU_TEMP, instance)"),),
    )


def job_view() -> dict[str, Any]:
    sel = 'hpc_job="$hpc_job"'
    return dashboard(
        "vigil-job",
        "vigil — job",
        "One Slurm job's GPUs: who, where, power, energy, errors.",
        [
            table(
                "Job",
                (0, 0, 16, 5),
                [
                    target(
                        f"max by (hpc_job, user, account, partition, node) (last_over_time(slurm_job_info{{{sel}}}[$__range]))",
                        instant=True,
                        table=True,
                    )
                ],
                hide=("Time", "Value"),
            ),
            stat(
                "GPUs",
                (16, 0, 4, 5),
                [target(f"count(max by (instance, gpu) (DCGM_FI_DEV_GPU_TEMP{{{sel}}}))", "GPUs")],
            ),
            stat(
                "Energy so far",
                (20, 0, 4, 5),
                [
                    target(
                        f"sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{sel}}}[$__range])) / 3.6e9",
                        "kWh",
                        instant=True,
                    )
                ],
                unit="kwatth",
                decimals=2,
                description="Energy of the job's GPUs within the selected time range "
                "(DCGM's counter is in mJ).",
            ),
            timeseries(
                "Power of its GPUs",
                (0, 5, 12, 8),
                [
                    target(
                        f"max by (instance, gpu) (DCGM_FI_DEV_POWER_USAGE{{{sel}}})",
                        "{{instance}} GPU {{gpu}}",
                    )
                ],
                unit="watt",
                bars=False,
            ),
            timeseries(
                "Utilisation of its GPUs",
                (12, 5, 12, 8),
                [
                    target(
                        f"max by (instance, gpu) (DCGM_FI_DEV_GPU_UTIL{{{sel}}})", "{{instance}} GPU {{gpu}}"
                    )
                ],
                unit="percent",
            ),
            table(
                "Its GPUs now",
                (0, 13, 12, 8),
                [
                    target(
                        f"max by (instance, gpu, UUID, modelName) (DCGM_FI_DEV_GPU_TEMP{{{sel}}})",
                        "",
                        "A",
                        instant=True,
                        table=True,
                    ),
                    target(
                        f"max by (instance, gpu, UUID, modelName) (DCGM_FI_DEV_POWER_USAGE{{{sel}}})",
                        "",
                        "B",
                        instant=True,
                        table=True,
                    ),
                ],
                merge=True,
                description="Value #A: temperature (°C); Value #B: power (W).",
            ),
            stat(
                "Errors in range",
                (12, 13, 12, 8),
                [
                    target(
                        f"max(max_over_time(DCGM_FI_DEV_XID_ERRORS{{{sel}}}[$__range]))",
                        "highest XID",
                        "A",
                        instant=True,
                    ),
                    target(
                        f"sum(max_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{sel}}}[$__range])"
                        f" - min_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{sel}}}[$__range]))",
                        "ECC double-bit",
                        "B",
                        instant=True,
                    ),
                    target(
                        f"sum(max_over_time(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{sel}}}[$__range])"
                        f" - min_over_time(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{sel}}}[$__range]))",
                        "ECC single-bit",
                        "C",
                        instant=True,
                    ),
                    target(
                        f"sum(max_over_time(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{sel}}}[$__range])"
                        f" - min_over_time(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{sel}}}[$__range]))",
                        "NVLink CRC",
                        "D",
                        instant=True,
                    ),
                ],
                steps=((None, "green"), (1, "red")),
                description="XID: the highest code reported (0 = none). Counters: errors counted on the job's GPUs in "
                "the range (highest minus lowest of the job's own series: an error from before the job is not its own).",
            ),
        ],
        variables=(query_variable("hpc_job", "Job", "label_values(DCGM_FI_DEV_POWER_USAGE, hpc_job)"),),
    )


def account_chargeback() -> dict[str, Any]:
    return dashboard(
        "vigil-account-chargeback",
        "vigil — account chargeback",
        "GPU-hours and GPU energy per Slurm account. Pick a month in the time picker "
        "(This month, Previous month); the tables cover the selected range in whole hours.",
        [
            table(
                "GPU-hours and kWh per account (selected range)",
                (0, 0, 12, 9),
                [
                    target(ACCOUNT_GPU_HOURS.format(w="$__range"), "", "A", instant=True, table=True),
                    target(ACCOUNT_KWH.format(w="$__range"), "", "B", instant=True, table=True),
                ],
                merge=True,
                decimals=1,
                description="Value #A: GPU-hours; Value #B: kWh.",
            ),
            table(
                "GPU-hours and kWh per account and user (selected range)",
                (12, 0, 12, 9),
                [
                    target(
                        "sum by (account, user) (sum_over_time(account_user:gpu_hours:sum1h[$__range:1h]))",
                        "",
                        "A",
                        instant=True,
                        table=True,
                    ),
                    target(
                        "sum by (account, user) (sum_over_time(account_user:gpu_energy_joules:increase1h[$__range:1h]))"
                        " / 3.6e6",
                        "",
                        "B",
                        instant=True,
                        table=True,
                    ),
                ],
                merge=True,
                decimals=1,
                description="Value #A: GPU-hours; Value #B: kWh.",
            ),
            timeseries(
                "GPU-hours per account per day",
                (0, 9, 12, 9),
                [target(ACCOUNT_GPU_HOURS.format(w="1d"), "{{account}}", interval="1d")],
                bars=True,
            ),
            timeseries(
                "kWh per account per day",
                (12, 9, 12, 9),
                [target(ACCOUNT_KWH.format(w="1d"), "{{account}}", interval="1d")],
                bars=True,
                unit="kwatth",
            ),
            timeseries(
                "Rolling 30 days: kWh per account and the 7-day forecast",
                (0, 18, 24, 8),
                [
                    target("account:gpu_energy_kwh:sum30d", "{{account}}", "A"),
                    target("account:gpu_energy_kwh:forecast30d", "{{account}} in 7 days", "B"),
                ],
                unit="kwatth",
                description="What AccountEnergyBudgetExceeded / AccountEnergyBudgetForecast compare "
                "with the account's budget.",
            ),
        ],
        time_from="now/M",
        time_to="now",
        refresh="",
    )


def alerts_overview() -> dict[str, Any]:
    firing = 'ALERTS{alertstate="firing"}'
    return dashboard(
        "vigil-alerts",
        "vigil — alerts",
        "What vmalert fires now, and the scrape targets.",
        [
            stat(
                "Firing by severity",
                (0, 0, 12, 5),
                [
                    target(f'count(ALERTS{{alertstate="firing", severity="{s}"}}) or vector(0)', s, ref)
                    for s, ref in (("P0", "A"), ("P1", "B"), ("P2", "C"))
                ],
                steps=((None, "green"), (1, "red")),
            ),
            stat(
                "Scrape targets down",
                (12, 0, 12, 5),
                [target("count(up == 0) or vector(0)", "down")],
                steps=((None, "green"), (1, "red")),
            ),
            table(
                "Firing alerts",
                (0, 5, 24, 10),
                [target(firing, instant=True, table=True)],
                hide=("Time", "Value", "__name__", "alertstate"),
            ),
            timeseries(
                "Firing alerts over time",
                (0, 15, 12, 8),
                [target(f"count by (severity) ({firing})", "{{severity}}")],
                bars=True,
            ),
            bargauge(
                "Scrape targets up per job",
                (12, 15, 12, 8),
                [target("job:up:ratio", "{{job}}")],
                unit="percentunit",
                steps=((None, "red"), (0.99, "green")),
            ),
        ],
    )


DASHBOARDS = {
    d["uid"]: d
    for d in (cluster_overview(), node_detail(), job_view(), account_chargeback(), alerts_overview())
}


def render(d: dict[str, Any]) -> str:
    return json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
