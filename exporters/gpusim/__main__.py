"""``vigil-gpusim`` / ``python3 -m vigil.exporters.gpusim``: serve the simulated GPUs, or edit faults."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from vigil.exporters import __version__
from vigil.exporters._http import (
    ServerConfigError,
    add_server_arguments,
    make_server,
    server_security,
    setup_logging,
)
from vigil.exporters.gpusim import faults as _faults
from vigil.exporters.gpusim.jobmap import JobMapError
from vigil.exporters.gpusim.mig import parse_mig
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
    # spelled as dcgm-exporter 4.8.2 spells them: --address/-a (env DCGM_EXPORTER_LISTEN) and
    # --hpc-job-mapping-dir (env DCGM_HPC_JOB_MAPPING_DIR; no short form)
    ap.add_argument(
        "-a",
        "--address",
        default=os.environ.get("DCGM_EXPORTER_LISTEN") or ":9400",
        help="[host]:port to listen on, as dcgm-exporter's --address (env DCGM_EXPORTER_LISTEN; "
        "default: %(default)s)",
    )
    ap.add_argument(
        "--hpc-job-mapping-dir",
        default=os.environ.get("DCGM_HPC_JOB_MAPPING_DIR") or DEFAULT_JOBMAP_DIR,
        metavar="DIR",
        help="job map dir: a file per GPU index (<gpu>.<GPU instance id> for a MIG instance), one job id "
        "per line (env DCGM_HPC_JOB_MAPPING_DIR; default: %(default)s)",
    )
    ap.add_argument(
        "--mig",
        action="append",
        default=(os.environ.get("VIGIL_GPUSIM_MIG") or "").split(),
        metavar="GPU:PROFILE[@ID][,...]",
        help="put GPU in MIG mode with these GPU instances, e.g. 2:3g.40gb,3g.40gb or 3:1g.10gb@9 "
        "(once per GPU): its series come per instance with GPU_I_PROFILE and GPU_I_ID, tagged from the "
        "job map files <gpu>.<GPU instance id> (env VIGIL_GPUSIM_MIG: the same, separated by spaces)",
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
    add_server_arguments(ap)
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
        tls, auth = server_security(a)
    except ServerConfigError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 2
    try:
        mig = {}
        for spec in a.mig:
            gpu, instances = parse_mig(spec)
            if gpu in mig:
                raise ValueError(f"--mig {spec!r}: GPU {gpu} is given twice")
            mig[gpu] = instances
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
            mig=mig,
        )
    except ValueError as e:
        print(f"FAIL: vigil-gpusim: {e}", file=sys.stderr)
        return 2
    sim = GpuSimulator(cfg)
    try:
        sim.update()
    except JobMapError as e:
        log.error("%s; the first scrape reads it again", e)
    server = make_server(_listen(a.address), sim.scrape, title="vigil GPU simulator", tls=tls, auth=auth)
    log.info(
        "serving %d simulated GPUs of %s on %s (MIG: %s), job map %s, faults %s",
        cfg.gpus,
        cfg.hostname,
        a.address,
        ", ".join(f"GPU {g}: {' '.join(f'{i.profile}@{i.gi}' for i in v)}" for g, v in sorted(mig.items()))
        or "none",
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
