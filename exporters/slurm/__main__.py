"""``vigil-slurm-exporter`` / ``python3 -m vigil.exporters.slurm``."""

from __future__ import annotations

import argparse
import logging
import sys

from vigil.exporters import __version__
from vigil.exporters._http import (
    ServerConfigError,
    add_server_arguments,
    make_server,
    server_security,
    setup_logging,
)
from vigil.exporters.slurm.collector import DEFAULT_PORT, DEFAULT_TIMEOUT, SlurmCollector

log = logging.getLogger("vigil.exporters.slurm")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-slurm-exporter",
        description="Prometheus exporter for a Slurm cluster, run on the controller (or any host with "
        "the Slurm client commands and munge). Every scrape of /metrics runs squeue, sinfo and sdiag "
        "at once with compact format strings and renders one consistent snapshot: nodes by state, "
        "CPUs and GPUs allocated/idle, jobs by state per account and partition, pending reasons, "
        "scheduler cycle figures. A command that fails or hangs gives slurm_up{command=...} 0 and a "
        "log line; the exporter itself keeps serving.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument(
        "--listen-address",
        default=f":{DEFAULT_PORT}",
        metavar="[HOST]:PORT",
        help="where to serve /metrics (default: %(default)s)",
    )
    ap.add_argument(
        "--command-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="kill a Slurm command that runs longer (default: %(default)s)",
    )
    add_server_arguments(ap)
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    setup_logging(a.verbose)
    host, _, port = a.listen_address.rpartition(":")
    if not port.isdigit():
        print(f"FAIL: --listen-address {a.listen_address!r}: expected [host]:port", file=sys.stderr)
        return 2
    if a.command_timeout <= 0:
        print("FAIL: --command-timeout: must be positive", file=sys.stderr)
        return 2
    try:
        tls, auth = server_security(a)
    except ServerConfigError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 2
    collector = SlurmCollector(timeout=a.command_timeout)
    server = make_server(
        (host.strip("[]"), int(port)), collector.scrape, title="vigil Slurm exporter", tls=tls, auth=auth
    )
    log.info("serving Slurm metrics on %s (command timeout %gs)", a.listen_address, a.command_timeout)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
