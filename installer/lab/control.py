"""`lab up`, `lab down`, `lab status`: the lab's life cycle."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.installer.lab import bmc, cgroups, inventory, keys, network, nspawn, prepare, rootfs
from vigil.installer.lab import state as lab_state
from vigil.installer.lab._proc import require_tools
from vigil.installer.lab.errors import LabError, LabPrerequisiteMissing
from vigil.installer.lab.hosts import (
    ACCOUNTS,
    BRIDGE,
    DEFAULT_GPU_NODES,
    DEFAULT_MONITORING_HOSTS,
    Host,
    lab_hosts,
)
from vigil.installer.lab.mirror import find_mirror
from vigil.installer.lab.paths import LabPaths
from vigil.installer.lab.ssh import ssh

Log = Callable[[str], None]

BOOT_TIMEOUT = 180.0
SLURM_TIMEOUT = 120.0


@dataclass
class HostReport:
    name: str
    ip: str
    pid: int | None
    running: bool
    #: `systemctl is-system-running` as the host answers it ("running", "degraded", ...), or why not
    system: str
    failed_units: list[str] = field(default_factory=list)
    started_now: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ip": self.ip,
            "pid": self.pid,
            "running": self.running,
            "system": self.system,
            "failed_units": self.failed_units,
            "started_now": self.started_now,
        }


@dataclass
class UpResult:
    hosts: list[HostReport]
    inventory: Path
    cache_rootfs: Path
    cache_built: bool
    slurm_nodes: dict[str, str]
    seconds: float


@contextmanager
def _locked(paths: LabPaths) -> Iterator[None]:
    paths.lab_dir.mkdir(parents=True, exist_ok=True)
    with open(paths.lock_file, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(fh, fcntl.LOCK_EX)  # another lab command is running: wait for it
        yield


def _require_root() -> None:
    if os.geteuid() != 0:
        raise LabPrerequisiteMissing("lab", "needs root (it creates a bridge and boots containers)")


def _proc(hs: lab_state.HostState) -> nspawn.Proc:
    return nspawn.Proc(hs.pid, hs.starttime)


def _running(st: lab_state.LabState, host: Host) -> bool:
    hs = st.hosts.get(host.name)
    return hs is not None and nspawn.alive(_proc(hs))


def system_state(paths: LabPaths, host: Host, *, wait: float = 0) -> tuple[str, list[str]]:
    """The host's `systemctl is-system-running` answer and, unless running, its failed units."""
    cmd = "systemctl is-system-running --wait" if wait else "systemctl is-system-running"
    cp = ssh(paths, host.ip, cmd, timeout=wait or 20)
    answer = cp.stdout.strip() or f"unreachable: {cp.stderr.strip().splitlines()[-1:] or cp.returncode}"
    failed: list[str] = []
    if answer not in ("running",) and cp.stdout.strip():
        f = ssh(paths, host.ip, "systemctl list-units --failed --plain --no-legend --no-pager", timeout=20)
        failed = [line.split()[0] for line in f.stdout.splitlines() if line.strip()]
    return answer, failed


def _wait_ssh(paths: LabPaths, host: Host, deadline: float, proc: nspawn.Proc, log_file: Path) -> None:
    while True:
        cp = ssh(paths, host.ip, "true", timeout=10, connect_timeout=2)
        if cp.returncode == 0:
            return
        if not nspawn.alive(proc):
            tail = log_file.read_text(errors="replace").strip().splitlines()[-3:]
            raise LabError(host.name, f"container exited while booting: {' | '.join(tail)}")
        if time.monotonic() > deadline:
            raise LabError(
                host.name,
                f"no ssh on {host.ip} after {BOOT_TIMEOUT:.0f}s: {cp.stderr.strip()}; see {log_file}",
            )
        time.sleep(0.5)


def _wait_host(paths: LabPaths, host: Host, proc: nspawn.Proc, log_file: Path) -> tuple[str, list[str]]:
    deadline = time.monotonic() + BOOT_TIMEOUT
    _wait_ssh(paths, host, deadline, proc, log_file)
    return system_state(paths, host, wait=max(10.0, deadline - time.monotonic()))


def slurm_nodes(paths: LabPaths, hosts: tuple[Host, ...] | None = None) -> dict[str, str]:
    """Node -> state as the controller's `sinfo` reports it."""
    ctl = next(h for h in hosts or lab_hosts() if h.slurm_controller)
    cp = ssh(paths, ctl.ip, "sinfo --noheader --Node --format='%N %T'", timeout=20)
    nodes: dict[str, str] = {}
    for line in cp.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            nodes[parts[0]] = parts[1]
    return nodes


