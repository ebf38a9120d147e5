"""Run the deploy playbook through ansible-runner's Python API and keep score of its events.

No execution-environment containers, no process isolation: ansible-playbook from the same
virtual environment as vigil, on the admin host. Each run keeps its artifacts (events,
stdout, the extra vars) under ``$VIGIL_HOME/runs/<id>/``.

The run goes on ansible-runner's own thread (``run_async``). Its ``event_handler`` scores every
event into a :class:`Progress` object and puts a copy on the front end's queue, which the front
end (the CLI's live table, the TUI) drains on a timer, as ansible-navigator does.
"""

from __future__ import annotations

import os
import queue
import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.basics.atomic import write_file_atomic
from vigil.installer.deploy.artifacts import DeployError
from vigil.installer.deploy.fingerprint import FINGERPRINTED_PLAYBOOK, run_key
from vigil.installer.deploy.leash import write_leash
from vigil.installer.deploy.reap import end_run_processes, marker

COUNTS = ("ok", "changed", "failed", "unreachable", "skipped")


@dataclass
class HostScore:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    task: str = ""

    def recap(self, host: str) -> str:
        return (
            f"{host} ok={self.ok} changed={self.changed} unreachable={self.unreachable} "
            f"failed={self.failed} skipped={self.skipped}"
        )


@dataclass
class Failure:
    host: str
    task: str
    message: str
    #: the role the failed task belongs to ("" for a task of the playbook itself)
    role: str = ""


@dataclass(frozen=True)
class Changed:
    """A task that changed a host (in check mode: would change it), and the paths it names."""

    host: str
    task: str
    #: the role the task belongs to ("" for a task of the playbook itself)
    role: str
    #: the files and directories the module reported (``dest``, ``path``, its diff's headers)
    paths: tuple[str, ...]

    def line(self) -> str:
        where = f" ({', '.join(self.paths)})" if self.paths else ""
        return f"{self.host}: {self.task}{where}"


#: how many paths one task's line names at most (a loop over many files says how many more)
PATHS_MAX = 8


def changed_paths(res: dict[str, Any]) -> tuple[str, ...]:
    """The absolute paths on the host a module result names as changed: its ``dest`` or ``path``,
    the same among the arguments it was invoked with (a binary copy in check mode returns no
    ``dest`` of its own), the host side of its ``--diff``, and the same in each changed item of a
    loop; in order, each once."""
    found: list[str] = []

    def add(value: object) -> None:
        if isinstance(value, str) and value.startswith("/") and value not in found:
            found.append(value)

    def walk(r: dict[str, Any]) -> None:
        add(r.get("dest"))
        add(r.get("path"))
        invocation = r.get("invocation")
        args = invocation.get("module_args") if isinstance(invocation, dict) else None
        if isinstance(args, dict):
            add(args.get("dest"))
            add(args.get("path"))
        diffs = r.get("diff")
        for d in diffs if isinstance(diffs, list) else [diffs]:
            # the host's side only: a copy's after_header is its source on the controller;
            # lineinfile's reads "<path> (content)"
            header = d.get("before_header") if isinstance(d, dict) else None
            if isinstance(header, str):
                add(header.split(" (", 1)[0])

    walk(res)
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("changed"):
            walk(item)
    if len(found) > PATHS_MAX:
        return (*found[:PATHS_MAX], f"... {len(found) - PATHS_MAX} more")
    return tuple(found)


