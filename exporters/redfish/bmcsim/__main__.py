"""``vigil-bmcsim`` / ``python3 -m vigil.exporters.redfish.bmcsim``: serve a simulated BMC, or edit faults."""

from __future__ import annotations

import argparse
import logging
import ssl
import sys

from vigil.exporters import __version__
from vigil.exporters._http import setup_logging
from vigil.exporters.redfish.bmcsim import faults as _faults
from vigil.exporters.redfish.bmcsim.sim import MOCKUPS, Model, SimConfig, make_server, tls_context
from vigil.exporters.redfish.config import ConfigError, read_credentials

log = logging.getLogger("vigil.exporters.redfish.bmcsim")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-bmcsim",
        description="A simulated Redfish BMC or PDU for the lab: serves a DMTF mockup (Basic and session "
        "authentication, optionally TLS) whose power follows the GPU simulator (idle + the sum of "
        "DCGM_FI_DEV_POWER_USAGE), whose energy counters integrate that power, and whose inlet and CPU "
        "temperatures rise under the bmc-thermal fault. `vigil-bmcsim fault ...` sets or clears a fault.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument("--listen-address", default=":8443", metavar="[HOST]:PORT", help="(default: %(default)s)")
    ap.add_argument(
        "--mockup",
        default="rackmount1",
        metavar="NAME|DIR",
        help=f"a shipped mockup ({', '.join(MOCKUPS)}) or a directory in the DMTF layout "
        "(default: %(default)s)",
    )
    ap.add_argument(
        "--credentials-file",
        required=True,
        metavar="FILE",
        help="the one account: a line user:password, mode 0600 or 0400",
    )
    ap.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (chain)")
    ap.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    ap.add_argument(
        "--gpu-metrics-url",
        action="append",
        default=[],
        metavar="URL",
        help="a GPU simulator's /metrics (e.g. http://127.0.0.1:9400/metrics); a server takes one, a PDU "
        "one per outlet it feeds, in outlet Id order",
    )
    ap.add_argument(
        "--gpu-metrics-ca-file",
        metavar="PEM",
        help="check an https GPU metrics URL's certificate against this CA (default: the system's)",
    )
    ap.add_argument(
        "--gpu-metrics-credentials-file",
        metavar="FILE",
        help="Basic credentials for the GPU metrics URLs: a line user:password, mode 0600 or 0400",
    )
    ap.add_argument(
        "--gpu-power", type=float, default=0.0, metavar="W", help="GPU power without a URL (default: 0)"
    )
    ap.add_argument(
        "--idle-power", type=float, default=250.0, metavar="W", help="a node's power without its GPUs"
    )
    ap.add_argument("--nodes", type=int, default=1, help="loads on a PDU when no --gpu-metrics-url is given")
    ap.add_argument("--static", action="store_true", help="serve the mockup unchanged (no live readings)")
    ap.add_argument(
        "--faults-file", default=_faults.DEFAULT_STATE, metavar="FILE", help="(default: %(default)s)"
    )
    ap.add_argument("--session-timeout", type=float, default=1800.0, metavar="SECONDS")
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fault"]:
        return _faults.main(argv[1:])
    a = parser().parse_args(argv)
    setup_logging(a.verbose)
    host, _, port = a.listen_address.rpartition(":")
    if not port.isdigit():
        print(f"FAIL: --listen-address {a.listen_address!r}: expected [host]:port", file=sys.stderr)
        return 2
    if bool(a.tls_cert) != bool(a.tls_key):
        print("FAIL: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        creds = read_credentials(a.credentials_file)
        feed = read_credentials(a.gpu_metrics_credentials_file) if a.gpu_metrics_credentials_file else None
        feed_ctx = ssl.create_default_context(cafile=a.gpu_metrics_ca_file) if a.gpu_metrics_ca_file else None
        cfg = SimConfig(
            mockup=a.mockup,
            user=creds.user,
            password=creds.password,
            static=a.static,
            idle_w=a.idle_power,
            gpu_power_w=a.gpu_power,
            gpu_metrics_urls=a.gpu_metrics_url,
            gpu_metrics_context=feed_ctx,
            gpu_metrics_auth=(feed.user, feed.password) if feed is not None else None,
            nodes=a.nodes,
            faults_file=a.faults_file,
            session_timeout=a.session_timeout,
        )
        model = Model(cfg)
        tls = tls_context(a.tls_cert, a.tls_key) if a.tls_cert else None
    except (ConfigError, ValueError, OSError) as e:
        print(f"FAIL: vigil-bmcsim: {e}", file=sys.stderr)
        return 2
    server, _ = make_server((host.strip("[]"), int(port)), model, tls=tls)
    log.info(
        "serving mockup %s on %s (%s), %d load(s), faults %s",
        a.mockup,
        a.listen_address,
        "https" if tls else "http",
        model.loads,
        a.faults_file,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
