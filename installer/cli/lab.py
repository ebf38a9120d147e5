"""``vigil lab``: real systemd hosts in systemd-nspawn containers, air-gapped by construction."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vigil.basics.errors import VigilError
from vigil.installer import ops
from vigil.installer.cli._common import json_option
from vigil.installer.cli._output import emit_json, ok, say, showing_progress
from vigil.installer.lab.hosts import (
    ADMIN_IP,
    BRIDGE,
    DEFAULT_GPU_NODES,
    DEFAULT_MONITORING_HOSTS,
    GPUS_PER_NODE,
    HOSTS,
    MAX_GPU_NODES,
    MAX_MONITORING_HOSTS,
    SUBNET,
    host_by_name,
)

#: VictoriaMetrics on the lab's monitoring host
VM_ADDRESS, VM_PORT = host_by_name("mon01").ip, 8428

_ROLES = {
    "monitoring": "monitoring",
    "slurm_controller": "slurmctld, slurmdbd, MariaDB, munge",
    "gpu_nodes": "slurmd",
}


def _hosts_text() -> str:
    """The lab's hosts for --help, from the one place they are defined (vigil.installer.lab.hosts)."""
    hosts = ", ".join(f"{h.name} {h.ip} ({', '.join(_ROLES[g] for g in h.groups)})" for h in HOSTS)
    return (
        f"{hosts}; each GPU node has {GPUS_PER_NODE} simulated GPUs; the admin host is {ADMIN_IP} "
        f"on bridge {BRIDGE}"
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "lab",
        help="run the lab cluster: real systemd hosts with Slurm and simulated GPUs",
        description="The lab is Debian 12 hosts booted with systemd-nspawn on this machine: "
        f"{_hosts_text()} (more GPU nodes with `lab up --gpu-nodes N`, a second monitoring host mon02 at "
        "198.18.0.12 with `--monitoring-hosts 2`). They reach each other and "
        f"the admin host on {SUBNET} and have no route "
        "anywhere else. Needs root. State lives in $VIGIL_LAB_DIR (default /var/lib/vigil-lab), the "
        "debootstrapped root file system in $VIGIL_LAB_CACHE (default /var/cache/vigil/lab).",
    )
    ls = p.add_subparsers(dest="lab_command", metavar="ACTION")
    ls.required = True

    u = ls.add_parser(
        "up",
        parents=[json_option()],
        help="build (once) and boot the lab hosts; write the Ansible inventory",
        description="Debootstrap Debian 12 into the cache on first use (about a minute, from the Debian "
        "mirror apt already uses), give each host its own root fs, boot it, and wait until every host "
        "answers over SSH, `systemctl is-system-running` has settled and Slurm shows every GPU node idle. "
        "Then write DIR/hosts.yml. Hosts already running are left alone, so running it twice is safe. "
        "A host that comes up `degraded` is reported with its failed units.",
    )
    u.add_argument(
        "--inventory",
        type=Path,
        default=Path("inventories/lab"),
        metavar="DIR",
        help="directory for hosts.yml (default: %(default)s, relative to the current directory)",
    )
    u.add_argument(
        "--mirror",
        metavar="URI",
        help="Debian mirror for the first build (default: the bookworm entry of apt's sources)",
    )
    u.add_argument(
        "--gpu-nodes",
        type=int,
        metavar="N",
        help=f"GPU nodes gpu01..gpuNN at 198.18.0.21 and up, 1-{MAX_GPU_NODES} (default: the running "
        f"lab's size, else {DEFAULT_GPU_NODES}; docs/lab.md says what each node costs)",
    )
    u.add_argument(
        "--monitoring-hosts",
        type=int,
        metavar="N",
        help=f"monitoring hosts mon01..monNN, 1-{MAX_MONITORING_HOSTS}: mon01 at 198.18.0.10, monK at "
        f"198.18.0.(10+K) (default: the running lab's size, else {DEFAULT_MONITORING_HOSTS}; two make the "
        "monitoring pair, docs/ha.md)",
    )
    u.set_defaults(func=_up, action="lab.up")

    d = ls.add_parser(
        "down",
        parents=[json_option()],
        help="stop the lab hosts and remove the bridge",
        description="Stop every container the lab started by signalling its own recorded systemd-nspawn "
        "process (an orderly shutdown, SIGKILL after 30 s), unmount and remove the hosts' root file "
        "systems, remove the bridge, its veths and the generated inventory. The cached root file system "
        "and the lab's SSH key are kept for the next `lab up`.",
    )
    d.set_defaults(func=_down, action="lab.down")

    s = ls.add_parser(
        "status",
        parents=[json_option("status")],
        help="show each lab host: PID, running, systemd state",
        description="For each host: the PID of its systemd-nspawn process, whether it runs, and what "
        "`systemctl is-system-running` answers on it (with failed units if any); the bridge, the "
        "forwarding switches and the Slurm nodes' states. Exit 0 when every host runs and is `running`, "
        "1 otherwise.",
    )
    s.set_defaults(func=_status, action="lab.status")

    j = ls.add_parser(
        "job",
        parents=[json_option("job")],
        help="submit a GPU job to the lab's Slurm; print its id, node and GPUs",
        description="Submit a batch job (`sbatch` on ctl01, as the lab user USER) under Slurm account "
        "ACCOUNT that holds N GPUs for S seconds (`sleep S`), optionally pinned to one GPU node. Its "
        "prolog writes the job map, so the GPU simulator tags the GPUs' series with hpc_job=<job id> "
        "and draws busy power on them while it runs. Waits up to 15 s for Slurm to place it, then prints "
        "the job id, its node and GPU indices, and the query that shows its GPUs' samples (with --json: "
        "the job as data). "
        "Cancel it early with `scancel <id>` on ctl01.",
    )
    j.add_argument("--account", required=True, help="Slurm account, e.g. physics or chemistry")
    j.add_argument(
        "--user", default="alice", help="lab user to submit as: alice, bob or root (default: %(default)s)"
    )
    j.add_argument("--gpus", type=int, required=True, metavar="N", help="GPUs to allocate (1-4)")
    j.add_argument("--seconds", type=int, required=True, metavar="S", help="how long the job runs")
    j.add_argument("--node", help="run on this GPU node, e.g. gpu01 (default: Slurm chooses)")
    j.set_defaults(func=_job, action="lab.job")

    f = ls.add_parser(
        "fault",
        parents=[json_option()],
        help="inject (or --clear) a simulated GPU or BMC fault, or a node-down, on a lab GPU node; "
        "or a power-off of a monitoring host",
        description="GPU faults are written to the GPU simulator's state file on HOST "
        "(/var/lib/vigil/gpusim/faults.json), which it re-reads at every scrape: ecc-dbe (one double-bit "
        "ECC error, a retired page, row remap failure), ecc-sbe-storm (single-bit ECC errors at --rate/s,"
        " reached over --ramp seconds), xid (last XID = --code, default 79; with --kill-job, as with ecc-"
        "dbe, the job on the GPU loses its program), thermal (temperature ramps 1 C/s to 97 C, thermal "
        "throttling above 85 C), throttle (HW slowdown, SM clock halved), nvlink-crc (CRC errors at "
        "--rate/s), fb-full (frame buffer full), stuck-idle (allocated but 0 % utilisation, idle power). "
        "node-down stops the node's exporter units (GPU exporter, node_exporter) so every scrape of it "
        "fails; Slurm and the host keep running. BMC faults go to the node's simulated BMC "
        "(/var/lib/vigil/bmcsim/faults.json, re-read at every request): bmc-thermal (inlet 48 C, CPU 96 "
        "C, above their critical thresholds; those sensors and the chassis report Health Critical), bmc-"
        "down (the BMC closes every connection unanswered); the node, its GPUs and its exporters are "
        "untouched. power-off (a monitoring host) kills its container with no shutdown, its disk kept; "
        "--clear boots it again from that disk. --clear undoes each one.",
    )
    f.add_argument(
        "kind",
        choices=(
            "ecc-dbe",
            "ecc-sbe-storm",
            "xid",
            "thermal",
            "throttle",
            "nvlink-crc",
            "fb-full",
            "stuck-idle",
            "node-down",
            "bmc-thermal",
            "bmc-down",
            "power-off",
        ),
        metavar="KIND",
        help="ecc-dbe, ecc-sbe-storm, xid, thermal, throttle, nvlink-crc, fb-full, stuck-idle, node-down, "
        "bmc-thermal, bmc-down, power-off",
    )
    f.add_argument("host", metavar="HOST", help="GPU node, e.g. gpu01 (power-off: a monitoring host, mon01)")
    f.add_argument(
        "gpu", nargs="?", metavar="GPU", help="GPU index 0-3 (not for node-down, bmc-thermal, bmc-down)"
    )
    f.add_argument("--clear", action="store_true", help="remove the fault")
    f.add_argument("--code", type=int, help="XID code for xid (default 79)")
    f.add_argument("--rate", type=float, help="errors per second for ecc-sbe-storm and nvlink-crc")
    f.add_argument(
        "--ramp", type=float, metavar="SECONDS", help="ecc-sbe-storm: grow from 0 to --rate over SECONDS"
    )
    f.add_argument(
        "--kill-job",
        action="store_true",
        help="ecc-dbe, xid: then kill the program of the job on that GPU, as the failure would "
        "(Slurm records the job FAILED)",
    )
    f.set_defaults(func=_fault, action="lab.fault")


