"""``vigil-ibsim`` / ``python3 -m vigil.exporters.ibsim``: write a simulated InfiniBand tree, or change it."""

from __future__ import annotations

import argparse
import sys
import time

from vigil.exporters.ibsim.tree import Tree, TreeError


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-ibsim",
        description="A simulated class/infiniband sysfs tree under ROOT (ROOT/class/infiniband/DEVICE/...), "
        "as the kernel lays it out, for node_exporter's infiniband collector (--path.sysfs=ROOT, or a bind "
        "mount of ROOT/class/infiniband over /sys/class/infiniband).",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="a new tree: every port ACTIVE, every counter 0")
    w.add_argument("root")
    w.add_argument("--devices", default="mlx5_0", help="comma-separated HCA names (default: %(default)s)")
    w.add_argument("--ports", type=int, default=1, help="ports per HCA (default: %(default)s)")
    w.add_argument("--rate", type=int, default=400, metavar="GBPS", help="link rate (default: %(default)s)")
    a = sub.add_parser("advance", help="rewrite the counters as of now (traffic grows on ports that are up)")
    a.add_argument("root")
    f = sub.add_parser("fault", help="a port down (or up again), or link errors added")
    f.add_argument("root")
    f.add_argument("port", metavar="DEVICE[:PORT]", help="e.g. mlx5_0 or mlx5_0:1 (port 1 when omitted)")
    f.add_argument("kind", choices=("down", "up", "errors"))
    f.add_argument("--symbol", type=int, default=0, help="symbol errors to add (errors)")
    f.add_argument("--recovery", type=int, default=0, help="link error recoveries to add (errors)")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    tree = Tree(a.root)
    now = time.time()
    try:
        if a.command == "write":
            tree.write(
                [d.strip() for d in a.devices.split(",") if d.strip()],
                ports=a.ports,
                rate_gbps=a.rate,
                now=now,
            )
        elif a.command == "advance":
            tree.advance(now)
        else:
            device, _, port = a.port.partition(":")
            if port and not port.isdigit():
                raise TreeError(f"{a.port!r}: expected DEVICE or DEVICE:PORT")
            n = int(port or 1)
            if a.kind == "errors":
                if a.symbol <= 0 and a.recovery <= 0:
                    raise TreeError("errors: give --symbol N and/or --recovery N")
                tree.add_errors(device, n, now, symbol_error=a.symbol, link_error_recovery=a.recovery)
            else:
                tree.set_up(device, n, a.kind == "up", now)
    except (TreeError, OSError) as e:
        print(f"FAIL: vigil-ibsim: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
