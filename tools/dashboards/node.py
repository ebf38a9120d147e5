"""vigil — node: one node's GPUs, heat, power, memory and links, and its chassis as the BMC reports it."""

from __future__ import annotations

from tools.dashboards._lib import (
    TEMP_STEPS,
    Dashboard,
    dashboard,
    query_variable,
    status_history,
    target,
    timeseries,
)

UID = "vigil-node"


def build() -> Dashboard:
    sel = 'instance="$instance"'
    # the node's BMC: the Redfish exporter runs elsewhere (its `instance`), the BMC is its `target`
    bmc = 'target="$instance"'
    return dashboard(
        UID,
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
                        "sum by (gpu) "
                        f"(rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{sel}}}[$__rate_interval]))",
                        "GPU {{gpu}} flit",
                        "A",
                    ),
                    target(
                        "sum by (gpu) "
                        f"(rate(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{{{sel}}}[$__rate_interval]))",
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
                        "sum by (gpu) "
                        f"(increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{sel}}}[$__rate_interval]))",
                        "GPU {{gpu}}",
                    )
                ],
                description="PCIe link replays per interval: a flaky riser or slot.",
            ),
            timeseries(
                "Chassis power",
                (0, 30, 12, 8),
                [
                    target(
                        f"max by (chassis) (redfish_chassis_power_watts{{{bmc}}})",
                        "server (BMC, chassis {{chassis}})",
                        "A",
                    ),
                    target(f"sum(DCGM_FI_DEV_POWER_USAGE{{{sel}}})", "GPUs (DCGM)", "B"),
                ],
                unit="watt",
                description="The server's input power as its BMC reports it over Redfish (the target named "
                "after the node), beside its GPUs' power: the rest is CPUs, memory, fans and losses.",
            ),
            timeseries(
                "Chassis temperature",
                (12, 30, 12, 8),
                [
                    target(
                        "max by (sensor, context) "
                        f'(redfish_temperature_celsius{{{bmc},context=~"Intake|CPU|Exhaust"}})',
                        "{{sensor}} ({{context}})",
                    )
                ],
                unit="celsius",
                description="Inlet, CPU and exhaust temperatures from the BMC. An intake or CPU at its "
                "critical threshold raises ChassisTemperatureCritical.",
            ),
        ],
        variables=(query_variable("instance", "Node", "label_values(DCGM_FI_DEV_GPU_TEMP, instance)"),),
    )
