"""Fault injection in the lab: ``vigil lab fault <kind> <host> [<gpu>] [--clear]``.

GPU faults go into the GPU simulator's state file on the host (``/var/lib/vigil/gpusim/faults.json``),
which the simulator re-reads at every scrape. The edit runs on the host, under the file's lock, by
feeding :mod:`vigil.exporters.gpusim.faults` itself to ``python3 -`` over ssh, so the host needs nothing
but its system python3.

``node-down`` makes the node look dead to monitoring without touching Slurm or the container (the
lab is shared): it stops the node's exporters — whichever of :data:`EXPORTER_UNITS` are active — and
records them in ``/run/vigil/lab-node-down``; ``--clear`` starts exactly those again.

``power-off`` cuts a monitoring host's power: its container is killed with no shutdown, its disk
kept; ``--clear`` boots it again from that disk, with what was deployed on it (the pair's drills).

BMC faults (``bmc-thermal``, ``bmc-down``) go into the node's BMC simulator's state file
(``/var/lib/vigil/bmcsim/faults.json``) the same way, with :mod:`vigil.exporters.redfish.bmcsim.faults`
as the editor: the simulator re-reads it at every request. The node itself, its GPUs and its
exporters are not touched (a BMC lives apart from its node).
"""

from __future__ import annotations

import math
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vigil.installer.lab import state as lab_state
from vigil.installer.lab.errors import LabError, LabRequestRefused
from vigil.installer.lab.hosts import GPUS_PER_NODE, HOSTS, Host, host_by_name
from vigil.installer.lab.paths import LabPaths
from vigil.installer.lab.ssh import ssh, ssh_argv

GPU_KINDS = (
    "ecc-dbe",
    "ecc-sbe-storm",
    "xid",
    "thermal",
    "throttle",
    "nvlink-crc",
    "fb-full",
    "stuck-idle",
)
#: faults of the node's simulated BMC (installer/lab/bmc.py), not of a GPU
BMC_KINDS = ("bmc-thermal", "bmc-down")
#: faults of a whole monitoring host (the monitoring pair's drills, docs/ha.md)
HOST_KINDS = ("power-off",)
KINDS = (*GPU_KINDS, "node-down", *BMC_KINDS, *HOST_KINDS)
FAULTS_FILE = "/var/lib/vigil/gpusim/faults.json"
#: the Slurm job map on a GPU node (roles/slurm_jobmap: slurm_jobmap_dir), a file per GPU
JOBMAP_DIR = "/run/vigil/jobmap"
BMC_FAULTS_FILE = "/var/lib/vigil/bmcsim/faults.json"
NODE_DOWN_FILE = "/run/vigil/lab-node-down"
#: units node-down stops when they are active: the GPU exporter (simulated or real) and node_exporter,
#: as the roles name them (`*_service_name` in their defaults)
EXPORTER_UNITS = (
    "vigil-gpusim.service",
    "vigil-dcgm-exporter.service",
    "vigil-node-exporter.service",
)


@dataclass(frozen=True)
class FaultResult:
    kind: str
    host: str
    gpu: str | None
    cleared: bool
    #: the host's active GPU faults after the change, or the units stopped/started for node-down
    state: str
    #: the jobs whose program --kill-job killed
    killed_jobs: tuple[str, ...] = ()


def _faults_source(bmc: bool = False) -> str:
    """The source of exporters/gpusim/faults.py, or with BMC exporters/redfish/bmcsim/faults.py
    (importable from a checkout; else beside installer/)."""
    parts = ("redfish", "bmcsim") if bmc else ("gpusim",)
    try:
        if bmc:
            import vigil.exporters.redfish.bmcsim.faults as bmc_mod

            path = Path(bmc_mod.__file__)
        else:
            import vigil.exporters.gpusim.faults as gpu_mod

            path = Path(gpu_mod.__file__)
    except ImportError:
        import vigil.installer

        path = (
            Path(vigil.installer.__file__).resolve().parent.parent.joinpath("exporters", *parts, "faults.py")
        )
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise LabError(str(path), f"cannot read the fault editor: {e.strerror or e}") from None


