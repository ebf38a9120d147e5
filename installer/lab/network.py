"""The lab's bridge on the admin host: 198.18.0.1/24 on `vigil0`, and no forwarding off it.

Each container's veth (`vb-<host>`, made by systemd-nspawn) is attached to the bridge. The lab sets up
no NAT and no forwarding: IPv4 forwarding is switched off for packets arriving on the bridge, whatever
the machine-wide setting, and IPv6 is off on it. The hosts themselves have no route off the subnet.
"""

from __future__ import annotations

import json
from pathlib import Path

from vigil.installer.lab._proc import run
from vigil.installer.lab.errors import LabError
from vigil.installer.lab.hosts import ADMIN_IP, BRIDGE, PREFIX_LEN, SUBNET, Host


def _sysctl(path: str, value: str) -> None:
    p = Path("/proc/sys") / path
    if p.exists():
        p.write_text(value + "\n")


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def veth_name(host: Host) -> str:
    """The admin-side end of HOST's veth pair, as systemd-nspawn names it for --network-bridge."""
    return f"vb-{host.name}"[:15]


def ensure_bridge() -> None:
    # 1. the subnet must not already be routed somewhere else on this machine
    routes = json.loads(run(["ip", "-j", "route", "show", SUBNET], obj=BRIDGE).stdout or "[]")
    for r in routes:
        if r.get("dev") != BRIDGE:
            raise LabError(BRIDGE, f"{SUBNET} is already routed via {r.get('dev')}; remove that route first")
    # 2. the bridge, without forwarding
    if not link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"], obj=BRIDGE)
    _sysctl(f"net/ipv4/conf/{BRIDGE}/forwarding", "0")
    _sysctl(f"net/ipv6/conf/{BRIDGE}/disable_ipv6", "1")
    run(["ip", "addr", "replace", f"{ADMIN_IP}/{PREFIX_LEN}", "dev", BRIDGE], obj=BRIDGE)
    run(["ip", "link", "set", BRIDGE, "up"], obj=BRIDGE)


def remove_bridge(hosts: tuple[Host, ...]) -> None:
    for h in hosts:
        if link_exists(veth_name(h)):
            run(["ip", "link", "del", veth_name(h)], obj=veth_name(h), check=False)
    if link_exists(BRIDGE):
        run(["ip", "link", "del", BRIDGE], obj=BRIDGE)


def forwarding_state() -> dict[str, str]:
    """Forwarding switches that matter for the air gap, as the kernel reports them."""
    out: dict[str, str] = {}
    for key in ("net/ipv4/ip_forward", f"net/ipv4/conf/{BRIDGE}/forwarding"):
        p = Path("/proc/sys") / key
        out[key.replace("/", ".")] = p.read_text().strip() if p.exists() else "absent"
    return out
