"""The DCGM fields the simulator emits: name, Prometheus type and help, as dcgm-exporter declares them.

Types follow dcgm-exporter's counters CSV (``etc/default-counters.csv`` and ``dcp-metrics-included.csv``):
the energy, ECC, retired-page, remapped-row, NVLink and PCIe replay totals are counters; the rest are
gauges. DCGM reports integer fields with ``%d`` and floating-point ones with ``%f``; ``is_double``
says which is which. ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` is field 112, which newer DCGM also names
``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``; dcgm-exporter names the metric after the CSV line, and vigil's
collectors CSV uses the throttle name.
"""

from __future__ import annotations

from typing import NamedTuple


class Field(NamedTuple):
    name: str
    type: str
    help: str
    is_double: bool = False


FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    Field("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    Field("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    Field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    Field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", True),
    Field("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    Field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    Field("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    Field("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    Field("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    Field("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons (bitmask)."),
    Field("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB)."),
    Field("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    Field("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    Field("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    Field("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    Field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    Field("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    Field("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    Field("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement."),
    Field(
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    Field(
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors."
    ),
    Field(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    Field(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    Field(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"
    ),
    Field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    Field("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", True),
    Field(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        True,
    ),
)

#: fields DCGM leaves blank for a MIG instance (NVML has no utilisation of a MIG-enabled GPU), which
#: dcgm-exporter then skips: a MIG instance's series have DCGM_FI_PROF_GR_ENGINE_ACTIVE instead
NOT_ON_MIG = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"})

#: clock throttle (clocks event) reason bits, as NVML defines them
THROTTLE_GPU_IDLE = 0x1
THROTTLE_SW_POWER_CAP = 0x4
THROTTLE_HW_SLOWDOWN = 0x8
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
THROTTLE_HW_POWER_BRAKE = 0x80

#: labels on every GPU series, in dcgm-exporter 4.8.2's order: these, MIG_LABELS on a MIG instance's
#: series, then Hostname, then DCGM_FI_DRIVER_VERSION, then the attributes in name order
#: (err_code, err_msg on the XID series; hpc_job)
BASE_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")
HOST_LABEL = "Hostname"
DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"
JOB_LABEL = "hpc_job"
XID_LABELS = ("err_code", "err_msg")

#: err_msg of DCGM_FI_DEV_XID_ERRORS by its value (err_code, in decimal), for the XIDs a cluster
#: sees most, worded as NVIDIA's XID catalogue and dcgm-exporter word them; any other code gets
#: UNKNOWN_XID here (dcgm-exporter knows more codes)
XID_MESSAGES: dict[int, str] = {
    0: "No Error",
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    140: "Unrecovered ECC Error",
}
UNKNOWN_XID = "Unknown Error"
