"""Upgrade and rollback: a rolling deploy of another imported bundle, health-checked step by step,
with the failed step switched back to what it ran before.

The order, and why:

1. **nodes** — every host that is not a monitoring host (GPU nodes, the Slurm controller), ``serial``
   at a time. Their exporters are checked by the store that has not changed yet, so a scrape that
   fails after the step is the step's fault.
2. **services** — on each monitoring host, every role but the store's (vmalert, Alertmanager,
   Grafana, the host's own exporters). vmalert's rules are checked against the old store's data.
3. **store** — VictoriaMetrics last. It is the one component with state whose format can change
   between versions (its storage is not always readable by an older release), so it is changed only
   when everything else has proved healthy on the new version; a failure earlier never leaves the
   site's data written by a version that the rollback cannot read.

Each step installs the new version beside the old (the roles keep two under
``/opt/vigil/<component>/``), validates the configuration with the new binary, switches ``current``,
restarts, and then ``playbooks/health.yml`` checks it. A failed step or health check deploys the
hosts' previous bundle to the same hosts with the same roles (the old files are still there, so
this is the link switched back and a restart), checks health again, and stops the upgrade.

Each host's facts file says which bundle each of its components came from; a host whose components
are at the target, undrifted and running is skipped. So a rerun after an interruption (the
upgrade killed, a host rebooted) converges, and an upgrade to what already runs changes nothing:
it reads the facts, checks health and ends.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.basics.bounded import load_json_file
from vigil.bundle.store import BundleStore
from vigil.bundle.trust import TrustRoot
from vigil.installer.deploy.admin import AdminStep
from vigil.installer.deploy.artifacts import (
    DeployError,
    StoredBundle,
    UnsafeValue,
    artifact_vars,
    open_stored,
)
from vigil.installer.deploy.inventory import Inventory, load_inventory
from vigil.installer.deploy.runner import RunResult, new_run_id, ping_hosts, start_playbook
from vigil.installer.deploy.site import (
    STATUS_MAX_BYTES,
    STORE_ROLE,
    HostStatus,
    SiteLock,
    previous_version,
    read_history,
    read_status_dir,
)
from vigil.installer.deploy.tls import host_certificates

#: how long before the upgrade starts data must already be readable afterwards (seconds)
BEFORE_MARGIN = 30
#: where each component's versions live on a host (/opt/vigil/<component>/<version>/, current)
COMPONENTS_DIR = "/opt/vigil/"
#: a silence id as Alertmanager makes one (a random UUID, lower case): the only form the baseline may
#: hold, since it comes from the monitoring host (the same pattern is the alertmanager role's
#: `_alertmanager_silence_id`)
SILENCE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class UpgradeFailed(DeployError):
    """A step failed its health check (or its run); the step's hosts were switched back."""


@dataclass(frozen=True)
class Step:
    """One batch of the rollout: these hosts, these roles."""

    phase: str  # "nodes" | "services" | "store"
    hosts: tuple[str, ...]
    #: Ansible --tags / --skip-tags for the step's run
    tags: str | None = None
    skip_tags: str | None = None

    def roles_match(self, role: str) -> bool:
        if self.phase == "store":
            return role == STORE_ROLE
        if self.phase == "services":
            return role != STORE_ROLE
        return True

    def done(self, status: HostStatus, version: int) -> bool:
        comps = [c for c in status.components.values() if self.roles_match(c.role)]
        if not comps:
            return status.at(version)
        names = {c.name for c in comps}
        return (
            all(c.bundle_version == version for c in comps)
            and not any(d.component in names or not d.component for d in status.drift)
            and all(status.services.get(c.service, "active") == "active" for c in comps if c.service)
        )


def rollout(inv: Inventory, serial: int) -> list[Step]:
    """The steps of an upgrade of every host of ``inv``, in order (see the module's docstring)."""
    if serial < 1:
        raise DeployError("--serial", f"must be at least 1, not {serial}")
    monitoring = list(inv.groups.get("monitoring", []))
    nodes = [h for h in inv.hosts if h not in monitoring]
    steps = [Step("nodes", tuple(b)) for b in _batches(nodes, serial)]
    for batch in _batches(monitoring, serial):
        steps.append(Step("services", tuple(batch), skip_tags=STORE_ROLE))
        steps.append(Step("store", tuple(batch), tags=STORE_ROLE))
    return steps


def _batches(hosts: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(hosts), size):
        yield hosts[i : i + size]


