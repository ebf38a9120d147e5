"""vigil — job: one Slurm job's GPUs, who, where, power, energy and errors."""

from __future__ import annotations

from tools.dashboards._lib import Dashboard, dashboard, query_variable, stat, table, target, timeseries

UID = "vigil-job"


def build() -> Dashboard:
    sel = 'hpc_job="$hpc_job"'
    return dashboard(
        UID,
        "vigil — job",
        "One Slurm job's GPUs: who, where, power, energy, errors.",
        [
            table(
                "Job",
                (0, 0, 16, 5),
                [
                    target(
                        "max by (hpc_job, user, account, partition, node) "
                        f"(last_over_time(slurm_job_info{{{sel}}}[$__range]))",
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
                        " - "
                        f"min_over_time(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{sel}}}[$__range]))",
                        "NVLink CRC",
                        "D",
                        instant=True,
                    ),
                ],
                steps=((None, "green"), (1, "red")),
                description="XID: the highest code reported (0 = none). Counters: errors counted on the "
                "job's GPUs in the range (highest minus lowest of the job's own series: an error from "
                "before the job is not its own).",
            ),
        ],
        variables=(query_variable("hpc_job", "Job", "label_values(DCGM_FI_DEV_POWER_USAGE, hpc_job)"),),
    )
