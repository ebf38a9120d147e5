"""``vigil-redfish-exporter`` / ``python3 -m vigil.exporters.redfish``."""

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
from vigil.exporters.redfish.client import MAX_BODY
from vigil.exporters.redfish.collector import DEFAULT_PORT, DEFAULT_REWALK, DEFAULT_WORKERS, RedfishCollector
from vigil.exporters.redfish.config import ConfigError, load_config

log = logging.getLogger("vigil.exporters.redfish")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-redfish-exporter",
        description="Prometheus exporter for server BMCs and rack PDUs over DMTF Redfish, run on the "
        "monitoring host. Every scrape of /metrics reads all targets of --config at once on a bounded "
        "worker pool, each within its own timeout: chassis power, energy and health, temperatures, "
        "fans, power supplies, coolant, and PDU, outlet and circuit power and energy. The resource "
        "tree of each BMC is walked once (following @odata.id links) and again every "
        "--rewalk-interval; a scrape fetches only the readings. A target that fails gives "
        "redfish_up{target} 0 and a log line; the others are unaffected.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument(
        "--listen-address",
        default=f":{DEFAULT_PORT}",
        metavar="[HOST]:PORT",
        help="where to serve /metrics (default: %(default)s)",
    )
    ap.add_argument(
        "--config",
        required=True,
        metavar="FILE",
        help="targets: JSON, or YAML of the documented shape (targets: - name, url, credentials_file, "
        "ca_file, insecure, auth, timeout); credentials files must be mode 0600 or 0400",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help="targets read at once (default: %(default)s); more than the BMCs that may be dead at once",
    )
    ap.add_argument(
        "--rewalk-interval",
        type=float,
        default=DEFAULT_REWALK,
        metavar="SECONDS",
        help="walk each BMC's resource tree again after this long (default: %(default)s)",
    )
    ap.add_argument(
        "--max-body",
        type=int,
        default=MAX_BODY,
        metavar="BYTES",
        help="refuse a Redfish response body larger than this (default: %(default)s)",
    )
    ap.add_argument(
        "--check-config", action="store_true", help="check --config and the files it names, then exit"
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
    if a.workers < 1 or a.rewalk_interval <= 0 or a.max_body < 1024:
        print("FAIL: --workers, --rewalk-interval, --max-body: out of range", file=sys.stderr)
        return 2
    try:
        tls, auth = server_security(a)
    except ServerConfigError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 2
    try:
        targets = load_config(a.config)
    except ConfigError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 2
    if a.check_config:
        print(f"OK: {a.config}: {len(targets)} targets")
        return 0
    collector = RedfishCollector(
        targets, workers=a.workers, rewalk_interval=a.rewalk_interval, max_body=a.max_body
    )
    server = make_server(
        (host.strip("[]"), int(port)), collector.scrape, title="vigil Redfish exporter", tls=tls, auth=auth
    )
    log.info("serving Redfish metrics of %d targets on %s", len(targets), a.listen_address)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        collector.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
