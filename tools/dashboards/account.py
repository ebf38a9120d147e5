"""vigil — account chargeback: GPU-hours and GPU energy per Slurm account."""

from __future__ import annotations

from tools.dashboards._lib import (
    ACCOUNT_GPU_HOURS,
    ACCOUNT_KWH,
    Dashboard,
    dashboard,
    table,
    target,
    timeseries,
)

UID = "vigil-account-chargeback"


def build() -> Dashboard:
    return dashboard(
        UID,
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
                        "sum by (account, user) "
                        "(sum_over_time(account_user:gpu_energy_joules:increase1h[$__range:1h])) / 3.6e6",
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
