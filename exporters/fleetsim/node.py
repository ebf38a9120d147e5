"""One virtual node's node_exporter page: the core series a GPU node's node_exporter serves.

Names, types and labels are node_exporter's (1.5, Debian 12's; the collectors on by default that a
GPU node has: cpu, meminfo, loadavg, filesystem, netdev, diskstats, hwmon, pressure, stat, time,
timex, uname, os, textfile), with one series per logical CPU and mode as the real one, so a node's
series count grows with its CPUs as a real node's does. The textfile part is what vigil's prolog
writes: ``slurm_job_info`` for each job on the node. Values are plausible, counters never go down.
"""

from __future__ import annotations

import hashlib

from vigil.exporters._expo import escape_label

CPU_MODES = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
#: a busy node's share of each CPU's time by mode (the rest idle)
_BUSY = {
    "iowait": 0.01,
    "irq": 0.002,
    "nice": 0.0,
    "softirq": 0.004,
    "steal": 0.0,
    "system": 0.05,
    "user": 0.6,
}
MOUNTS = (
    ("/dev/nvme0n1p2", "ext4", "/", 480e9),
    ("/dev/nvme0n1p1", "vfat", "/boot/efi", 0.5e9),
    ("/dev/nvme1n1", "xfs", "/scratch", 3.84e12),
    ("tmpfs", "tmpfs", "/run", 50e9),
)
NET_DEVICES = ("eno1", "ib0", "ib1", "lo")
DISKS = ("nvme0n1", "nvme1n1")
MEMORY_BYTES = 2 * 1024**4
#: the per-device families of node_exporter 1.5's netdev and netclass collectors
NET_COUNTERS = tuple(
    f"{direction}_{what}_total"
    for direction, whats in (
        (
            "receive",
            ("bytes", "compressed", "drop", "errs", "fifo", "frame", "multicast", "nohandler", "packets"),
        ),
        ("transmit", ("bytes", "carrier", "colls", "compressed", "drop", "errs", "fifo", "packets")),
    )
    for what in whats
) + ("carrier_changes_total", "carrier_down_changes_total", "carrier_up_changes_total")
NET_GAUGES = (
    "address_assign_type", "carrier", "device_id", "dormant", "flags", "iface_id", "iface_link",
    "iface_link_mode", "mtu_bytes", "name_assign_type", "net_dev_group", "protocol_type", "speed_bytes",
    "transmit_queue_length", "up",
)  # fmt: skip
#: /proc/meminfo's fields as node_exporter's meminfo collector names them (beyond those set below)
MEMINFO = (
    "Active_anon", "Active", "Active_file", "AnonHugePages", "AnonPages", "Bounce", "CommitLimit",
    "Committed_AS", "DirectMap1G", "DirectMap2M", "DirectMap4k", "Dirty", "FileHugePages", "FilePmdMapped",
    "Hugepagesize", "Hugetlb", "Inactive_anon", "Inactive", "Inactive_file", "KReclaimable", "KernelStack",
    "Mapped", "Mlocked", "NFS_Unstable", "PageTables", "Percpu", "SReclaimable", "SUnreclaim",
    "SecPageTables", "ShmemHugePages", "ShmemPmdMapped", "Shmem", "Slab", "SwapCached", "Unevictable",
    "VmallocChunk", "VmallocTotal", "VmallocUsed", "WritebackTmp", "Writeback",
)  # fmt: skip
COLLECTORS = (
    "cpu",
    "diskstats",
    "filesystem",
    "hwmon",
    "loadavg",
    "meminfo",
    "netdev",
    "os",
    "pressure",
    "stat",
    "textfile",
    "time",
    "timex",
    "uname",
)


def _series(name: str, labels: tuple[tuple[str, str], ...] = ()) -> str:
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels) + "}"


def _head(name: str, type_: str, help_: str) -> str:
    return f"# HELP {name} {help_}\n# TYPE {name} {type_}\n"


