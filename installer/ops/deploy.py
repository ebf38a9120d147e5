"""Deploy: plan (everything checked before a change), start (events on a queue), finish (the recap)."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from vigil.installer.deploy import DeployError, DeployPlan, PlaybookRun, RunResult
from vigil.installer.deploy import plan_deploy as _plan
from vigil.installer.deploy import start_deploy as _start
from vigil.installer.deploy.leaks import find_leaks
from vigil.installer.deploy.site import append_history
from vigil.installer.deploy.tls import HostCertificates
from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.keys import trust_for_bundle


def plan_deploy(
    inv: Invocation,
    *,
    inventory: Path,
    trust: Path | None = None,
    bundle_version: int | None = None,
    ansible_dir: Path | None = None,
    limit: str | None = None,
    tags: str | None = None,
    check: bool = False,
    forks: int | None = None,
) -> DeployPlan:
    """``deploy``, steps 1-3: the inventory checked, the bundle re-verified in the store, every host
    of the plan's ``limit`` reached. Nothing is changed."""
    inv.object = str(inventory)
    root = trust_for_bundle(inv.home, trust, inv.details).root  # as import: no older root
    plan = _plan(
        home=inv.home,
        inventory=inventory,
        trust=root,
        version=bundle_version,
        ansible_dir=ansible_dir,
        limit=limit,
        tags=tags,
        check=check,
        forks=forks,
    )
    inv.details.update(
        run_id=plan.run_id,
        bundle_version=plan.bundle.version,
        manifest_sha256=plan.bundle.manifest_sha256,
        check=check,
        limit=limit,
        tags=tags,
        forks=plan.forks,
        hosts=plan.inventory.hosts,
        ansible_dir=str(ansible_dir) if ansible_dir else "bundle",
    )
    return plan


def start_deploy(
    inv: Invocation, plan: DeployPlan, events: queue.Queue[dict[str, Any]] | None = None
) -> PlaybookRun:
    """``deploy``, steps 4-5, started in the background. A front end that shows the run passes a queue
    and drains it on a timer; ``run.cancel()`` stops it."""

    def certificates(made: HostCertificates) -> None:
        inv.details.update(tls=made.summary())

    return _start(plan, home=inv.home, events=events, on_certificates=certificates)


def finish_deploy(inv: Invocation, run: PlaybookRun) -> RunResult:
    """Wait for the run; record its status and per-host counts; raise :class:`DeployError` when any
    host failed or was unreachable (after the front end has had the result to show: see
    :func:`deploy_failure`)."""
    result = run.wait()
    result.leaks = [leak.line() for leak in find_leaks(inv.home, result.run_dir)]
    if result.leaks:
        inv.details["leaked"] = result.leaks[:20]
    inv.details.update(
        status=result.status,
        rc=result.rc,
        counts={
            h: {"ok": s.ok, "changed": s.changed, "failed": s.failed, "unreachable": s.unreachable}
            for h, s in result.progress.hosts.items()
        },
    )
    if not inv.details.get("check"):
        append_history(
            inv.home,
            {
                "action": "deploy",
                "run_id": result.run_id,
                "bundle_version": inv.details.get("bundle_version"),
                "outcome": "ok" if result.ok else "failed",
                "limit": inv.details.get("limit"),
                "tags": inv.details.get("tags"),
            },
        )
    return result


def deploy_failure(result: RunResult) -> DeployError | None:
    """The error a finished run amounts to, or None when every host came through."""
    if result.ok:
        return None
    if result.leaks:
        return leak_error(f"deploy {result.run_id}", result.leaks, result.run_dir)
    bad = sorted(h for h, s in result.progress.hosts.items() if s.failed or s.unreachable)
    return DeployError(
        f"deploy {result.run_id}",
        f"failed on {', '.join(bad) or 'the playbook'} "
        f"(ansible status {result.status}); see {result.run_dir}",
    )


def leak_error(name: str, leaks: list[str], run_dir: Path) -> DeployError:
    """The one-line failure of a run whose artifacts hold a secret of the site (never the secret)."""
    more = f" (and {len(leaks) - 1} more)" if len(leaks) > 1 else ""
    return DeployError(
        name,
        f"{leaks[0]}{more}: a task printed a secret; the run directory is private (0700), "
        f"remove {run_dir} once read and fix the task (no_log)",
    )
