"""vigil — cluster overview: the five-second test of the whole GPU cluster."""

from __future__ import annotations

from tools.dashboards._lib import (
    ACCOUNT_KWH,
    GREEN,
    TEMP_STEPS,
    Dashboard,
    bargauge,
    dashboard,
    stat,
    target,
    thresholds,
    timeseries,
)

UID = "vigil-cluster-overview"


def build() -> Dashboard:
    """The five-second test: six panels, every one a single recording rule (or a sum of one)."""
    return dashboard(
        UID,
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
                description="Healthy: reporting, below 92 °C, no hardware XID, no row-remap failure, no "
                "double-bit ECC error in the last hour. Total: every GPU seen in the last day.",
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