class NodeExporter:
    """NAME's node_exporter: CPUS logical CPUs, booted at BOOT (wall-clock seconds)."""

    def __init__(self, name: str, *, cpus: int, boot: float) -> None:
        if cpus < 1:
            raise ValueError("a node has at least one CPU")
        self.name = name
        self.cpus = cpus
        self.boot = boot
        self._k = 0.5 + int.from_bytes(hashlib.sha256(name.encode()).digest()[:2], "big") / 131072.0
        # the series' names with their labels, made once: a page is these and the values of now
        self._cpu = [
            [_series("node_cpu_seconds_total", (("cpu", str(c)), ("mode", m))) for m in CPU_MODES]
            for c in range(cpus)
        ]
        self._guest = [
            [
                _series("node_cpu_guest_seconds_total", (("cpu", str(c)), ("mode", m)))
                for m in ("nice", "user")
            ]
            for c in range(cpus)
        ]
        self._softnet = {
            what: [_series(f"node_softnet_{what}_total", (("cpu", str(c)),)) for c in range(cpus)]
            for what in ("dropped", "processed", "times_squeezed")
        }
        self._fs = [
            (
                {
                    what: _series(
                        f"node_filesystem_{what}",
                        (("device", dev), ("fstype", fstype), ("mountpoint", mount)),
                    )
                    for what in (
                        "avail_bytes",
                        "free_bytes",
                        "size_bytes",
                        "files",
                        "files_free",
                        "readonly",
                        "device_error",
                    )
                },
                size,
            )
            for dev, fstype, mount, size in MOUNTS
        ]
        self._net = {
            (d, what): _series(f"node_network_{what}", (("device", d),))
            for d in NET_DEVICES
            for what in NET_COUNTERS + NET_GAUGES
        }
        self._disk = {
            (d, what): _series(f"node_disk_{what}", (("device", d),))
            for d in DISKS
            for what in (
                "read_bytes_total",
                "written_bytes_total",
                "reads_completed_total",
                "writes_completed_total",
                "io_time_seconds_total",
            )
        }
        self._uname = _series(
            "node_uname_info",
            (
                ("domainname", "(none)"),
                ("machine", "x86_64"),
                ("nodename", name),
                ("release", "6.1.0-28-amd64"),
                ("sysname", "Linux"),
                ("version", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"),
            ),
        )

    def render(self, t: float, jobs: list[tuple[str, str, str, str]]) -> str:
        """The page at wall-clock T, with JOBS (id, user, account, partition) on the node."""
        up = max(1.0, t - self.boot)
        busy = 1.0 if jobs else 0.05
        k = self._k
        out: list[str] = []
        add = out.append
        add("# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n")
        add("# TYPE node_cpu_seconds_total counter\n")
        for cpu, per_mode in enumerate(self._cpu):
            for mode, name in zip(CPU_MODES, per_mode):
                share = _BUSY[mode] * k if mode != "idle" else 1.0 - 0.667 * k
                add(f"{name} {up * share + cpu * 0.01:.2f}\n")
        add(
            _head(
                "node_cpu_guest_seconds_total",
                "counter",
                "Seconds the CPUs spent in guests (VMs) for each mode.",
            )
        )
        for per_mode in self._guest:
            for name in per_mode:
                add(f"{name} 0\n")
        for what, names in self._softnet.items():
            add(_head(f"node_softnet_{what}_total", "counter", f"Number of {what.replace('_', ' ')} packets"))
            for cpu, name in enumerate(names):
                value = up * 900.0 * busy * k / self.cpus if what == "processed" else 0.0
                add(f"{name} {value + cpu:.6g}\n")
        for field in MEMINFO:
            unit = "" if field.startswith("HugePages_") else "_bytes"
            name = f"node_memory_{field}{unit}"
            add(_head(name, "gauge", f"Memory information field {field}{unit}."))
            add(f"{name} {MEMORY_BYTES * 0.001 * (1 + len(field) % 7):.6g}\n")
        gauges = (
            ("node_boot_time_seconds", "Node boot time, in unixtime.", self.boot),
            ("node_time_seconds", "System time in seconds since epoch (1970).", t),
            ("node_load1", "1m load average.", self.cpus * 0.6 * busy),
            ("node_load5", "5m load average.", self.cpus * 0.58 * busy),
            ("node_load15", "15m load average.", self.cpus * 0.55 * busy),
            ("node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.", MEMORY_BYTES),
            (
                "node_memory_MemAvailable_bytes",
                "Memory information field MemAvailable_bytes.",
                MEMORY_BYTES * (0.95 - 0.5 * busy),
            ),
            (
                "node_memory_MemFree_bytes",
                "Memory information field MemFree_bytes.",
                MEMORY_BYTES * (0.9 - 0.5 * busy),
            ),
            ("node_memory_Cached_bytes", "Memory information field Cached_bytes.", MEMORY_BYTES * 0.04),
            ("node_memory_Buffers_bytes", "Memory information field Buffers_bytes.", MEMORY_BYTES * 0.001),
            ("node_memory_SwapTotal_bytes", "Memory information field SwapTotal_bytes.", 0),
            ("node_memory_SwapFree_bytes", "Memory information field SwapFree_bytes.", 0),
            ("node_procs_running", "Number of processes in runnable state.", 1 + self.cpus * 0.6 * busy),
            ("node_procs_blocked", "Number of processes blocked waiting for I/O to complete.", 0),
            ("node_timex_sync_status", "Is clock synchronized to a reliable server (1 = yes, 0 = no).", 1),
            ("node_timex_maxerror_seconds", "Maximum error in seconds.", 0.012),
            ("node_timex_offset_seconds", "Time offset in between local system and reference clock.", 2e-6),
            (
                "node_textfile_scrape_error",
                "1 if there was an error opening or reading a file, 0 otherwise",
                0,
            ),
        )
        for name, help_, value in gauges:
            add(f"# HELP {name} {help_}\n# TYPE {name} gauge\n{name} {value:.6g}\n")
        counters = (
            ("node_context_switches_total", "Total number of context switches.", up * 4.0e4 * busy),
            ("node_intr_total", "Total number of interrupts serviced.", up * 2.0e4 * busy),
            ("node_forks_total", "Total number of forks.", up * 3.0),
            (
                "node_pressure_cpu_waiting_seconds_total",
                "Total time in seconds that processes have waited for CPU time",
                up * 0.01,
            ),
            (
                "node_pressure_io_waiting_seconds_total",
                "Total time in seconds that processes have waited due to IO congestion",
                up * 0.002,
            ),
            (
                "node_pressure_memory_waiting_seconds_total",
                "Total time in seconds that processes have waited for memory",
                0.0,
            ),
        )
        for name, help_, value in counters:
            add(f"# HELP {name} {help_}\n# TYPE {name} counter\n{name} {value:.6g}\n")
        for what in (
            "size_bytes",
            "avail_bytes",
            "free_bytes",
            "files",
            "files_free",
            "readonly",
            "device_error",
        ):
            add(_head(f"node_filesystem_{what}", "gauge", f"Filesystem {what.replace('_', ' ')}."))
            for (fs_names, size), (_, fstype, _, _) in zip(self._fs, MOUNTS):
                used = 0.3 if fstype != "tmpfs" else 0.01
                value = {
                    "size_bytes": size,
                    "avail_bytes": size * (1 - used) * 0.95,
                    "free_bytes": size * (1 - used),
                    "files": size / 16384,
                    "files_free": size / 16384 * 0.9,
                }.get(what, 0)
                add(f"{fs_names[what]} {value:.6g}\n")
        family = ""
        for name, (dev, what) in sorted((n, key) for key, n in self._net.items()):
            if name.split("{", 1)[0] != family:
                family = name.split("{", 1)[0]
                kind = "counter" if what in NET_COUNTERS else "gauge"
                add(_head(family, kind, f"Network device statistic {what}."))
            if what not in NET_COUNTERS:
                add(f"{name} {1 if what in ('up', 'carrier', 'flags') else 0}\n")
                continue
            rate = (
                0.0
                if not what.endswith(("bytes_total", "packets_total"))
                else (2.0e8 if dev.startswith("ib") else 1.0e6)
            )
            add(f"{name} {up * rate * busy * k:.6g}\n")
        for name, (_, what) in sorted((n, key) for key, n in self._disk.items()):
            if name.split("{", 1)[0] != family:
                family = name.split("{", 1)[0]
                add(_head(family, "counter", f"The disks' {what.replace('_', ' ')}."))
            rate = {
                "read_bytes_total": 5e7,
                "written_bytes_total": 2e7,
                "reads_completed_total": 400,
                "writes_completed_total": 150,
                "io_time_seconds_total": 0.05,
            }[what]
            add(f"{name} {up * rate * k:.6g}\n")
        add(
            _head(
                "node_uname_info", "gauge", "Labeled system information as provided by the uname system call."
            )
        )
        add(f"{self._uname} 1\n")
        add(
            _head(
                "node_os_info",
                "gauge",
                "A metric with a constant '1' value labeled by build_id, id, name, version.",
            )
        )
        add('node_os_info{id="debian",name="Debian GNU/Linux",version_id="12"} 1\n')
        add(_head("node_hwmon_temp_celsius", "gauge", "Hardware monitor for temperature (input)"))
        for i in range(4):
            add(
                f'node_hwmon_temp_celsius{{chip="platform_coretemp_{i // 2}",sensor="temp{i % 2 + 1}"}}'
                f" {38 + 30 * busy + i}\n"
            )
        add(
            _head(
                "node_scrape_collector_duration_seconds",
                "gauge",
                "node_exporter: Duration of a collector scrape.",
            )
        )
        for coll in COLLECTORS:
            add(f'node_scrape_collector_duration_seconds{{collector="{coll}"}} 0.0012\n')
        add(_head("node_scrape_collector_success", "gauge", "node_exporter: Whether a collector succeeded."))
        for coll in COLLECTORS:
            add(f'node_scrape_collector_success{{collector="{coll}"}} 1\n')
        if jobs:
            add("# HELP slurm_job_info Slurm job on this node (vigil prolog); the value is always 1.\n")
            add("# TYPE slurm_job_info gauge\n")
            for job, user, account, partition in jobs:
                labels = (
                    ("hpc_job", job),
                    ("user", user),
                    ("account", account),
                    ("partition", partition),
                    ("node", self.name),
                )
                add(f"{_series('slurm_job_info', labels)} 1\n")
        return "".join(out)