def _up(args: argparse.Namespace, inv: ops.Invocation) -> int:
    with showing_progress(inv, steps="  ", bars=False):
        res = ops.lab_up(
            inv,
            inventory_dir=args.inventory,
            mirror=args.mirror,
            gpu_nodes=args.gpu_nodes,
            monitoring_hosts=args.monitoring_hosts,
        )
    degraded = [h for h in res.hosts if h.system != "running"]
    if args.json:
        emit_json(
            {
                "inventory": str(res.inventory),
                "cache_rootfs": str(res.cache_rootfs),
                "cache_built": res.cache_built,
                "seconds": round(res.seconds, 1),
                "slurm_nodes": res.slurm_nodes,
                "hosts": [h.to_json() for h in res.hosts],
            }
        )
    else:
        for h in res.hosts:
            extra = f" failed: {', '.join(h.failed_units)}" if h.failed_units else ""
            print(
                f"{h.name:6} {h.ip:13} pid {h.pid:<8} {h.system}"
                f"{' (started)' if h.started_now else ''}{extra}"
            )
        for h in degraded:
            print(
                f"WARN: {h.name}: {h.system}; failed units: {', '.join(h.failed_units) or 'none listed'}",
                file=sys.stderr,
            )
        nodes = ", ".join(f"{n} {s}" for n, s in sorted(res.slurm_nodes.items()))
        ok(
            "lab",
            f"{len(res.hosts)} hosts up in {res.seconds:.0f}s; slurm: {nodes}; inventory {res.inventory}",
        )
    return 0


