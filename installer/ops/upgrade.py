"""Upgrade, rollback and status: the site moved to another imported bundle, step by step, and read back."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vigil.installer import __version__
from vigil.installer.deploy.admin import AdminState, AdminStep, admin_root, admin_state
from vigil.installer.deploy.artifacts import DeployError
from vigil.installer.deploy.leaks import find_leaks
from vigil.installer.deploy.site import HostStatus, append_history
from vigil.installer.deploy.upgrade import (
    Outcome,
    Rollout,
    UpgradeFailed,
    outcome_message,
    plan_lines,
    site_status,
)
from vigil.installer.ops._invocation import Invocation, audited
from vigil.installer.ops.deploy import leak_error
from vigil.installer.ops.keys import trust_for_bundle

__all__ = [
    "AdminState",
    "HostStatus",
    "Outcome",
    "admin_status",
    "outcome_message",
    "plan_lines",
    "status",
    "upgrade",
]


def upgrade(
    inv: Invocation,
    *,
    inventory: Path,
    trust: Path | None = None,
    to: int | None = None,
    serial: int = 1,
    check: bool = False,
    allow_downgrade: bool = False,
    rollback: bool = False,
    keep_store: bool = False,
    ansible_dir: Path | None = None,
    events: queue.Queue[dict[str, Any]] | None = None,
    stop: threading.Event | None = None,
    admin: bool = True,
    admin_root_dir: Path | None = None,
) -> Outcome:
    """``upgrade`` (or ``rollback``): the plan, then the steps; on a failed health check the step's
    hosts are switched back and :class:`UpgradeFailed` raised. Each run is recorded in the site's
    history and the audit log (host, component and reason of a failure included).

    With ``admin`` (the default), the admin host's vigil comes from the same bundle: installed
    beside the old under ``admin_root_dir`` before the first step, ``current`` switched to it after
    the last health check (deploy/admin.py), with an audit record of its own
    (``upgrade.admin`` / ``rollback.admin``)."""
    inv.object = str(inventory)
    root = trust_for_bundle(inv.home, trust, inv.details).root
    action = "rollback" if rollback else "upgrade"
    rollout = Rollout(
        inv.home,
        inventory,
        root,
        target=to,
        serial=serial,
        check=check,
        allow_downgrade=allow_downgrade,
        action=action,
        keep_store=keep_store,
        ansible_dir=ansible_dir,
        say=inv.step,
        events=events,
        stop=stop,
    )
    inv.details.update(
        check=check, serial=serial, allow_downgrade=allow_downgrade, requested=to, keep_store=keep_store
    )
    if ansible_dir is not None:  # a development tree instead of the bundles' own roles: on the record
        inv.details.update(ansible_dir=str(ansible_dir))
    if not admin:
        inv.details.update(admin="skipped (--no-admin)")
    try:
        with _admin_step(inv, rollout, action, admin_root_dir) if admin else _nothing():
            out = rollout.run()
    except DeployError as exc:
        leaked(inv, rollout)
        if isinstance(exc, UpgradeFailed):
            inv.details.update(run_dir=str(rollout.run_dir))
            append_history(
                inv.home,
                {"action": action, "run_id": rollout.run_dir.name, "outcome": "failed", "reason": str(exc)},
            )
        raise
    leaks = leaked(inv, rollout)
    inv.details.update(
        run_dir=str(out.run_dir),
        bundle_version=out.target,
        changes=[vars(c) for c in out.changes if c.changes],
        steps=out.steps_run,
        skipped=out.skipped,
        tls=out.tls,
    )
    if leaks:
        err = leak_error(f"{action} {out.upgrade_id}", leaks, out.run_dir)
        if not check:
            append_history(
                inv.home,
                {"action": action, "run_id": out.upgrade_id, "outcome": "failed", "reason": str(err)},
            )
        raise err
    if not check:
        append_history(
            inv.home,
            {
                "action": action,
                "run_id": out.upgrade_id,
                "bundle_version": out.target,
                "outcome": "ok",
                "hosts": sorted({c.host for c in out.changes}),
            },
        )
    return out


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def _admin_step(inv: Invocation, rollout: Rollout, action: str, root: Path | None) -> Iterator[None]:
    """The admin host's step around the rollout, under its own audit record; the step takes its
    root's lock when it starts installing and holds it to the end (a --check run takes no lock and
    leaves no record of its own: it changes nothing), as does a run that ends before it begins."""
    where = admin_root(root)
    sub = Invocation(
        home=inv.home, argv=inv.argv, operator=inv.operator, action=f"{action}.admin", object=str(where)
    )
    sub.skip_audit = rollout.check
    step = AdminStep(where, say=inv.step, details=sub.details, holder=action)
    rollout.admin = step
    inv.details.update(admin=sub.details)
    with audited(sub):
        try:
            yield
        finally:
            step.release()
            # a run that ended before the admin step began (a host unreachable, the plan refused)
            # did nothing on the admin host: the upgrade's own record says why
            sub.skip_audit = rollout.check or not step.details


def admin_status(root: Path | None = None) -> AdminState:
    """The admin host's vigil: the version ``current`` names under the install root, and the one
    answering (read only)."""
    return admin_state(admin_root(root), __version__)


def leaked(inv: Invocation, rollout: Rollout) -> list[str]:
    """The site's secrets found in what the upgrade's runs left (deploy/leaks.py); recorded."""
    if not rollout.run_dir.name or not rollout.run_dir.is_dir():  # it failed before making one
        return []
    leaks = [leak.line() for leak in find_leaks(inv.home, rollout.run_dir)]
    if leaks:
        inv.details["leaked"] = leaks[:20]
    return leaks


def status(
    inv: Invocation,
    *,
    inventory: Path,
    trust: Path | None = None,
    limit: str | None = None,
    ansible_dir: Path | None = None,
) -> dict[str, HostStatus]:
    """``status``: each host's components, versions, bundle version and drift."""
    inv.object = str(inventory)
    root = trust_for_bundle(inv.home, trust, inv.details).root
    run_dir, hosts = site_status(inv.home, inventory, root, limit=limit, ansible_dir=ansible_dir)
    inv.details.update(
        run_dir=str(run_dir),
        drift={h: len(s.drift) for h, s in hosts.items() if s.drift},
        bundle_versions={h: s.bundle_version for h, s in hosts.items()},
    )
    return hosts