@dataclass(frozen=True)
class Change:
    host: str
    component: str
    old: str  # "" when the host does not run it yet
    new: str  # "" when the target bundle does not ship it
    old_bundle: int | None
    #: the systemd service that runs it ("" for a tool): a new version means a restart
    service: str = ""

    @property
    def changes(self) -> bool:
        return self.old != self.new

    @property
    def restarts(self) -> bool:
        """The new binary is switched in and the service restarted (its unit's own restart handler)."""
        return self.changes and bool(self.service) and bool(self.new)


def plan_changes(statuses: dict[str, HostStatus], target: StoredBundle) -> list[Change]:
    """Per host and component: the version it runs and the target bundle's."""
    shipped = {c.name: c.version for c in target.manifest.components}
    out: list[Change] = []
    for host in sorted(statuses):
        st = statuses[host]
        for name in sorted(st.components):
            c = st.components[name]
            new = shipped.get(c.component or name, "")
            out.append(Change(host, name, c.version, new, c.bundle_version, c.service))
    return out


def plan_lines(
    changes: list[Change],
    version: int,
    files: dict[str, list[str]] | None = None,
    files_unknown: str = "",
) -> list[str]:
    """The plan as an operator reads it: one line per host and component whose version changes, then
    per host the services that restart on their new binary, then (``--check``) per host the files that
    change."""
    lines = [f"plan: bundle {version}"]
    moved = [c for c in changes if c.changes]
    for c in moved:
        lines.append(f"  {c.host}: {c.component} {c.old or '-'} -> {c.new or '(not in the bundle)'}")
    restarts: dict[str, list[str]] = {}
    for c in moved:
        if c.restarts:
            restarts.setdefault(c.host, []).append(c.service)
    for host in sorted(restarts):
        lines.append(f"  {host}: restarts {', '.join(sorted(set(restarts[host])))}")
    for host, paths in sorted((files or {}).items()):
        lines.append(f"  {host}: changes {', '.join(paths)}")
    if files_unknown:
        lines.append(f"  files that change: not known, the check run failed on {files_unknown}")
    if not moved:
        lines.append("  no component changes version (configuration is put back where it drifted)")
    return lines


def _numeric(version: str) -> tuple[int, ...]:
    """The upstream release numbers of a Debian or upstream version: ``1.112.0+ds1-2`` -> (1, 112, 0)."""
    head = version.split(":", 1)[-1].split("+", 1)[0].split("-", 1)[0].lstrip("v")
    out: list[int] = []
    for part in head.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def store_downgrade_refusal(old: str, new: str) -> str | None:
    """Why the store must not go from ``old`` to ``new`` (None when it may).

    VictoriaMetrics promises to read what older releases wrote, not the reverse, and the reverse
    fails in practice: 1.79.5 started on a directory that 1.112.0 had written to exits with
    "cannot parse path to part" (the newer release names its parts differently), after removing an
    index directory it took for obsolete. So any move of the store to an older release is refused
    before a change is made, never tried.
    """
    if _numeric(new) >= _numeric(old):
        return None
    return (
        f"VictoriaMetrics {new} cannot be trusted to open storage written by {old} (1.79.5 exits on data "
        "1.112.0 wrote, and deletes an index directory first); pass --keep-store to roll back everything "
        "else, or restore the data directory from before the upgrade"
    )


def read_baseline(path: Path) -> list[str]:
    """The ids of the silences in force before the upgrade, from the baseline ``playbooks/health.yml``
    wrote (``{"silences": [...], "rule_groups": [...]}``); raises when one is not a UUID.

    The ids come from the monitoring host's Alertmanager, whose silence store its service user
    owns, so they are checked here before any change. They never go into a run's extra vars, which
    ansible-core renders as templates on the admin host (``{{ lookup('pipe', ...) }}`` would run
    there as the admin): each health check reads this file as data (docs/security.md).
    """
    try:  # what the monitoring host answered: bounded before it is parsed
        doc = load_json_file(path, max_bytes=STATUS_MAX_BYTES, error=DeployError)
    except ValueError as exc:
        raise DeployError(str(path), f"unreadable: {str(exc).splitlines()[0]}") from None
    silences = doc.get("silences") if isinstance(doc, dict) else None
    if not isinstance(silences, list):
        raise DeployError(str(path), "holds no list of silences; nothing was changed")
    for sid in silences:
        if not isinstance(sid, str) or not SILENCE_ID.fullmatch(sid):
            shown = json.dumps(sid)
            raise UnsafeValue(
                f"silence id {shown[:80]}{'...' if len(shown) > 80 else ''}",
                f"in {path} (read from Alertmanager before the upgrade) is not a UUID, the only form "
                "Alertmanager makes; refused, nothing was changed",
            )
    return list(silences)


