"""Write and change a ``class/infiniband`` tree as the kernel lays it out (Documentation/ABI/stable/
sysfs-class-infiniband), for node_exporter's infiniband collector pointed at it (``--path.sysfs``, or a
bind mount over ``/sys/class/infiniband`` in a lab container).

One directory per HCA (``mlx5_0`` ...) with ``fw_ver``, ``board_id``, ``hca_type`` and ``ports/<n>/``
holding ``state`` (``4: ACTIVE``), ``phys_state`` (``5: LinkUp``), ``rate`` (``400 Gb/sec (4X NDR)``),
``link_layer`` and ``counters/`` (one decimal per file). Traffic counters grow with the time since the
tree was made (``advance``); faults set a port down or add link errors.

Every file is written whole under a new name and renamed into place, and nothing is written through a
symbolic link: the tree's root, every directory below it and every file must be real (a tree that
holds a link, or a name that is not a plain device name, is refused with one line and left as it was).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

CLASS = ("class", "infiniband")
DEVICE = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: the counters node_exporter 1.5's collector reads (procfs' names), all 0 on a new tree
COUNTERS = (
    "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery", "local_link_integrity_errors",
    "multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_constraint_errors", "port_rcv_data",
    "port_rcv_discards", "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
    "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets",
    "VL15_dropped",
)  # fmt: skip
#: the counters that count traffic, not errors (a fault adds to the others only)
TRAFFIC = frozenset(n for n in COUNTERS if n.endswith(("_data", "_packets")) or n == "port_xmit_wait")
#: port_rcv_data / port_xmit_data count 32-bit words (the kernel's "divided by 4"): bytes / 4
ACTIVE = ("4: ACTIVE", "5: LinkUp")
DOWN = ("1: DOWN", "3: Disabled")
#: the simulator's own record, beside class/ (never in it: every entry there is taken for an HCA)
STATE_FILE = ".vigil-ibsim.json"


class TreeError(ValueError):
    """A tree that cannot be written or changed: ``object: reason``."""


def _check_dir(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise TreeError(f"{path}: not a directory (a symbolic link or a file); nothing written")


def _mkdirs(root: Path, *parts: str) -> Path:
    path = root
    _check_dir(path)
    path.mkdir(exist_ok=True)
    for part in parts:
        path = path / part
        _check_dir(path)
        try:
            path.mkdir()
        except FileExistsError:
            _check_dir(path)
    return path


def _write(path: Path, text: str) -> None:
    """PATH's content replaced whole: a new file beside it, then renamed (never through a link)."""
    _check_dir(path.parent)
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise TreeError(f"{path}: not a regular file; nothing written")
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _device(name: str) -> str:
    if not DEVICE.fullmatch(name):
        raise TreeError(f"device {name!r}: expected a name such as mlx5_0 (lower-case letters, digits, _)")
    return name


class Tree:
    """The tree under ROOT (ROOT/class/infiniband/...)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.base = self.root.joinpath(*CLASS)

    def _state(self) -> dict[str, dict[str, Any]]:
        path = self.root / STATE_FILE
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise TreeError(f"{path}: not a regular file")
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise TreeError(f"{self.base}: no simulated tree here (write one first)") from None
        except ValueError as e:
            raise TreeError(f"{path}: unreadable ({e})") from None
        if not isinstance(doc, dict):
            raise TreeError(f"{path}: not a tree's state")
        return doc

    def write(self, devices: list[str], *, ports: int = 1, rate_gbps: int = 400, now: float = 0.0) -> None:
        """A new tree: DEVICES, each with PORTS ports ACTIVE at RATE_GBPS, every counter 0."""
        if not devices or ports < 1 or ports > 8 or rate_gbps <= 0:
            raise TreeError("a tree has at least one device, 1 to 8 ports a device and a positive rate")
        names = [_device(d) for d in devices]
        state: dict[str, dict[str, Any]] = {}
        for name in names:
            dev = _mkdirs(self.root, *CLASS, name)
            _write(dev / "fw_ver", "28.39.1002\n")
            _write(dev / "board_id", "MT_0000000838\n")
            _write(dev / "hca_type", "MT4129\n")
            _mkdirs(dev, "ports")
            for port in range(1, ports + 1):
                key = f"{name}/{port}"
                state[key] = {"up": True, "errors": {}, "since": now, "rate": rate_gbps}
                pdir = _mkdirs(dev, "ports", str(port))
                _write(pdir / "rate", f"{rate_gbps} Gb/sec (4X NDR)\n")
                _write(pdir / "link_layer", "InfiniBand\n")
                _mkdirs(pdir, "counters")
        _write(self.root / STATE_FILE, json.dumps(state))
        self.advance(now)

    def _port(self, state: dict[str, dict[str, Any]], device: str, port: int) -> dict[str, Any]:
        key = f"{_device(device)}/{port}"
        if key not in state:
            raise TreeError(f"{device} port {port}: not in the tree at {self.base}")
        return state[key]

    def set_up(self, device: str, port: int, up: bool, now: float) -> None:
        """The port ACTIVE/LinkUp, or DOWN/Disabled (a link that went down counts in link_downed)."""
        state = self._state()
        p = self._port(state, device, port)
        if p["up"] and not up:
            p["errors"]["link_downed"] = p["errors"].get("link_downed", 0) + 1
        p["up"] = up
        _write(self.root / STATE_FILE, json.dumps(state))
        self.advance(now)

    def add_errors(self, device: str, port: int, now: float, **counts: int) -> None:
        """Add to the port's error counters (symbol_error=..., link_error_recovery=...)."""
        state = self._state()
        p = self._port(state, device, port)
        for name, n in counts.items():
            if name not in COUNTERS or name in TRAFFIC or n < 0:
                raise TreeError(f"{name}={n}: not an error counter of the tree, or negative")
            p["errors"][name] = p["errors"].get(name, 0) + n
        _write(self.root / STATE_FILE, json.dumps(state))
        self.advance(now)

    def advance(self, now: float) -> None:
        """Every file of the tree as of NOW: states, and counters (traffic grows while a port is up)."""
        state = self._state()
        for key, p in state.items():
            device, port = key.split("/")
            pdir = self.base / device / "ports" / port
            up = p["up"]
            st, phys = ACTIVE if up else DOWN
            _write(pdir / "state", st + "\n")
            _write(pdir / "phys_state", phys + "\n")
            busy = max(0.0, now - p["since"]) if up else 0.0
            bytes_s = p["rate"] * 125_000_000 * 0.3  # 30 % of the line rate
            values = {name: 0 for name in COUNTERS}
            values["port_rcv_data"] = values["port_xmit_data"] = int(busy * bytes_s / 4)
            values["port_rcv_packets"] = values["port_xmit_packets"] = int(busy * bytes_s / 4096)
            values["unicast_rcv_packets"] = values["unicast_xmit_packets"] = values["port_rcv_packets"]
            for name, n in p["errors"].items():
                values[name] += n
            for name, value in values.items():
                _write(pdir / "counters" / name, f"{value}\n")
