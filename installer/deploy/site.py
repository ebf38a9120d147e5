"""What the site runs: each host's facts file, read back by ``playbooks/status.yml``, and the admin
host's history of deploys, upgrades and rollbacks.

Every deploy ends with a play that writes ``/var/lib/vigil/deployed.json`` on each host: the bundle
version each component came from, and the sha256 of its binaries, unit and configuration as the
deploy left them. ``status.yml`` reads that file back on every host, re-hashes what it lists and
writes one JSON document per host into the run's directory; this module turns those documents into
:class:`HostStatus` values. The admin host appends one line per finished deploy, upgrade or
rollback to ``$VIGIL_HOME/site/history.jsonl``; a rollback without ``--to`` goes back to the last
version in it that differs from what runs now.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.basics.bounded import load_json_file
from vigil.installer.deploy.artifacts import DeployError

#: the most bytes of a document a host hands back (status.yml, the upgrade's baseline)
STATUS_MAX_BYTES = 16 << 20
#: the role whose component keeps the site's data; an upgrade changes it last (see upgrade.py)
STORE_ROLE = "victoriametrics"


@dataclass(frozen=True)
class Drift:
    component: str
    path: str
    reason: str


@dataclass(frozen=True)
class Component:
    """One entry of a host's facts file: a service (or a tool) a role installed."""

    #: the entry's name: the role's (``vmalert``), or the second service a role installs
    name: str
    version: str
    role: str
    service: str
    bundle_version: int
    #: the bundle component it came from (``victoria-metrics`` for vmalert too)
    component: str = ""


