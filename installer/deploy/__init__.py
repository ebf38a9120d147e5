"""Deploy the stack from an imported bundle onto a cluster, through ansible-runner.

1 inventory checked (groups, every host placed, required vars); 2 the bundle re-verified in
the store (trust root signatures, every file's hash); 3 every host reached (ping) — all before
any change; 4 the playbook run, its events scored live; 5 a recap per host.
"""

from __future__ import annotations

import queue
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.bundle.store import BundleStore
from vigil.bundle.trust import TrustRoot
from vigil.installer.deploy.argspec import check_argument_specs, refuse_bad_variables
from vigil.installer.deploy.artifacts import DeployError, StoredBundle, artifact_vars, open_stored
from vigil.installer.deploy.inventory import Inventory, load_inventory
from vigil.installer.deploy.runner import (
    DEFAULT_FORKS,
    MAX_FORKS,
    PlaybookRun,
    Progress,
    RunResult,
    new_run_id,
    ping_hosts,
    start_playbook,
)
from vigil.installer.deploy.site import SiteLock
from vigil.installer.deploy.tls import HostCertificates, host_certificates

__all__ = [
    "DEFAULT_FORKS",
    "MAX_FORKS",
    "DeployError",
    "DeployPlan",
    "PlaybookRun",
    "Progress",
    "RunResult",
    "deploy",
    "plan_deploy",
    "start_deploy",
]


@dataclass(frozen=True)
class DeployPlan:
    """What a deploy will do, settled before any change: the pre-deploy host check and the run use
    the same ``limit``, because both read it from here."""

    inventory: Inventory
    bundle: StoredBundle
    ansible_dir: Path
    run_id: str
    #: Ansible host pattern the run is limited to (None: every host of the inventory)
    limit: str | None = None
    tags: str | None = None
    check: bool = False
    #: hosts Ansible works on at once
    forks: int = DEFAULT_FORKS


def plan_deploy(
    *,
    home: Path,
    inventory: Path,
    trust: TrustRoot,
    version: int | None = None,
    ansible_dir: Path | None = None,
    limit: str | None = None,
    tags: str | None = None,
    check: bool = False,
    forks: int | None = None,
) -> DeployPlan:
    """Steps 1-3: everything that can be known to be wrong before a change is made.

    The run's directory is made here (0700): the bundle's Ansible content is copied into it while
    it is re-verified, and the run uses that copy (``--ansible-dir`` replaces it, for development).
    """
    inv = load_inventory(inventory, limit=limit)
    run_id = new_run_id()
    run_dir = home / "runs" / run_id
    run_dir.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    run_dir.mkdir(mode=0o700)
    try:
        stored = open_stored(
            BundleStore(home), trust, version, copy_ansible_to=None if ansible_dir else run_dir / "project"
        )
        content = ansible_dir or stored.ansible_dir
        if not (content / "playbooks" / "site.yml").is_file():
            raise DeployError(
                str(content),
                "has no playbooks/site.yml (a bundle built before the roles existed? build a new one)",
            )
        refuse_bad_variables(check_argument_specs(content, inv.path, inv.selected), inventory)
        unreachable = ping_hosts(runs_dir=home / "runs", inventory=inv.path, limit=limit)
        if unreachable:
            host = sorted(unreachable)[0]
            more = f" (and {len(unreachable) - 1} more)" if len(unreachable) > 1 else ""
            raise DeployError(f"host {host}", f"unreachable: {unreachable[host]}{more}; nothing was changed")
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: no run to keep
        raise
    return DeployPlan(
        inventory=inv,
        bundle=stored,
        ansible_dir=content,
        run_id=run_id,
        limit=limit,
        tags=tags,
        check=check,
        forks=forks or DEFAULT_FORKS,
    )


def start_deploy(
    plan: DeployPlan,
    *,
    home: Path,
    events: queue.Queue[dict[str, Any]] | None = None,
    on_certificates: Callable[[HostCertificates], None] | None = None,
) -> PlaybookRun:
    """Steps 4-5, started: the run goes on in the background; ``.wait()`` gives its result. Under the
    site lock, each host's certificate is issued from the site CA first (deploy/tls.py);
    ``on_certificates`` hears what was issued."""
    extravars = artifact_vars(plan.bundle)
    extravars["vigil_home"] = str(home)
    extravars["vigil_run_id"] = plan.run_id
    lock = None if plan.check else SiteLock(home, f"deploy {plan.run_id}").acquire()
    try:
        certificates = host_certificates(home, plan.inventory, check=plan.check)
        if on_certificates is not None:
            on_certificates(certificates)
        extravars.update(certificates.extravars(home))
        return start_playbook(
            runs_dir=home / "runs",
            ansible_dir=plan.ansible_dir,
            inventory=plan.inventory.path,
            extravars=extravars,
            limit=plan.limit,
            tags=plan.tags,
            check=plan.check,
            forks=plan.forks,
            events=events,
            run_id=plan.run_id,
            on_finish=lock.release if lock is not None else None,
        )
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def deploy(plan: DeployPlan, *, home: Path) -> RunResult:
    """Steps 4-5, to the end."""
    return start_deploy(plan, home=home).wait()
