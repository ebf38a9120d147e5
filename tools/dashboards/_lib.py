"""The panel-building library every vigil dashboard is written with.

Small functions that return Grafana's dashboard JSON model as plain dicts: a query target, the
panel kinds vigil uses (stat, time series, status history, table, bar gauge), a query variable and
the dashboard around them. Each fixes the options vigil wants everywhere, so a dashboard module says
only what differs. Standard library only; see :mod:`tools.dashboards` for why.
"""

from __future__ import annotations

from typing import Any

# The data source roles/grafana/templates/datasources.yaml.j2 provisions (_grafana_datasource_uid).
DATASOURCE = {"type": "prometheus", "uid": "vigil-victoriametrics"}

Panel = dict[str, Any]
Dashboard = dict[str, Any]
Grid = tuple[int, int, int, int]  # x, y, width, height on Grafana's 24-column grid
Step = tuple[float | None, str]  # a threshold: from this value up (None: from the bottom), this colour
Steps = tuple[Step, ...]


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


def thresholds(*steps: Step) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}


GREEN: Steps = ((None, "green"),)


def panel(
    kind: str,
    title: str,
    grid: Grid,
    targets: list[dict[str, Any]],
    *,
    unit: str = "short",
    description: str = "",
    steps: Steps = GREEN,
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


def stat(title: str, grid: Grid, targets: list[dict[str, Any]], **kw: Any) -> Panel:
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
    grid: Grid,
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


def status_history(title: str, grid: Grid, targets: list[dict[str, Any]], **kw: Any) -> Panel:
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
    grid: Grid,
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


def bargauge(title: str, grid: Grid, targets: list[dict[str, Any]], **kw: Any) -> Panel:
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
) -> Dashboard:
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


# --- shared by several dashboards ---------------------------------------------------------------

TEMP_STEPS: Steps = ((None, "green"), (85, "orange"), (92, "red"))
# A subquery at a 1h step tiles a window with the non-overlapping hours of the *:increase1h and
# *:sum1h rules (the pattern of account:gpu_energy_kwh:sum30d); joules / 3.6e6 = kWh.
ACCOUNT_KWH = "sum by (account) (sum_over_time(account:gpu_energy_joules:increase1h[{w}:1h])) / 3.6e6"
ACCOUNT_GPU_HOURS = "sum by (account) (sum_over_time(account:gpu_hours:sum1h[{w}:1h]))"