#: the faults that take --rate (errors per second) and --code (an XID code)
RATE_KINDS = ("ecc-sbe-storm", "nvlink-crc")
CODE_KINDS = ("xid",)
#: the faults that take --ramp (seconds to reach --rate)
RAMP_KINDS = ("ecc-sbe-storm",)
#: the faults after which --kill-job ends the job on that GPU as the failure would (its program
#: killed): an uncorrectable ECC error, an XID
KILL_KINDS = ("ecc-dbe", "xid")


def check_fault(
    kind: str,
    host: str,
    gpu: str | None,
    *,
    clear: bool,
    code: int | None,
    rate: float | None,
    ramp: float | None = None,
    kill_job: bool = False,
    hosts: tuple[Host, ...] = HOSTS,
) -> None:
    """Refuse a fault request that the lab (of HOSTS) would not carry out as asked, before anything
    is sent."""
    if kind not in KINDS:
        raise LabRequestRefused(kind, f"unknown fault (kinds: {', '.join(KINDS)})")
    try:
        node = host_by_name(host, hosts)
    except LabError as exc:
        raise LabRequestRefused(exc.obj, exc.reason) from None
    if kind in HOST_KINDS:
        if "monitoring" not in node.groups:
            raise LabRequestRefused(host, f"{kind} acts on monitoring hosts only")
        if gpu is not None:
            raise LabRequestRefused(f"{host}/{gpu}", f"{kind} acts on the whole host: give no GPU index")
    elif not node.gpu_node:
        raise LabRequestRefused(host, "faults are injected on GPU nodes only")
    if kind in HOST_KINDS:
        pass  # checked above
    elif kind in BMC_KINDS:
        if gpu is not None:
            raise LabRequestRefused(f"{host}/{gpu}", f"{kind} acts on the node's BMC: give no GPU index")
    elif kind == "node-down":
        if gpu is not None:
            raise LabRequestRefused(
                f"{host}/{gpu}", "node-down stops the node's exporters: give no GPU index"
            )
    elif gpu is None:
        raise LabRequestRefused(host, f"{kind} needs a GPU index 0..{GPUS_PER_NODE - 1}")
    elif not gpu.isdigit() or not 0 <= int(gpu) < GPUS_PER_NODE:
        raise LabRequestRefused(f"{host}/{gpu}", f"no such GPU: give an index 0..{GPUS_PER_NODE - 1}")
    for flag, value, kinds in (
        ("--code", code, CODE_KINDS),
        ("--rate", rate, RATE_KINDS),
        ("--ramp", ramp, RAMP_KINDS),
        ("--kill-job", "" if kill_job else None, KILL_KINDS),
    ):
        if value is None:
            continue
        if clear:
            raise LabRequestRefused(f"{flag} {value}".strip(), "not used with --clear")
        if kind not in kinds:
            raise LabRequestRefused(
                f"{flag} {value}".strip(), f"is for {' and '.join(kinds)} only, not {kind}"
            )
    if code is not None and not 1 <= code <= 999:
        raise LabRequestRefused(f"--code {code}", "an XID code is 1..999")
    if rate is not None and not (math.isfinite(rate) and 0 < rate <= 1e6):
        raise LabRequestRefused(
            f"--rate {rate}", "must be a number of errors per second above 0 (at most 1e6)"
        )
    if ramp is not None and not (math.isfinite(ramp) and 0 < ramp <= 86400):
        raise LabRequestRefused(f"--ramp {ramp}", "must be a number of seconds above 0 (at most 86400)")