@dataclass(frozen=True)
class HostStatus:
    """One host as ``status.yml`` found it."""

    host: str
    #: bundle version of the last deploy that wrote the facts file (None: no facts file)
    bundle_version: int | None
    channel: str = ""
    components: dict[str, Component] = field(default_factory=dict)
    drift: tuple[Drift, ...] = ()
    services: dict[str, str] = field(default_factory=dict)

    @property
    def deployed(self) -> bool:
        return self.bundle_version is not None

    def at(self, version: int, *, roles: Iterable[str] | None = None) -> bool:
        """Whether every component (of ``roles``, when given) came from bundle ``version``, with no
        drift and every service active: the host needs nothing more to be at that version."""
        wanted = set(roles) if roles is not None else None
        comps = [c for c in self.components.values() if wanted is None or c.role in wanted]
        if not self.deployed or not comps:
            return False
        if any(c.bundle_version != version for c in comps):
            return False
        names = {c.name for c in comps}
        if any(d.component in names or not d.component for d in self.drift):
            return False
        return all(self.services.get(c.service, "active") == "active" for c in comps if c.service)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "bundle_version": self.bundle_version,
            "channel": self.channel,
            "components": {
                n: {
                    "component": c.component,
                    "version": c.version,
                    "role": c.role,
                    "service": c.service,
                    "bundle_version": c.bundle_version,
                    "state": self.services.get(c.service, "") if c.service else "",
                }
                for n, c in sorted(self.components.items())
            },
            "drift": [vars(d) for d in self.drift],
        }


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_host_status(doc: object, *, source: str) -> HostStatus:
    """One document written by ``status.yml``; anything malformed is an error naming ``source``."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("host"), str):
        raise DeployError(source, "is not a host status document (no 'host')")
    host = doc["host"]
    drift = tuple(
        Drift(str(d.get("component", "")), str(d.get("path", "")), str(d.get("reason", "")))
        for d in doc.get("drift") or []
        if isinstance(d, Mapping)
    )
    services = {str(k): str(v) for k, v in (doc.get("services") or {}).items()}
    facts = doc.get("facts")
    if not isinstance(facts, Mapping):
        return HostStatus(host, None, drift=drift, services=services)
    comps: dict[str, Component] = {}
    raw = facts.get("components")
    for name, c in raw.items() if isinstance(raw, Mapping) else []:
        if not isinstance(c, Mapping):
            continue
        bv = _int(c.get("bundle_version"))
        if bv is None:
            continue
        comps[str(name)] = Component(
            str(name),
            str(c.get("version", "")),
            str(c.get("role", "")),
            str(c.get("service", "")),
            bv,
            str(c.get("component", "")),
        )
    return HostStatus(
        host=host,
        bundle_version=_int(facts.get("bundle_version")),
        channel=str(facts.get("bundle_channel", "")),
        components=comps,
        drift=drift,
        services=services,
    )


def read_status_dir(path: Path, hosts: Iterable[str]) -> dict[str, HostStatus]:
    """The documents ``status.yml`` wrote for ``hosts``; a host without one is an error."""
    out: dict[str, HostStatus] = {}
    for host in hosts:
        f = path / f"{host}.json"
        if not f.exists():
            raise DeployError(f"host {host}", f"status.yml wrote no {f.name}")
        try:  # what the host handed back: bounded before it is parsed
            doc = load_json_file(f, max_bytes=STATUS_MAX_BYTES, error=DeployError)
        except ValueError as exc:
            raise DeployError(str(f), f"unreadable: {str(exc).splitlines()[0]}") from None
        out[host] = parse_host_status(doc, source=str(f))
    return out


# --- history --------------------------------------------------------------------------------------


def history_path(home: Path) -> Path:
    return home / "site" / "history.jsonl"


def append_history(home: Path, entry: Mapping[str, Any]) -> None:
    """One line per finished deploy, upgrade or rollback; appended under a lock, fsynced."""
    path = history_path(home)
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    line = json.dumps({"at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), **entry}, sort_keys=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_history(home: Path) -> list[dict[str, Any]]:
    """The history, oldest first; a torn last line (a crash mid-write) is skipped, nothing else is."""
    path = history_path(home)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # no newline after it: the write that died
                continue
            raise DeployError(str(path), f"line {i + 1} is not JSON") from None
        if isinstance(item, dict):
            out.append(item)
    return out


def previous_version(history: list[dict[str, Any]], current: int) -> int | None:
    """The bundle version the site ran before ``current``: the newest successful deploy, upgrade or
    rollback in the history whose version differs from it."""
    for item in reversed(history):
        v = item.get("bundle_version")
        if item.get("outcome") == "ok" and isinstance(v, int) and v != current and not item.get("check"):
            return v
    return None


# --- one change at a time -----------------------------------------------------------------------


def lock_path(home: Path) -> Path:
    return home / "site" / "lock"


class SiteLock:
    """``$VIGIL_HOME/site/lock``: one deploy, upgrade or rollback at a time from this admin home.

    An exclusive ``flock`` on the file, taken without waiting: a second run is refused at once with
    the holder's name, pid and start time (written into the file). The kernel drops the lock when the
    holder's process ends however it ends (``kill -9`` included), so a rerun after a crash is never
    refused by a stale lock. The file is opened without following a symlink and must be a regular
    file owned by this user; its content is only ever shown, never trusted.
    """

    def __init__(self, home: Path, holder: str, *, path: Path | None = None, name: str = "site") -> None:
        #: another lock file of the same kind (the admin host's install root: deploy/admin.py)
        self.path = path or lock_path(home)
        self.name = name
        self.holder = holder
        self._fd: int | None = None

    def acquire(self) -> SiteLock:
        self.path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise DeployError(str(self.path), f"cannot open the {self.name} lock: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                raise DeployError(str(self.path), f"the {self.name} lock is not a regular file of this user")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                other = os.pread(fd, 512, 0).decode(errors="replace").strip()
                other = "".join(ch if ch.isprintable() else "?" for ch in other)
                raise DeployError(
                    self.name,
                    f"busy: {other or 'another run'} holds {self.path}; wait for it to finish",
                ) from None
            os.ftruncate(fd, 0)
            since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            os.pwrite(fd, f"{self.holder} (pid {os.getpid()}, since {since})\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.ftruncate(fd, 0)
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> SiteLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