def _down(args: argparse.Namespace, inv: ops.Invocation) -> int:
    with showing_progress(inv, steps="  ", bars=False):
        outcome = ops.lab_down(inv)
    if args.json:
        emit_json({"hosts": outcome})
    else:
        ok("lab", f"down; {len(outcome)} hosts stopped" if outcome else "down; nothing was running")
    return 0


def _status(args: argparse.Namespace, inv: ops.Invocation) -> int:
    st, healthy = ops.lab_status(inv)
    if args.json:
        emit_json(st)
        return 0 if healthy else 1
    for h in st["hosts"]:
        pid = h["pid"] if h["pid"] is not None else "-"
        extra = f" failed: {', '.join(h['failed_units'])}" if h["failed_units"] else ""
        say(  # the host's answers (system state, failed units): escapes shown
            f"{h['name']:6} {h['ip']:13} pid {pid!s:<8} {'up  ' if h['running'] else 'down'} "
            f"{h['system']}{extra}"
        )
    print(
        f"bridge: {st['bridge'] or 'absent'}; forwarding: "
        + ", ".join(f"{k}={v}" for k, v in st["forwarding"].items())
    )
    if st["slurm_nodes"]:
        say("slurm: " + ", ".join(f"{n} {s}" for n, s in sorted(st["slurm_nodes"].items())))
    if st["inventory"]:
        print(f"inventory: {st['inventory']}")
    return 0 if healthy else 1