@dataclass
class Progress:
    """What has happened so far in a run; written by the event handler, read by front ends."""

    hosts: dict[str, HostScore] = field(default_factory=dict)
    task: str = ""
    tasks_started: int = 0
    failures: list[Failure] = field(default_factory=list)
    #: every task that changed a host (in check mode: would change it), in the order they ended
    changes: list[Changed] = field(default_factory=list)
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def host(self, name: str) -> HostScore:
        return self.hosts.setdefault(name, HostScore())

    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data", {}) or {}
        host = data.get("host") or data.get("remote_addr")
        with self.lock:
            if kind == "playbook_on_task_start":
                self.task = data.get("task", "")
                self.tasks_started += 1
            elif kind == "runner_on_ok" and host:
                score = self.host(host)
                score.task = data.get("task", "")
                res = data.get("res") or {}
                if res.get("changed"):
                    score.changed += 1
                    self.changes.append(
                        Changed(host, data.get("task", ""), data.get("role", ""), changed_paths(res))
                    )
                score.ok += 1
            elif kind == "runner_on_failed" and host and not data.get("ignore_errors"):
                self.host(host).failed += 1
                self.failures.append(
                    Failure(host, data.get("task", ""), _message(data.get("res", {})), data.get("role", ""))
                )
            elif kind == "runner_on_unreachable" and host:
                self.host(host).unreachable += 1
                self.failures.append(
                    Failure(host, data.get("task", ""), _message(data.get("res", {})), data.get("role", ""))
                )
            elif kind == "runner_on_skipped" and host:
                self.host(host).skipped += 1
            elif kind == "playbook_on_stats":
                self._apply_stats(data)

    def _apply_stats(self, data: dict[str, Any]) -> None:
        """The final recap from Ansible itself is the authority for the counts."""
        names = {
            "ok": "ok",
            "changed": "changed",
            "failures": "failed",
            "dark": "unreachable",
            "skipped": "skipped",
        }
        hosts: set[str] = set()
        for key in names:
            hosts |= set((data.get(key) or {}).keys())
        for host in hosts:
            score = self.host(host)
            for key, attr in names.items():
                setattr(score, attr, int((data.get(key) or {}).get(host, 0)))


def _message(res: dict[str, Any]) -> str:
    for key in ("msg", "stderr", "module_stderr", "reason"):
        value = res.get(key)
        if value:
            text = str(value).strip().splitlines()
            return text[-1][:300] if text else ""
    return "failed"


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    status: str
    rc: int
    progress: Progress
    #: secrets of the site found in the run's artifacts (deploy/leaks.py), one line each
    leaks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.rc == 0
            and not self.leaks
            and not any(s.failed or s.unreachable for s in self.progress.hosts.values())
        )

    def recap_lines(self) -> list[str]:
        return [self.progress.hosts[h].recap(h) for h in sorted(self.progress.hosts)]


#: hosts Ansible works on at once unless `deploy --forks` says otherwise (Ansible's own default,
#: 5, makes every task of a 500-node deploy take 100 rounds); docs/benchmarks.md has the figures
DEFAULT_FORKS = 25
#: what `deploy --forks` accepts: each fork is an ansible-playbook worker process on the admin host
MAX_FORKS = 500


def new_run_id() -> str:
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


#: the whole Ansible configuration of a run; every setting vigil needs is in the environment below
_CONFIG = b"""# Written by vigil deploy. ANSIBLE_CONFIG names this file, so Ansible reads no other
# ansible.cfg: none from the working directory, the bundle's content or the store.
# The settings are in the run's environment.
[defaults]
"""


