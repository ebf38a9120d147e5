"""NVIDIA XID codes that matter on an HPC cluster: what each says and what to do, with where it is read.

An XID is the NVIDIA driver's error report in the kernel log; dcgm-exporter gives the last one of a
GPU as ``DCGM_FI_DEV_XID_ERRORS`` (newer versions also as its ``err_code`` label). The meanings are
vigil's own short words for NVIDIA's descriptions, each with the page it was read in (``source``).
``kind`` sorts them for the verdict: ``hardware`` (the GPU, its memory, NVLink or its bus: drain the
node and reset or replace the GPU), ``program`` (most often the job's own fault: the GPU is fine),
``memory-repair`` (the GPU repaired its memory: fine until a reset, watch the trend), ``firmware``
(the GPU's own processor: reset if it recurs). Codes not listed are shown by number, "not in vigil's
table" (docs/incidents.md lists the table and its sources).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the pages the meanings were read in
CATALOG = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
XID_GUIDE = "https://docs.nvidia.com/deploy/xid-errors/"
MEMORY_GUIDE = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html"
RETIREMENT = "https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html"


@dataclass(frozen=True, slots=True)
class Xid:
    code: int
    meaning: str
    kind: str
    action: str
    source: str


_TABLE = (
    Xid(8, "the GPU stopped processing (a channel timed out)", "program", "restart the job", CATALOG),
    Xid(
        13,
        "graphics engine exception, most often the program's (an array overrun, an illegal instruction)",
        "program",
        "check the program; the GPU is fine",
        CATALOG,
    ),
    Xid(
        31,
        "GPU memory page fault: an illegal address the program used, rarely the driver or hardware",
        "program",
        "check the program; the GPU is fine",
        XID_GUIDE,
    ),
    Xid(
        43,
        "the GPU stopped the program's work after a fault of the program; the GPU stays healthy",
        "program",
        "check the program; the GPU is fine",
        XID_GUIDE,
    ),
    Xid(
        45,
        "the driver ended the GPU work of a program that stopped (killed, aborted or after an earlier error)",
        "program",
        "none by itself; look at the error before it",
        XID_GUIDE,
    ),
    Xid(
        48,
        "uncorrectable (double-bit) ECC error in the GPU's memory; the program was told",
        "hardware",
        "drain the node, reset the GPU, replace it if it recurs",
        MEMORY_GUIDE,
    ),
    Xid(
        63,
        "a memory row was remapped (or a page retired) and recorded; takes effect at the next reset",
        "memory-repair",
        "reset the GPU when it is idle; watch the trend",
        MEMORY_GUIDE,
    ),
    Xid(
        64,
        "recording a memory row remapping (or page retirement) failed",
        "hardware",
        "drain the node; replace the GPU",
        MEMORY_GUIDE,
    ),
    Xid(
        74,
        "NVLink error: the link to another GPU or NVSwitch, or the device at its other end",
        "hardware",
        "drain the node, reset the GPUs, check the link's other end",
        XID_GUIDE,
    ),
    Xid(
        79,
        "the GPU has fallen off the bus: the host can no longer reach it over PCIe",
        "hardware",
        "drain the node, power-cycle it, replace the GPU if it recurs",
        XID_GUIDE,
    ),
    Xid(
        92,
        "high single-bit ECC error rate: corrected errors above the driver's threshold",
        "hardware",
        "drain at the next chance; a rising rate comes before uncorrectable errors",
        XID_GUIDE,
    ),
    Xid(
        94,
        "contained uncorrectable ECC error: only the programs using that memory were stopped",
        "hardware",
        "reset the GPU when it is idle; replace it if it recurs",
        MEMORY_GUIDE,
    ),
    Xid(
        95,
        "uncontained uncorrectable ECC error: every program on the GPU was stopped",
        "hardware",
        "drain the node, reset the GPU, replace it if it recurs",
        MEMORY_GUIDE,
    ),
    Xid(
        119,
        "the GPU's system processor (GSP) did not answer the driver in time",
        "firmware",
        "reset the GPU if it is stuck or it recurs; update the driver",
        XID_GUIDE,
    ),
    Xid(
        120,
        "the GPU's system processor (GSP) reported an error",
        "firmware",
        "reset the GPU if it is stuck or it recurs; update the driver",
        XID_GUIDE,
    ),
)
TABLE: dict[int, Xid] = {x.code: x for x in _TABLE}
#: the kinds that are the GPU's fault, not the program's (GpuXidHardwareError pages on these codes)
GPU_FAULT = ("hardware", "firmware")


def describe(code: int) -> Xid:
    """The table's entry for ``code``, or one that says it is not in the table."""
    return TABLE.get(code, Xid(code, "not in vigil's table", "unknown", "read NVIDIA's XID catalog", CATALOG))