def root_accounts_command() -> str:
    """What `lab up` runs on the controller so that root may charge the lab's accounts, printing the
    accounts root has then (see :func:`_accounts`)."""
    accounts = ",".join(ACCOUNTS)
    return (
        f"sacctmgr -i -Q add account {accounts} >/dev/null 2>&1; "
        f"sacctmgr -i -Q add user root account={accounts} >/dev/null 2>&1; "
        "sacctmgr -n -P list associations user=root format=account"
    )


def _accounts(paths: LabPaths, hosts: tuple[Host, ...]) -> None:
    """Slurm's accounting knows the lab's accounts and root's associations with them. Once slurmdbd
    holds the cluster, root has an association with the account `root`, and a job root submits under
    an account it has no association with is charged to that default instead (`sbatch -A physics` ran
    as `root`). alice and bob have no association at all, so their jobs keep the account they give,
    whatever it holds, as where a site does not enforce associations."""
    ctl = next(h for h in hosts if h.slurm_controller)
    got = set(ssh(paths, ctl.ip, root_accounts_command(), timeout=60).stdout.split())
    if not set(ACCOUNTS) <= got:
        raise LabError("slurm", f"root's accounts in slurmdbd are {sorted(got)}, not {', '.join(ACCOUNTS)}")


def _wait_slurm(paths: LabPaths, hosts: tuple[Host, ...]) -> dict[str, str]:
    want = {h.name for h in hosts if h.gpu_node}
    deadline = time.monotonic() + SLURM_TIMEOUT
    nodes: dict[str, str] = {}
    while time.monotonic() < deadline:
        nodes = slurm_nodes(paths, hosts)
        if want <= nodes.keys() and all(nodes[n] in ("idle", "mixed", "allocated") for n in want):
            return nodes
        time.sleep(1)
    ctl = next(h for h in hosts if h.slurm_controller)
    why = ssh(paths, ctl.ip, "sinfo --noheader --list-reasons", timeout=20).stdout.strip()
    raise LabError(
        "slurm",
        f"nodes not idle after {SLURM_TIMEOUT:.0f}s: {nodes or 'sinfo gave nothing'}"
        + (f"; reasons: {why}" if why else ""),
    )