def _environment(roles_path: Path, run_dir: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    config = run_dir / "ansible.cfg"
    write_file_atomic(config, _CONFIG, mode=0o600, fsync=False)
    search_path = f"{venv_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    # ansible-playbook and ansible die with this process, however it ends (leash.py)
    leash = write_leash(run_dir, search_path)
    return {
        # every process of the run carries it: a cancelled run ends them all (reap.py)
        **marker(run_dir),
        "PATH": f"{leash}:{search_path}",
        "ANSIBLE_CONFIG": str(config),
        "ANSIBLE_ROLES_PATH": str(roles_path),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_FORCE_COLOR": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        # cryptography 51 warns on import that DSA is deprecated, and ansible-core 2.19 imports it for
        # its SSH agent: a Python warning on every run's output, before the playbook starts
        "PYTHONWARNINGS": "ignore:DSA is deprecated",
    }


@dataclass
class PlaybookRun:
    """A playbook run in progress: ansible-runner works on its own thread (``run_async``).

    Its event handler scores each event into :attr:`progress` (the authority for the result) and,
    when the front end gave one, puts a copy on :attr:`events`, which the front end drains on a
    timer (a live table, the TUI's log pane) — never a busy loop, never the UI thread blocked.
    """

    run_id: str
    run_dir: Path
    progress: Progress
    events: queue.Queue[dict[str, Any]] | None
    _thread: threading.Thread = field(repr=False)
    _runner: Any = field(repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    #: called again after the thread ended, in case the run died before ansible-runner's own call
    _on_finish: Callable[[], None] | None = field(default=None, repr=False)

    def cancel(self) -> None:
        """Stop the run: every process it started ends (reap.py) and ansible-runner reports status
        ``canceled``. Returns at once; :meth:`wait` for the end."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> RunResult:
        """Wait for the run to end (raises TimeoutError if TIMEOUT passes first) and return its result."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"run {self.run_id} still going after {timeout} s")
        if self._on_finish is not None:
            self._on_finish()
        with self.progress.lock:
            self.progress.finished = True
        return RunResult(
            run_id=self.run_id,
            run_dir=self.run_dir,
            status=str(self._runner.status),
            rc=int(self._runner.rc or 0),
            progress=self.progress,
        )


def start_playbook(
    *,
    runs_dir: Path,
    ansible_dir: Path,
    inventory: Path,
    extravars: dict[str, Any],
    playbook: str = "playbooks/site.yml",
    limit: str | None = None,
    tags: str | None = None,
    skip_tags: str | None = None,
    check: bool = False,
    forks: int = DEFAULT_FORKS,
    events: queue.Queue[dict[str, Any]] | None = None,
    run_id: str | None = None,
    on_finish: Callable[[], None] | None = None,
) -> PlaybookRun:
    """Start ``playbook`` from ``ansible_dir`` (with ``ansible_dir/roles``) against ``inventory``.

    Returns at once; the run's artifacts go to ``runs_dir/<run id>/``. ``on_finish`` is called on the
    run's thread when it ends, however it ends (a lock it held is released there).
    """
    import ansible_runner

    if not (ansible_dir / playbook).is_file():
        raise DeployError(str(ansible_dir / playbook), "playbook not found in the bundle's Ansible content")
    run_id = run_id or new_run_id()
    if playbook == FINGERPRINTED_PLAYBOOK and not tags and not skip_tags:
        # the key of the roles' fingerprints: a role ends at once on a host where nothing would change
        extravars = {
            **extravars,
            "vigil_fingerprint": run_key(ansible_dir=ansible_dir, inventory=inventory, extravars=extravars),
        }
    runs_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
    run_dir = runs_dir / run_id
    run_dir.mkdir(mode=0o700, exist_ok=True)  # the plan may have made it, for the private Ansible copy
    progress = Progress()
    cancel = threading.Event()
    reaped = threading.Event()

    def handler(event: dict[str, Any]) -> bool:
        progress.apply(event)
        if events is not None:
            events.put(dict(event))
        return True

    def cancelled() -> bool:
        """ansible-runner asks between reads of the playbook's output (on its thread): on the first
        yes, every process of the run is ended first; ansible-runner's own SIGKILL to the playbook's
        process group then finds nothing, where alone it left the workers (reap.py)."""
        if not cancel.is_set():
            return False
        if not reaped.is_set():
            end_run_processes(run_dir)
            reaped.set()
        return True

    def finished(_runner: Any) -> None:
        if cancel.is_set():  # anything the play started while it was being stopped
            end_run_processes(run_dir, grace=1.0)
        if on_finish is not None:
            on_finish()

    thread, runner = ansible_runner.run_async(
        private_data_dir=str(run_dir),
        project_dir=str(ansible_dir),
        playbook=playbook,
        inventory=str(inventory.resolve()),
        extravars=extravars,
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        cmdline="--check --diff" if check else None,
        forks=forks,
        envvars=_environment(ansible_dir / "roles", run_dir),
        event_handler=handler,
        cancel_callback=cancelled,
        finished_callback=finished,
        quiet=True,
        artifact_dir=str(run_dir),
        ident="artifacts",
        process_isolation=False,
    )
    return PlaybookRun(
        run_id=run_id,
        run_dir=run_dir,
        progress=progress,
        events=events,
        _thread=thread,
        _runner=runner,
        _cancel=cancel,
        _on_finish=on_finish,
    )


def ping_hosts(*, runs_dir: Path, inventory: Path, limit: str | None = None) -> dict[str, str]:
    """Reach every host with Ansible's ``ping`` before any change; returns {host: reason} for failures."""
    import ansible_runner

    runs_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
    run_dir = runs_dir / f"{new_run_id()}-preflight"
    run_dir.mkdir(mode=0o700)
    progress = Progress()

    def handler(event: dict[str, Any]) -> bool:
        progress.apply(event)
        return True

    ansible_runner.run(
        private_data_dir=str(run_dir),
        host_pattern="all",
        module="ping",
        inventory=str(inventory.resolve()),
        limit=limit,
        forks=DEFAULT_FORKS,
        envvars=_environment(run_dir, run_dir),
        event_handler=handler,
        quiet=True,
        artifact_dir=str(run_dir),
        ident="artifacts",
        process_isolation=False,
    )
    return {f.host: f.message for f in progress.failures}