def inject(
    paths: LabPaths,
    kind: str,
    host: str,
    gpu: str | None,
    *,
    clear: bool = False,
    code: int | None = None,
    rate: float | None = None,
    ramp: float | None = None,
    kill_job: bool = False,
) -> FaultResult:
    hosts = lab_state.hosts_of(paths.state_file)
    check_fault(kind, host, gpu, clear=clear, code=code, rate=rate, ramp=ramp, kill_job=kill_job, hosts=hosts)
    h = host_by_name(host, hosts)
    if kind == "node-down":
        return _node_down(paths, h.name, h.ip, clear=clear)
    if kind == "power-off":
        from vigil.installer.lab.control import power

        report = power(paths, h.name, on=clear)
        state = "running" if report.running else "off"
        return FaultResult(kind, h.name, None, clear, f"{state}: {report.system}")
    if kind in BMC_KINDS:
        return _bmc_fault(paths, kind, h.name, h.ip, clear=clear)
    assert gpu is not None  # noqa: S101 - check_fault refuses a GPU fault without an index
    argv = ["python3", "-", "clear" if clear else "set", kind, str(int(gpu)), "--state", FAULTS_FILE]
    if code is not None and not clear:
        argv += ["--code", str(int(code))]
    if rate is not None and not clear:
        argv += ["--rate", repr(float(rate))]
    if ramp is not None and not clear:
        argv += ["--ramp", repr(float(ramp))]
    cmd = " ".join(shlex.quote(a) for a in argv)
    try:
        cp = subprocess.run(
            ssh_argv(paths, h.ip, cmd),
            input=_faults_source(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise LabError(host, "timed out writing the fault state") from None
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[-1]
        raise LabError(f"{host}:{FAULTS_FILE}", why)
    killed = _kill_job_on(paths, h.name, h.ip, str(int(gpu))) if kill_job else ()
    return FaultResult(kind, h.name, str(int(gpu)), clear, cp.stdout.strip(), killed)


#: on the node: the jobs the job map gives GPU $1, and each one's application (its `sleep`, the
#: lab job's program) killed as a GPU failure kills a CUDA program; the batch script then exits
#: 137 and Slurm records the job FAILED. Prints the job ids it killed a program of.
_KILL_JOB = r"""
set -eu
map="$1/$2"
[ -f "$map" ] || exit 0
for job in $(tr -c '0-9
' '
' < "$map" | grep -E '^[0-9]+$' | sort -u); do
  for pid in $(scontrol listpids "$job" 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }'); do
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ]; then
      kill -KILL "$pid" 2>/dev/null && echo "$job"
    fi
  done
done | sort -u
"""


def _kill_job_on(paths: LabPaths, host: str, ip: str, gpu: str) -> tuple[str, ...]:
    """Kill the program of the job(s) on HOST's GPU (see _KILL_JOB); their ids."""
    cmd = f"sh -s -- {shlex.quote(JOBMAP_DIR)} {shlex.quote(gpu)}"
    try:
        cp = subprocess.run(
            ssh_argv(paths, ip, cmd), input=_KILL_JOB, capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        raise LabError(host, "timed out killing the job on the GPU") from None
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[-1]
        raise LabError(f"{host}/{gpu}", f"could not kill the job on the GPU: {why}")
    return tuple(j for j in cp.stdout.split() if j.isdigit())


def _node_down(paths: LabPaths, host: str, ip: str, *, clear: bool) -> FaultResult:
    if clear:
        script = (
            f"[ -f {NODE_DOWN_FILE} ] || exit 0; units=$(cat {NODE_DOWN_FILE}); "
            f'[ -z "$units" ] || systemctl start $units || exit 1; rm -f {NODE_DOWN_FILE}; echo $units'
        )
    else:
        units = " ".join(EXPORTER_UNITS)
        script = (
            f"mkdir -p {Path(NODE_DOWN_FILE).parent}; active=''; "
            f'for u in {units}; do systemctl is-active --quiet $u && active="$active $u"; done; '
            f"prev=$(cat {NODE_DOWN_FILE} 2>/dev/null); all=$(echo $prev $active | tr ' ' '\\n' | sort -u); "
            f"echo $all > {NODE_DOWN_FILE}; "
            f'[ -z "$active" ] || systemctl stop $active || exit 1; echo $all'
        )
    cp = ssh(paths, ip, script, timeout=60)
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[-1]
        raise LabError(host, f"node-down{' --clear' if clear else ''}: {why}")
    return FaultResult("node-down", host, None, clear, cp.stdout.strip())


def _bmc_fault(paths: LabPaths, kind: str, host: str, ip: str, *, clear: bool) -> FaultResult:
    argv = ["python3", "-", "clear" if clear else "set", kind, "--state", BMC_FAULTS_FILE]
    cmd = " ".join(shlex.quote(a) for a in argv)
    try:
        cp = subprocess.run(
            ssh_argv(paths, ip, cmd),
            input=_faults_source(bmc=True),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise LabError(host, "timed out writing the BMC fault state") from None
    if cp.returncode != 0:
        why = (cp.stderr.strip().splitlines() or [f"exit status {cp.returncode}"])[-1]
        raise LabError(f"{host}:{BMC_FAULTS_FILE}", why)
    return FaultResult(kind, host, None, clear, cp.stdout.strip())