def _job(args: argparse.Namespace, inv: ops.Invocation) -> int:
    job = ops.lab_job(
        inv, account=args.account, user=args.user, gpus=args.gpus, seconds=args.seconds, node=args.node
    )
    if args.json:
        emit_json(job.to_json())
        return 0
    if job.ran_on:
        gpus = ",".join(str(i) for i in job.gpu_indices) or "?"
        plural = "s" if len(job.gpu_indices) != 1 else ""
        where = f"{job.state.lower() or 'placed'} on {job.ran_on}, GPU{plural} {gpus}"
    else:
        where = f"{job.state.lower() or 'submitted'}, not placed yet ({job.gpus} GPUs asked)"
    ok(f"job {job.job_id}", f"{where}; account {job.account}, user {job.user}, {job.seconds} s")
    sel = f'DCGM_FI_DEV_POWER_USAGE{{hpc_job="{job.job_id}"}}'
    print(f"  its GPUs' samples: {samples_command(inv.home, sel)}")
    return 0


def samples_command(home: Path, selector: str) -> str:
    """The curl command that reads SELECTOR's samples from the lab's VictoriaMetrics: over https
    with the site CA and the API login (the password read from its file, never printed) on a site
    deployed with TLS, plain http otherwise."""
    try:
        access = ops.site_access(home)
    except VigilError as exc:  # the job ran; only the hint of how to read it is lost
        return f"(cannot tell how to reach VictoriaMetrics: {exc})"
    options = ops.curl_options(home, access)
    curl = f"curl -s {options}" if options else "curl -s"
    return f"{curl} {access.url(VM_ADDRESS, VM_PORT)}/api/v1/query --data-urlencode 'query={selector}'"


def _fault(args: argparse.Namespace, inv: ops.Invocation) -> int:
    res = ops.lab_fault(
        inv,
        args.kind,
        args.host,
        args.gpu,
        clear=args.clear,
        code=args.code,
        rate=args.rate,
        ramp=args.ramp,
        kill_job=args.kill_job,
    )
    killed = f"; killed the program of job {', '.join(res.killed_jobs)}" if res.killed_jobs else ""
    if args.kill_job and not res.killed_jobs:
        killed = "; no job held that GPU"
    if args.json:
        emit_json(
            {
                "kind": res.kind,
                "host": res.host,
                "gpu": res.gpu,
                "cleared": res.cleared,
                "state": res.state,
                "killed_jobs": list(res.killed_jobs),
            }
        )
    elif res.kind == "node-down":
        units = res.state or "none"
        ok(
            res.host,
            f"node-down cleared; exporters started again: {units}"
            if res.cleared
            else f"node-down injected; exporters stopped: {units}",
        )
    elif res.kind == "power-off":
        ok(
            res.host,
            f"power-off {'cleared: booted from its disk' if res.cleared else 'injected'}; {res.state}",
        )
    elif res.gpu is None:  # a BMC fault
        ok(
            res.host,
            f"{res.kind} {'cleared' if res.cleared else 'injected'} on its BMC; now: {res.state or 'none'}",
        )
    else:
        ok(
            f"{res.host}/{res.gpu}",
            f"{res.kind} {'cleared' if res.cleared else 'injected'}; now: {res.state or 'none'}{killed}",
        )
    return 0