@dataclass
class Outcome:
    """What an upgrade or rollback did, for the front end and the audit record."""

    upgrade_id: str
    run_dir: Path
    target: int
    changes: list[Change] = field(default_factory=list)
    steps_run: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    checked_only: bool = False
    #: what was done with the site CA before the steps: {ca_made, issued, hosts}
    tls: dict[str, Any] = field(default_factory=dict)
    #: --check: per host, the files outside the components' own trees that the target bundle's roles
    #: would change (a check-mode run of its site.yml on the hosts not at the target)
    files: dict[str, list[str]] = field(default_factory=dict)
    #: --check: why that run could not say (empty when it could)
    files_unknown: str = ""
    #: the admin host's step: the plan's line (--check), else what was installed and switched
    admin: dict[str, Any] = field(default_factory=dict)


def outcome_message(out: Outcome) -> str:
    """What ``vigil upgrade`` / ``rollback`` says when it ends well (after ``OK: <action> <id>: ``),
    in every front end."""
    if out.checked_only:
        return f"plan only (--check); nothing changed; artifacts {out.run_dir}"
    return f"site at bundle {out.target}: {len(out.steps_run)} steps run, {len(out.skipped)} already there"


Say = Callable[[str], None]


@dataclass
class Rollout:
    """One upgrade or rollback, from its checks to the last health check."""

    home: Path
    inventory_path: Path
    trust: TrustRoot
    target: int | None
    serial: int = 1
    check: bool = False
    allow_downgrade: bool = False
    action: str = "upgrade"  # or "rollback"
    #: leave the store (VictoriaMetrics) at the version it runs: its steps are not run
    keep_store: bool = False
    #: run this Ansible tree instead of each bundle's own (development only; the audit record says so)
    ansible_dir: Path | None = None
    say: Say = print
    events: queue.Queue[dict[str, Any]] | None = None
    #: set by a front end to stop between steps: the step under way finishes and is checked first
    stop: threading.Event | None = None
    _bundles: dict[int, StoredBundle] = field(default_factory=dict)
    #: the upgrade's directory, $VIGIL_HOME/runs/<id>/: one sub-directory per playbook run
    run_dir: Path = field(default=Path())
    _n: int = 0
    #: the certificate variables every step's site.yml run gets (deploy/tls.py)
    _tls_vars: dict[str, object] = field(default_factory=dict)
    #: the admin host's own vigil from the target bundle (deploy/admin.py): installed beside the
    #: old before the first step, switched to after the last health check; None: left alone
    admin: AdminStep | None = None

    def run(self) -> Outcome:
        inv = load_inventory(self.inventory_path)
        store = BundleStore(self.home)
        uid = f"{new_run_id()}-{self.action}"
        run_dir = self.home / "runs" / uid
        run_dir.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        run_dir.mkdir(mode=0o700)
        self.run_dir = run_dir
        self._n = 0
        if self.check:  # the plan changes nothing: it needs no lock
            return self._run(inv, store, uid)
        with SiteLock(self.home, f"{self.action} {uid}"):
            return self._run(inv, store, uid)

    def _run(self, inv: Inventory, store: BundleStore, uid: str) -> Outcome:
        run_dir = self.run_dir
        target = self._bundle(store, self._choose_target(store, inv))
        out = Outcome(uid, run_dir, target.version)
        unreachable = ping_hosts(runs_dir=run_dir, inventory=inv.path)
        if unreachable:
            host = sorted(unreachable)[0]
            raise DeployError(f"host {host}", f"unreachable: {unreachable[host]}; nothing was changed")
        statuses = self.status(inv, target)
        self._refuse(statuses, target)
        out.changes = plan_changes(statuses, target)
        if self.check:  # the plan is the result: the front end shows it
            out.checked_only = True
            if self.admin is not None:
                out.admin = {"plan": self.admin.preview(target)}
            self._preview(inv, target, statuses, out)
            return out
        for line in plan_lines(out.changes, target.version):
            self.say(line)
        if self.admin is not None:  # a bundle whose wheels are not its manifest's stops here
            self.admin.prepare(target)
        # as deploy does: each host's certificate from the site CA (renewed on the CA's rule) before
        # any step, so that the new version's roles install the same files deploy would
        certs = host_certificates(self.home, inv, check=False)
        self._tls_vars = certs.extravars(self.home)
        out.tls = certs.summary()
        for host, why in sorted(certs.issued.items()):
            self.say(f"certificate of {host} issued: {why}")
        before = int(time.time()) - BEFORE_MARGIN
        self._baseline(inv, target)  # checked here; each health check reads it from its file
        last_change = before
        for step in rollout(inv, self.serial):
            if step.phase == "store" and self.keep_store:
                out.skipped.append(f"store {','.join(step.hosts)} (--keep-store)")
                continue
            todo = [h for h in step.hosts if not step.done(statuses[h], target.version)]
            label = f"{step.phase} {','.join(step.hosts)}"
            if not todo:
                out.skipped.append(label)
                self.say(f"{label}: already at bundle {target.version}")
                continue
            if self.stop is not None and self.stop.is_set():
                raise DeployError(
                    f"{self.action} {uid}",
                    f"stopped by the operator before {label}; the steps before it are done and checked, "
                    "the rest runs when it is run again",
                )
            since = int(time.time())
            self.say(f"{label}: bundle {target.version}")
            result = self._site(target, todo, step)
            failure = _first_failure(result)
            if failure is None:
                failure = self._health(inv, target, todo, since, before)
            out.steps_run.append({"phase": step.phase, "hosts": todo, "ok": failure is None})
            if failure is not None:
                self._switch_back(store, inv, statuses, step, todo, before, failure, out)
            last_change = since
            statuses.update(self.status(inv, target, hosts=todo))
        final = self._health(inv, target, inv.hosts, last_change, before)
        if final is not None:
            host, component, reason = final
            raise UpgradeFailed(
                f"host {host}", f"{component}: {reason} (the site is at bundle {target.version})"
            )
        if self.admin is not None:
            self.admin.switch()
            out.admin = dict(self.admin.details)
        return out

    # --- the parts ----------------------------------------------------------------------------

    def _choose_target(self, store: BundleStore, inv: Inventory) -> int:
        versions = store.versions()
        if not versions:
            raise DeployError(str(self.home), "no bundle imported; run `vigil bundle import` first")
        if self.target is None and self.action == "upgrade":
            return max(versions)
        if self.target is None:  # rollback: the last version the history shows before the current one
            current = max(versions)
            history = read_history(self.home)
            deployed = [h.get("bundle_version") for h in history if h.get("outcome") == "ok"]
            if deployed and isinstance(deployed[-1], int):
                current = deployed[-1]
            prev = previous_version(history, current)
            if prev is None:
                raise DeployError(
                    "rollback",
                    f"the site history names no version before bundle {current}; name one with --to",
                )
            return prev
        if self.target not in versions:
            raise DeployError(
                f"bundle {self.target}",
                f"is not imported (imported: {', '.join(map(str, versions))}); import it first",
            )
        if self.action == "upgrade" and self.target < max(versions) and not self.allow_downgrade:
            raise DeployError(
                f"bundle {self.target}",
                f"is older than the newest imported bundle {max(versions)}; "
                "use `vigil rollback`, or pass --allow-downgrade (recorded in the audit log)",
            )
        return self.target

    def _refuse(self, statuses: dict[str, HostStatus], target: StoredBundle) -> None:
        shipped = {c.name: c.version for c in target.manifest.components}
        for host, st in sorted(statuses.items()):
            if not st.deployed:
                raise DeployError(
                    f"host {host}",
                    "has no facts file (/var/lib/vigil/deployed.json): it was never deployed, or by a "
                    "vigil that did not write one; run `vigil deploy` once, then upgrade",
                )
            newer = [c for c in st.components.values() if c.bundle_version > target.version]
            if newer and self.action == "upgrade" and not self.allow_downgrade:
                raise DeployError(
                    f"host {host}",
                    f"runs bundle {newer[0].bundle_version} ({newer[0].name}), newer than {target.version}; "
                    "use `vigil rollback`, or pass --allow-downgrade",
                )
            for c in st.components.values():
                new = shipped.get(c.component or c.name)
                if c.role == STORE_ROLE and new and not self.keep_store:
                    why = store_downgrade_refusal(c.version, new)
                    if why:
                        raise DeployError(
                            f"host {host}",
                            f"{c.component or c.name} {c.version} -> {new} refused: {why}; "
                            "nothing was changed",
                        )

    def _bundle(self, store: BundleStore, version: int) -> StoredBundle:
        if version not in self._bundles:
            self._bundles[version] = open_stored(
                store, self.trust, version, copy_ansible_to=self.run_dir / f"project-{version}"
            )
        return self._bundles[version]

    def _preview(
        self, inv: Inventory, target: StoredBundle, statuses: dict[str, HostStatus], out: Outcome
    ) -> None:
        """--check: the files the target's roles would change on each host not at the target, from a
        check-mode run of its site.yml (the components' trees under /opt/vigil/ left out: the version
        lines say those). It changes nothing; a failure of that run is said, not raised."""
        pending = sorted(
            {
                h
                for step in rollout(inv, self.serial)
                if not (step.phase == "store" and self.keep_store)
                for h in step.hosts
                if not step.done(statuses[h], target.version)
            }
        )
        if not pending:
            return
        certs = host_certificates(self.home, inv, check=True)
        result = self._play(
            target,
            "playbooks/site.yml",
            "plan",
            limit=pending,
            extra=certs.extravars(self.home),
            skip_tags=STORE_ROLE if self.keep_store else None,
            check=True,
        )
        failure = _first_failure(result)
        if failure is not None:
            out.files_unknown = f"host {failure[0]}: {failure[1]}: {failure[2]}"
            return
        for change in result.progress.changes:
            for path in change.paths:
                if path.startswith(COMPONENTS_DIR):
                    continue
                got = out.files.setdefault(change.host, [])
                if path not in got:
                    got.append(path)

    def _play(
        self,
        bundle: StoredBundle,
        playbook: str,
        name: str,
        *,
        limit: Iterable[str] | None,
        extra: dict[str, Any] | None = None,
        tags: str | None = None,
        skip_tags: str | None = None,
        check: bool = False,
    ) -> RunResult:
        self._n += 1
        run_id = f"{self._n:02d}-{name}"
        extravars = artifact_vars(bundle)
        extravars.update(vigil_home=str(self.home), vigil_run_id=f"{self.run_dir.name}/{run_id}")
        extravars.update(extra or {})
        return start_playbook(
            runs_dir=self.run_dir,
            ansible_dir=self.ansible_dir or bundle.ansible_dir,
            inventory=self.inventory_path,
            extravars=extravars,
            playbook=playbook,
            limit=",".join(limit) if limit is not None else None,
            tags=tags,
            skip_tags=skip_tags,
            check=check,
            events=self.events,
            run_id=run_id,
        ).wait()

    def status(
        self, inv: Inventory, bundle: StoredBundle, hosts: list[str] | None = None
    ) -> dict[str, HostStatus]:
        out = self.run_dir / f"{self._n + 1:02d}-status-out"
        out.mkdir(mode=0o700)
        result = self._play(
            bundle, "playbooks/status.yml", "status", limit=hosts, extra={"vigil_status_dir": str(out)}
        )
        failure = _first_failure(result)
        if failure is not None:
            raise DeployError(f"host {failure[0]}", f"status: {failure[2]}")
        return read_status_dir(out, hosts or inv.hosts)

    def _baseline(self, inv: Inventory, bundle: StoredBundle) -> list[str]:
        """The silences in force before the upgrade, written by the monitoring hosts' run into the
        baseline directory, which every health check reads them from (:func:`read_baseline`)."""
        out = self.baseline_dir
        out.mkdir(mode=0o700, exist_ok=True)
        result = self._play(
            bundle,
            "playbooks/health.yml",
            "baseline",
            limit=inv.groups["monitoring"],
            # the services answer over TLS to the API login: the same CA and credential as the steps
            extra={**self._tls_vars, "vigil_health_mode": "baseline", "vigil_status_dir": str(out)},
        )
        failure = _first_failure(result)
        if failure is not None:
            raise DeployError(f"host {failure[0]}", f"before the upgrade: {failure[1]}: {failure[2]}")
        return read_baseline(out / "baseline.json")

    @property
    def baseline_dir(self) -> Path:
        """Where the baseline taken before the first step is kept (baseline.json), in the run's
        directory."""
        return self.run_dir / "baseline"

    def _site(self, bundle: StoredBundle, hosts: list[str], step: Step) -> RunResult:
        return self._play(
            bundle,
            "playbooks/site.yml",
            f"{step.phase}-v{bundle.version}",
            limit=hosts,
            extra=dict(self._tls_vars),
            tags=step.tags,
            skip_tags=step.skip_tags,
        )

    def _health(
        self,
        inv: Inventory,
        bundle: StoredBundle,
        hosts: list[str],
        since: int,
        before: int,
    ) -> tuple[str, str, str] | None:
        limit = sorted(set(hosts) | set(inv.groups["monitoring"]))
        result = self._play(
            bundle,
            "playbooks/health.yml",
            "health",
            limit=limit,
            extra={
                **self._tls_vars,
                "vigil_health_mode": "check",
                "vigil_health_since": since,
                "vigil_health_before": before,
                "vigil_health_hosts": sorted(hosts),
                # the silences to keep are in baseline.json there, read by the play as data
                "vigil_status_dir": str(self.baseline_dir),
            },
        )
        return _first_failure(result)

    def _switch_back(
        self,
        store: BundleStore,
        inv: Inventory,
        statuses: dict[str, HostStatus],
        step: Step,
        hosts: list[str],
        before: int,
        failure: tuple[str, str, str],
        out: Outcome,
    ) -> None:
        """Deploy each host's previous bundle with the step's roles, check health, and stop."""
        host, component, reason = failure
        self.say(f"FAIL: host {host}: {component}: {reason}; switching {', '.join(hosts)} back")
        by_version: dict[int, list[str]] = {}
        for h in hosts:
            comps = [c for c in statuses[h].components.values() if step.roles_match(c.role)]
            old = max((c.bundle_version for c in comps), default=statuses[h].bundle_version)
            if old is None:
                continue
            by_version.setdefault(old, []).append(h)
        back: list[str] = []
        for old, group in sorted(by_version.items()):
            try:
                bundle = self._bundle(store, old)
            except DeployError as exc:
                back.append(f"cannot switch {','.join(group)} back: {exc}")
                continue
            since = int(time.time())
            res = self._site(bundle, group, step)
            again = _first_failure(res) or self._health(inv, bundle, group, since, before)
            back.append(
                f"{','.join(group)} back on bundle {old}"
                + (" and healthy" if again is None else f", still unhealthy: {again[1]}: {again[2]}")
            )
        out.steps_run.append({"phase": step.phase, "hosts": hosts, "switched_back": back})
        raise UpgradeFailed(f"host {host}", f"{component}: {reason}; {'; '.join(back)}")


