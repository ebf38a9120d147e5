"""``vigil-gpusim`` / ``python3 -m vigil.exporters.gpusim``: serve the simulated GPUs, or edit faults."""

from __future__ import annotations

import argparse
import logging
import sys

from vigil.exporters import __version__
from vigil.exporters._http import make_server, setup_logging
from vigil.exporters.gpusim import faults as _faults
from vigil.exporters.gpusim.sim import DEFAULT_JOBMAP_DIR, GpuSimulator, SimConfig

log = logging.getLogger("vigil.exporters.gpusim")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vigil-gpusim",
        description="Simulated NVIDIA GPUs for the lab, standing in for dcgm-exporter: serves /metrics "
        "with the DCGM_FI_* names, types and labels dcgm-exporter emits, tags each GPU's series with "
        "hpc_job from the job map dir (dcgm-exporter's --hpc-job-mapping-dir format, re-read at every "
        "scrape), draws busy power on allocated GPUs and idle power otherwise, and integrates it "
        "exactly into DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION. `vigil-gpusim fault ...` sets or clears "
        "an injected fault.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument(
        "-a",
        "--address",
        default=":9400",
        help="[host]:port to listen on, as dcgm-exporter's --address (default: %(default)s)",
    )
    ap.add_argument(
        "-H",
        "--hpc-job-mapping-dir",
        default=DEFAULT_JOBMAP_DIR,
        metavar="DIR",
        help="job map dir: a file per GPU index, one job id per line (default: %(default)s)",
    )
    ap.add_argument(
        "--faults-file",
        default=_faults.DEFAULT_STATE,
        metavar="FILE",
        help="fault state file, re-read at every scrape (default: %(default)s)",
    )
    ap.add_argument("--gpus", type=int, default=4, help="number of GPUs (default: %(default)s)")
    ap.add_argument("--model", default="NVIDIA H100 80GB HBM3", help="modelName label (default: %(default)s)")
    ap.add_argument("--hostname", help="Hostname label (default: this host's name)")
    ap.add_argument("--driver-version", default="550.90.07", help="DCGM_FI_DRIVER_VERSION label")
    ap.add_argument(
        "--busy-power",
        type=float,
        default=350.0,
        metavar="W",
        help="power of an allocated GPU in watts (default: %(default)s)",
    )
    ap.add_argument(
        "--idle-power",
        type=float,
        default=60.0,
        metavar="W",
        help="power of an idle GPU in watts (default: %(default)s)",
    )
    ap.add_argument(
        "--power-noise",
        type=float,
        default=10.0,
        metavar="W",
        help="busy power varies uniformly within +/- W, drawn once per scrape interval "
        "(default: %(default)s; 0 for none)",
    )
    ap.add_argument("--seed", type=int, help="seed the noise for a reproducible run")
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return ap


def _listen(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise SystemExit(f"FAIL: --address {address!r}: expected [host]:port")
    return (host.strip("[]") or "", int(port))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fault"]:
        return _faults.main(argv[1:])
    a = parser().parse_args(argv)
    setup_logging(a.verbose)
    try:
        cfg = SimConfig(
            hostname=a.hostname,
            gpus=a.gpus,
            model=a.model,
            driver_version=a.driver_version,
            busy_power_w=a.busy_power,
            idle_power_w=a.idle_power,
            power_noise_w=a.power_noise,
            seed=a.seed,
            jobmap_dir=a.hpc_job_mapping_dir,
            faults_file=a.faults_file,
        )
    except ValueError as e:
        print(f"FAIL: vigil-gpusim: {e}", file=sys.stderr)
        return 2
    sim = GpuSimulator(cfg)
    sim.update()
    server = make_server(_listen(a.address), sim.scrape, title="vigil GPU simulator")
    log.info(
        "serving %d simulated GPUs of %s on %s, job map %s, faults %s",
        cfg.gpus,
        cfg.hostname,
        a.address,
        cfg.jobmap_dir,
        cfg.faults_file,
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