def up(
    paths: LabPaths | None = None,
    *,
    inventory_dir: Path = Path("inventories/lab"),
    mirror: str | None = None,
    gpu_nodes: int | None = None,
    monitoring_hosts: int | None = None,
    log: Log = lambda _m: None,
) -> UpResult:
    """Bring the lab up with GPU_NODES GPU nodes and MONITORING_HOSTS monitoring hosts (default: the
    running lab's size, else DEFAULT_GPU_NODES and DEFAULT_MONITORING_HOSTS); hosts already running
    are left alone."""
    paths = paths or LabPaths.from_env()
    t0 = time.monotonic()
    _require_root()
    require_tools()
    with _locked(paths):
        st = lab_state.load(paths.state_file)
        running = [name for name, hs in st.hosts.items() if nspawn.alive(_proc(hs))]
        if gpu_nodes is None:
            gpu_nodes = st.gpu_nodes if st.hosts else DEFAULT_GPU_NODES
        elif running and gpu_nodes != st.gpu_nodes:
            raise LabError(
                f"--gpu-nodes {gpu_nodes}",
                f"the lab is up with {st.gpu_nodes} GPU nodes; `vigil lab down` first",
            )
        if monitoring_hosts is None:
            monitoring_hosts = st.monitoring_hosts if st.hosts else DEFAULT_MONITORING_HOSTS
        elif running and monitoring_hosts != st.monitoring_hosts:
            raise LabError(
                f"--monitoring-hosts {monitoring_hosts}",
                f"the lab is up with {st.monitoring_hosts} monitoring hosts; `vigil lab down` first",
            )
        hosts = lab_hosts(gpu_nodes, monitoring_hosts)
        st.gpu_nodes, st.monitoring_hosts = gpu_nodes, monitoring_hosts
        for name in [n for n in st.hosts if n not in {h.name for h in hosts}]:
            gone = st.hosts.pop(name)  # of a larger lab that is no longer running
            cgroups.remove(gone.cgroups)
            rootfs.release(paths.host_dir(name), paths.rootfs(name))
        missing = [h for h in hosts if not _running(st, h)]
        # 1. the root fs (once), the keys (once), the bridge
        cache = Path(st.cache_rootfs) if st.cache_rootfs and not missing else None
        built = False
        if cache is None:
            cache, built = rootfs.ensure_rootfs(paths.cache_dir, find_mirror(override=mirror), log=log)
        admin_key = keys.ensure_admin_key(paths)
        munge = keys.ensure_munge_key(paths)
        network.ensure_bridge()
        st.cache_rootfs, st.ssh_key, st.known_hosts = str(cache), str(admin_key), str(paths.known_hosts)
        # 2. each missing host: a fresh root fs, prepared, booted; recorded at once so `down` finds it
        started: dict[str, nspawn.Proc] = {}
        for host in missing:
            old = st.hosts.pop(host.name, None)
            rootfs.release(paths.host_dir(host.name), paths.rootfs(host.name))
            if old is not None:
                lab_state.save(paths.state_file, st)
            keys.new_host_key(paths, host)
            mode = rootfs.provision(cache, paths.host_dir(host.name), paths.rootfs(host.name))
            prepare.prepare_host(
                paths.rootfs(host.name),
                host,
                admin_pubkey=Path(f"{admin_key}.pub").read_text(),
                host_key=paths.host_key(host.name),
                munge_key=munge,
                hosts=hosts,
            )
            groups = cgroups.create(host.name)
            proc = nspawn.start(
                host, paths.rootfs(host.name), paths.console_log(host.name), cgroup_dirs=groups
            )
            started[host.name] = proc
            st.hosts[host.name] = lab_state.HostState(
                name=host.name,
                ip=host.ip,
                pid=proc.pid,
                starttime=proc.starttime,
                rootfs=str(paths.rootfs(host.name)),
                mode=mode,
                console_log=str(paths.console_log(host.name)),
                cgroups=groups,
            )
            lab_state.save(paths.state_file, st)
            log(f"{host.name}: booting ({mode}, pid {proc.pid})")
        keys.write_known_hosts(paths, {h: Path(f"{paths.host_key(h.name)}.pub").read_text() for h in hosts})

        # 3. every host answers over ssh and systemd has finished starting it
        def wait(host: Host) -> HostReport:
            proc = _proc(st.hosts[host.name])
            answer, failed = _wait_host(paths, host, proc, paths.console_log(host.name))
            return HostReport(host.name, host.ip, proc.pid, True, answer, failed, host.name in started)

        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            reports = list(pool.map(wait, hosts))
        # 4. Slurm: every GPU node registered and idle
        nodes = _wait_slurm(paths, hosts)
        _accounts(paths, hosts)
        # 5. the inventory, last: it names hosts that answer, and the simulated BMCs' lab CA
        # certificates and accounts (made once, kept by `down`)
        material = bmc.ensure_material(paths, bmc.lab_bmcs(hosts))
        inv = inventory.write_inventory(paths, inventory_dir, material, hosts)
        st.inventory = str(inv.resolve())
        lab_state.save(paths.state_file, st)
    return UpResult(reports, inv, cache, built, nodes, time.monotonic() - t0)


def power(paths: LabPaths, name: str, *, on: bool, log: Log = lambda _m: None) -> HostReport:
    """Power the monitoring host NAME off as a power cut would (its container killed, no shutdown;
    its disk, the overlay root, kept), or ON again: booted from that same root, as a host comes back
    after a power cut, with what was deployed on it. A host that is off is still part of the lab:
    `lab down` removes it; `lab up` would boot a fresh host in its place."""
    _require_root()
    with _locked(paths):
        st = lab_state.load(paths.state_file)
        hosts = lab_hosts(st.gpu_nodes, st.monitoring_hosts)
        host = next((h for h in hosts if h.name == name), None)
        hs = st.hosts.get(name)
        if host is None or hs is None:
            raise LabError(name, "no such host in the lab (`vigil lab status` lists them)")
        if "monitoring" not in host.groups:
            raise LabError(name, "power-off acts on monitoring hosts only (a Slurm host's return is Slurm's)")
        proc = _proc(hs)
        if not on:
            how = nspawn.kill(proc, name=name)
            log(f"{name}: powered off ({how})")
            return HostReport(name, host.ip, None, False, f"powered off ({how})")
        if nspawn.alive(proc):
            answer, failed = system_state(paths, host)
            return HostReport(name, host.ip, proc.pid, True, answer, failed, False)
        root = paths.rootfs(name)
        if not (root / "etc" / "hostname").is_file():
            raise LabError(name, f"its root {root} is gone: `vigil lab up` boots a fresh host instead")
        proc = nspawn.start(host, root, paths.console_log(name), cgroup_dirs=hs.cgroups)
        hs.pid, hs.starttime = proc.pid, proc.starttime
        lab_state.save(paths.state_file, st)
        log(f"{name}: booting from its disk (pid {proc.pid})")
        answer, failed = _wait_host(paths, host, proc, paths.console_log(name))
        return HostReport(name, host.ip, proc.pid, True, answer, failed, True)


