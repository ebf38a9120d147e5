"""``vigil-fleetsim`` / ``python3 -m vigil.exporters.fleetsim``: serve a fleet, or print its scrape jobs."""

from __future__ import annotations

import argparse
import json
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
from vigil.exporters.fleetsim.fleet import Fleet, node_names, scrape_configs

log = logging.getLogger("vigil.exporters.fleetsim")


def _shape(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--nodes", type=int, default=64, help="virtual GPU nodes (default: %(default)s)")
    ap.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default: %(default)s)")
    ap.add_argument(
        "--name-prefix",
        default="fleet",
        help="node names are PREFIX0000, PREFIX0001, ... (default: %(default)s)",
    )


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-fleetsim",
        description="Serve the exporters of a fleet of virtual GPU nodes from one process: each node's "
        "dcgm-exporter (vigil's GPU simulator) and node_exporter page at /nodes/NAME/EXPORTER/metrics, "
        "the cluster's Slurm exporter at /slurm_exporter/metrics, jobs of six accounts from a schedule "
        "that is a function of the node and the time. `vigil-fleetsim scrape-config ...` prints the "
        "scrape jobs that read it.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _shape(ap)
    ap.add_argument(
        "--cpus-per-node", type=int, default=64, help="logical CPUs per node (default: %(default)s)"
    )
    ap.add_argument("--seed", type=int, default=0, help="the schedule's seed (default: %(default)s)")
    ap.add_argument(
        "--job-minutes", type=float, default=30.0, help="how long each job runs (default: %(default)s)"
    )
    ap.add_argument(
        "-a", "--address", default=":9450", help="[host]:port to listen on (default: %(default)s)"
    )
    add_server_arguments(ap)
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return ap


def config_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-fleetsim scrape-config",
        description="Print (JSON, which is YAML) the scrape jobs node_exporter, dcgm_exporter and "
        "slurm_exporter that read a fleet served at --target, one target per node with `instance` the "
        "node's name, for VictoriaMetrics' -promscrape.config or the role's "
        "victoriametrics_scrape_extra_configs.",
    )
    _shape(ap)
    ap.add_argument("--target", required=True, metavar="HOST:PORT", help="where the fleet is served")
    ap.add_argument("--scheme", choices=("https", "http"), default="https")
    ap.add_argument("--ca-file", metavar="FILE", help="the CA that signed the fleet's certificate")
    ap.add_argument("--server-name", help="the name to check the fleet's certificate against")
    ap.add_argument("--username", help="Basic auth user")
    ap.add_argument("--password-file", metavar="FILE", help="Basic auth password file")
    ap.add_argument("--no-slurm", action="store_true", help="leave the Slurm exporter's job out")
    return ap


def _listen(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--address {address!r}: expected [host]:port")
    return (host.strip("[]") or "", int(port))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["scrape-config"]:
        c = config_parser().parse_args(argv[1:])
        try:
            names = node_names(c.nodes, c.name_prefix)
        except ValueError as e:
            print(f"FAIL: vigil-fleetsim: {e}", file=sys.stderr)
            return 2
        jobs = scrape_configs(
            names,
            c.target,
            scheme=c.scheme,
            ca_file=c.ca_file,
            server_name=c.server_name,
            username=c.username,
            password_file=c.password_file,
            slurm=not c.no_slurm,
        )
        json.dump({"scrape_configs": jobs}, sys.stdout, indent=1)
        print()
        return 0
    a = parser().parse_args(argv)
    setup_logging(a.verbose)
    try:
        address = _listen(a.address)
        tls, auth = server_security(a)
        fleet = Fleet(
            nodes=a.nodes,
            gpus=a.gpus_per_node,
            cpus=a.cpus_per_node,
            prefix=a.name_prefix,
            seed=a.seed,
            job_seconds=a.job_minutes * 60.0,
        )
    except (ServerConfigError, ValueError) as e:
        print(f"FAIL: vigil-fleetsim: {e}", file=sys.stderr)
        return 2
    server = make_server(
        address,
        fleet.own_metrics,
        title="vigil fleet simulator",
        tls=tls,
        auth=auth,
        paths=fleet.pages(),
        max_per_source=max(64, 4 * a.nodes),
        max_connections=max(128, 4 * a.nodes),
    )
    log.info(
        "serving %d virtual nodes of %d GPUs (%s .. %s) on %s",
        len(fleet.names),
        fleet.gpus,
        fleet.names[0],
        fleet.names[-1],
        a.address,
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