def _first_failure(result: RunResult) -> tuple[str, str, str] | None:
    """(host, component, reason) of the run's first failure; None when it went through."""
    if result.progress.failures:
        f = result.progress.failures[0]
        component, sep, reason = f.message.partition(": ")
        if not sep or " " in component:
            component, reason = f.role or f.task or "playbook", f.message
        return f.host, component, reason
    if not result.ok:
        return "all", "playbook", f"ansible status {result.status} (rc {result.rc}); see {result.run_dir}"
    return None


def site_status(
    home: Path,
    inventory_path: Path,
    trust: TrustRoot,
    *,
    limit: str | None = None,
    ansible_dir: Path | None = None,
) -> tuple[Path, dict[str, HostStatus]]:
    """Every host's components, versions, bundle and drift, read with the newest imported bundle's
    ``status.yml`` (it changes nothing). Returns the run's directory and the hosts' status."""
    inv = load_inventory(inventory_path, limit=limit)
    store = BundleStore(home)
    if not store.versions():
        raise DeployError(str(home), "no bundle imported; run `vigil bundle import` first")
    r = Rollout(home, inventory_path, trust, target=None, action="status", ansible_dir=ansible_dir)
    r.run_dir = home / "runs" / f"{new_run_id()}-status"
    r.run_dir.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    r.run_dir.mkdir(mode=0o700)
    bundle = r._bundle(store, max(store.versions()))
    if not ((ansible_dir or bundle.ansible_dir) / "playbooks" / "status.yml").is_file():
        raise DeployError(
            f"bundle {bundle.version}",
            "has no playbooks/status.yml (built by an older vigil); import a newer one",
        )
    unreachable = ping_hosts(runs_dir=r.run_dir, inventory=inv.path, limit=limit)
    if unreachable:
        host = sorted(unreachable)[0]
        raise DeployError(f"host {host}", f"unreachable: {unreachable[host]}")
    return r.run_dir, r.status(inv, bundle, hosts=inv.selected)