def _stop(hs: lab_state.HostState) -> str | LabError:
    try:
        return nspawn.stop(_proc(hs), name=hs.name)
    except LabError as exc:
        return exc


def down(paths: LabPaths | None = None, *, log: Log = lambda _m: None) -> dict[str, str]:
    """Stop every container the lab started (by its recorded PID), remove the bridge and host roots.

    Returns once each container's systemd-nspawn process has exited, so that a `lab up` right after
    cannot meet them. A host whose process is still there after SIGTERM and SIGKILL
    (nspawn.TERM_GRACE, nspawn.KILL_WAIT) fails `down` with its name; the bridge, the host roots and
    the state file are then left as they are, and `down` can be run again.
    """
    paths = paths or LabPaths.from_env()
    _require_root()
    with _locked(paths):
        st = lab_state.load(paths.state_file)
        hosts = lab_hosts(st.gpu_nodes, st.monitoring_hosts)
        outcome: dict[str, str] = {}
        # 1. stop the containers, in parallel (each shutdown takes a few seconds); each stop returns
        # when that host's systemd-nspawn has exited, or fails after its bounded wait
        with ThreadPoolExecutor(max_workers=max(1, len(st.hosts))) as pool:
            results = dict(zip(st.hosts, pool.map(_stop, st.hosts.values()), strict=True))
        failed: list[LabError] = []
        for name, how in results.items():
            if isinstance(how, LabError):
                failed.append(how)
                log(f"{name}: {how.reason}")
                continue
            outcome[name] = how
            cgroups.remove(st.hosts[name].cgroups)
            log(f"{name}: {how}")
        if len(failed) == 1:
            raise failed[0]
        if failed:
            raise LabError(", ".join(e.obj for e in failed), "; ".join(e.reason for e in failed))
        strays = nspawn.our_strays(paths.lab_dir, set())
        if strays:
            raise LabError(
                str(paths.lab_dir),
                f"systemd-nspawn processes {strays} boot roots under the lab "
                "directory but are not in its state file; stop them by PID by hand",
            )
        # 2. the host roots (overlays unmounted), the bridge and whatever veths remain
        for name in sorted({h.name for h in hosts} | set(st.hosts)):
            rootfs.release(paths.host_dir(name), paths.rootfs(name))
        network.remove_bridge(hosts)
        if st.inventory:
            inventory.remove_inventory(Path(st.inventory))
        paths.state_file.unlink(missing_ok=True)
        paths.known_hosts.unlink(missing_ok=True)
    return outcome


def status(paths: LabPaths | None = None, *, probe: bool = True) -> dict[str, Any]:
    """Each host's PID, whether it runs and what systemd says; the bridge and forwarding switches."""
    paths = paths or LabPaths.from_env()
    st = lab_state.load(paths.state_file)
    lab = lab_hosts(st.gpu_nodes, st.monitoring_hosts)
    hosts: list[HostReport] = []

    def one(host: Host) -> HostReport:
        hs = st.hosts.get(host.name)
        if hs is None:
            return HostReport(host.name, host.ip, None, False, "not started")
        if not nspawn.alive(_proc(hs)):
            return HostReport(host.name, host.ip, hs.pid, False, "stopped")
        answer, failed = system_state(paths, host) if probe else ("unknown", [])
        return HostReport(host.name, host.ip, hs.pid, True, answer, failed)

    with ThreadPoolExecutor(max_workers=len(lab)) as pool:
        hosts = list(pool.map(one, lab))
    any_running = any(h.running for h in hosts)
    return {
        "lab_dir": str(paths.lab_dir),
        "bridge": BRIDGE if network.link_exists(BRIDGE) else None,
        "forwarding": network.forwarding_state(),
        "inventory": st.inventory or None,
        "ssh_key": st.ssh_key or None,
        "known_hosts": st.known_hosts or None,
        "gpu_nodes": st.gpu_nodes,
        "monitoring_hosts": st.monitoring_hosts,
        "slurm_nodes": slurm_nodes(paths, lab) if probe and any_running else {},
        "hosts": [h.to_json() for h in hosts],
    }
