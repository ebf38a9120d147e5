"""What the deploy screen shows, computed from ansible-runner's events alone: no widget, no thread.

The counts are scored by the same :class:`~vigil.installer.deploy.Progress` the run itself keeps (so
the grid agrees with the CLI's recap); the board adds what only a live view needs: the task each
host is on now, the log lines, which rows changed since the screen last drew them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vigil.installer.deploy import Progress

#: the grid's columns after the host name
COLUMNS = ("ok", "changed", "failed", "unreachable", "skipped", "task")


@dataclass(frozen=True)
class HostRow:
    host: str
    ok: int
    changed: int
    failed: int
    unreachable: int
    skipped: int
    #: the task the host is on now (or the last one it finished)
    task: str

    @property
    def state(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        if self.changed:
            return "changed"
        if self.ok:
            return "ok"
        return "waiting"

    def cells(self) -> tuple[str, ...]:
        return (
            str(self.ok),
            str(self.changed),
            str(self.failed),
            str(self.unreachable),
            str(self.skipped),
            self.task,
        )


class DeployBoard:
    """Feed it events (:meth:`apply`); read the grid (:meth:`rows`), the totals and the new log lines.

    ``hosts``: the plan's hosts, shown (waiting) before their first event. ``log_lines``: how many log
    lines are kept for :attr:`log`.
    """

    def __init__(self, hosts: Iterable[str] = (), *, log_lines: int = 2000) -> None:
        self.progress = Progress()
        self.current: dict[str, str] = {}
        self.play = ""
        self.events = 0
        self.log: deque[str] = deque(maxlen=log_lines)
        self._dirty: set[str] = set()
        self._new_log: list[str] = []
        for host in hosts:
            self._touch(host)

    def _touch(self, host: str) -> None:
        self.progress.host(host)
        self._dirty.add(host)

    def apply(self, event: dict[str, Any]) -> None:
        self.events += 1
        self.progress.apply(event)
        kind = str(event.get("event", ""))
        data = event.get("event_data") or {}
        host = data.get("host") or data.get("remote_addr")
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play", ""))
        elif kind == "runner_on_start" and host:
            self.current[host] = str(data.get("task", ""))
            self._touch(host)
        elif kind.startswith("runner_on_") and host:
            self.current.setdefault(host, str(data.get("task", "")))
            self._touch(host)
        elif kind == "playbook_on_stats":
            self._dirty |= set(self.progress.hosts)
        text = event.get("stdout")
        if text:
            for line in str(text).splitlines():
                if line.strip():
                    self.log.append(line)
                    self._new_log.append(line)

    def apply_all(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            self.apply(event)

    def row(self, host: str) -> HostRow:
        s = self.progress.hosts[host]
        return HostRow(host, s.ok, s.changed, s.failed, s.unreachable, s.skipped, self.current.get(host, ""))

    def rows(self) -> list[HostRow]:
        return [self.row(h) for h in sorted(self.progress.hosts)]

    def take_dirty(self) -> list[HostRow]:
        """The rows that changed since the last call (for a redraw of those cells only)."""
        dirty, self._dirty = sorted(self._dirty), set()
        return [self.row(h) for h in dirty]

    def take_log(self) -> list[str]:
        """The log lines that came since the last call."""
        new, self._new_log = self._new_log, []
        return new

    def totals(self) -> dict[str, int]:
        hosts = self.progress.hosts.values()
        return {
            "hosts": len(self.progress.hosts),
            "ok": sum(s.ok for s in hosts),
            "changed": sum(s.changed for s in hosts),
            "failed": sum(s.failed for s in hosts),
            "unreachable": sum(s.unreachable for s in hosts),
            "skipped": sum(s.skipped for s in hosts),
        }

    @property
    def task(self) -> str:
        return self.progress.task

    @property
    def tasks_started(self) -> int:
        return self.progress.tasks_started

    def status_line(self, elapsed: float) -> str:
        t = self.totals()
        minutes, seconds = divmod(int(elapsed), 60)
        return (
            f"{minutes:02d}:{seconds:02d}  task {self.tasks_started}: {self.task or '-'}  |  "
            f"ok {t['ok']}  changed {t['changed']}  failed {t['failed']}  unreachable {t['unreachable']}"
        )
