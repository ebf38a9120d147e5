"""Each replica's health, asked of that replica alone: the monitoring pair's view for ``vigil
status`` and the console (docs/ha.md, "Each replica's health").

A read through :class:`~vigil.installer.stack.Replicas` fails over and so hides a replica that is
down, full or behind; here each one is asked for itself, side by side:

- **VictoriaMetrics**: whether it answers ``/health``; its own ``/metrics`` (with the API login, or
  1.79's ``?authKey=``, the site's metrics key, over https only) for the free disk under
  its data (``vm_free_disk_space_bytes``), the floor below which it stops taking samples
  (``vm_free_disk_space_limit_bytes``, ``-storage.minFreeDiskSpaceBytes``) and whether it has
  stopped (``vm_storage_is_read_only``); the newest ``up`` sample it holds; and, asked of the pair
  (any replica that answers), what each vmagent still has queued for it
  (``vmagent_remotewrite_pending_data_bytes``, whose ``url`` label is ``N:secret-url``, N counting
  the monitoring hosts in the inventory's order as the vmagent role gives them).
- **Alertmanager**: whether it answers ``/api/v2/status``; its cluster's state and how many members
  it sees, against the members listed.

What a replica sends is untrusted: numbers are parsed strictly, text is kept as data for the front
end to show plainly, and nothing read is used to build a request.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from vigil.installer.access import SiteAccess
from vigil.installer.stack import Failure, ReadFailed, Replicas, StackError, TooLarge, split_urls

#: seconds one replica has for one answer
TIMEOUT = 3.0
#: the most bytes read of VictoriaMetrics' own /metrics page (a few hundred kB in practice)
METRICS_BYTES = 4 << 20
#: the most bytes read of any other answer
ANSWER_BYTES = 1 << 20
#: a replica whose newest sample is older than this is behind (seconds; the lab's latency offset is
#: 10 s, VictoriaMetrics' default 30 s, the scrape interval 30 s at most)
STALE_AFTER = 180.0
#: queued bytes for one replica above which it is said to be catching up
QUEUE_NOTICE = 1 << 20

_VM_METRICS = ("vm_free_disk_space_bytes", "vm_free_disk_space_limit_bytes", "vm_storage_is_read_only")
# one sample line of the text exposition format: a name, optional labels, a value (a timestamp may
# follow); anything else on the page is skipped
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^\n{}]*\})?[ \t]+([^ \t\n]+)(?:[ \t]+-?[0-9]+)?")
_QUEUE_URL = re.compile(r"([1-9][0-9]{0,3}):")


@dataclass(frozen=True)
class ReplicaHealth:
    """One replica's answers; ``problems`` says in words what needs attention (empty: healthy)."""

    service: str
    url: str
    problems: tuple[str, ...] = ()
    answered: bool = True
    newest_sample_age: float | None = None
    free_disk_bytes: int | None = None
    free_disk_limit_bytes: int | None = None
    read_only: bool | None = None
    #: bytes each vmagent (its ``instance`` label) still has queued for this replica
    queued_bytes: dict[str, int] = field(default_factory=dict)
    cluster_status: str | None = None
    cluster_peers: int | None = None
    version: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def facts(self) -> list[str]:
        """What the replica said of itself, in words (the problems aside)."""
        out = []
        if self.newest_sample_age is not None:
            out.append(f"newest sample {self.newest_sample_age:.0f} s old")
        if self.free_disk_bytes is not None:
            out.append(f"{_size(self.free_disk_bytes)} free")
        if self.queued_bytes:
            out.append(
                "queued for it: "
                + ", ".join(f"{_size(b)} on {h}" for h, b in sorted(self.queued_bytes.items()))
            )
        if self.cluster_status is not None:
            peers = "" if self.cluster_peers is None else f", {self.cluster_peers} members seen"
            out.append(f"cluster {self.cluster_status}{peers}")
        if self.version:
            out.append(f"version {self.version}")
        return out

    def line(self) -> str:
        """``VictoriaMetrics https://198.18.0.10:8428: ok; newest sample 12 s old; 40.1 GiB free``."""
        state = "ok" if self.ok else "; ".join(self.problems)
        return "; ".join([f"{self.service} {self.url}: {state}", *self.facts()])

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "url": self.url,
            "ok": self.ok,
            "problems": list(self.problems),
            "answered": self.answered,
            "newest_sample_age_seconds": self.newest_sample_age,
            "free_disk_bytes": self.free_disk_bytes,
            "free_disk_limit_bytes": self.free_disk_limit_bytes,
            "read_only": self.read_only,
            "queued_bytes": dict(sorted(self.queued_bytes.items())),
            "cluster_status": self.cluster_status,
            "cluster_peers": self.cluster_peers,
            "version": self.version,
        }


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _why(failure: Failure) -> str:
    if failure.status is not None:
        return f"HTTP {failure.status} {failure.phrase}".strip()
    return failure.reason if failure.tls else f"cannot connect: {failure.reason}"


def _get(client: Replicas, path: str, params: Sequence[tuple[str, str]] = ()) -> bytes:
    """The body of one replica's 2xx answer; a StackError naming why there is none."""
    try:
        return client.get(path, params).body
    except ReadFailed as exc:
        raise StackError(client.urls[0], _why(exc.failures[0]) if exc.failures else "no answer") from None
    except TooLarge as exc:
        raise StackError(client.urls[0], f"{path}: answer larger than {exc.limit:,} bytes") from None


def parse_metrics(text: str, wanted: Sequence[str]) -> dict[str, float]:
    """The first sample of each WANTED name on a text-format metrics page; other lines are skipped,
    and a value that is not a finite number is not taken."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.fullmatch(line.strip())
        if not m or m.group(1) not in wanted or m.group(1) in out:
            continue
        try:
            value = float(m.group(2))
        except ValueError:
            continue
        if math.isfinite(value):
            out[m.group(1)] = value
    return out


def _instant(body: bytes) -> list[tuple[dict[str, str], float]]:
    """An instant query's series as (labels, value); raises ValueError for any other shape."""
    answer = json.loads(body)
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise ValueError("query failed")
    out = []
    for item in answer["data"]["result"]:
        labels = item["metric"]
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise ValueError("labels are not strings")
        value = float(item["value"][1])
        if math.isfinite(value):
            out.append((labels, value))
    return out


def _own_metrics(client: Replicas, metrics_key: str | None) -> bytes:
    """VictoriaMetrics' own /metrics: with the API login (1.86 and later), else, refused and over
    https with the site's metrics key at hand, with ``?authKey=`` (1.79's -metricsAuthKey)."""
    try:
        return _get(client, "/metrics")
    except StackError as exc:
        if not (metrics_key and exc.reason.startswith("HTTP 401") and client.urls[0].startswith("https://")):
            raise
    return _get(client, "/metrics", [("authKey", metrics_key)])


def _victoriametrics(
    url: str, access: SiteAccess, now: float, timeout: float, metrics_key: str | None = None
) -> ReplicaHealth:
    client = Replicas(
        [url], service="VictoriaMetrics", access=access, timeout=timeout, max_bytes=METRICS_BYTES
    )
    try:
        _get(client, "/health")
    except StackError as exc:
        return ReplicaHealth("VictoriaMetrics", url, (f"DOWN: {exc.reason}",), answered=False)
    problems: list[str] = []
    facts: dict[str, Any] = {}
    try:
        own = parse_metrics(_own_metrics(client, metrics_key).decode("utf-8", "replace"), _VM_METRICS)
    except StackError as exc:
        problems.append(f"its /metrics not read: {exc.reason}")
    else:
        if "vm_free_disk_space_bytes" in own:
            facts["free_disk_bytes"] = int(own["vm_free_disk_space_bytes"])
        if "vm_free_disk_space_limit_bytes" in own:
            facts["free_disk_limit_bytes"] = int(own["vm_free_disk_space_limit_bytes"])
        if "vm_storage_is_read_only" in own:
            facts["read_only"] = own["vm_storage_is_read_only"] >= 1
        if facts.get("read_only"):
            limit = facts.get("free_disk_limit_bytes")
            floor = f" (below {_size(limit)}, -storage.minFreeDiskSpaceBytes)" if limit is not None else ""
            problems.append(f"READ-ONLY: disk full{floor}: it takes no new samples")
    try:
        newest = _instant(_get(client, "/api/v1/query", [("query", "max(timestamp(up))"), ("nocache", "1")]))
    except (StackError, ValueError, KeyError, TypeError, IndexError) as exc:
        reason = exc.reason if isinstance(exc, StackError) else "its answer is not a query result"
        problems.append(f"newest sample not read: {reason}")
    else:
        if not newest:
            problems.append("BEHIND: no sample of `up` in its lookback window")
        else:
            age = max(0.0, now - newest[0][1])
            facts["newest_sample_age"] = age
            if age > STALE_AFTER:
                problems.append(f"BEHIND: newest sample {age:.0f} s old")
    return ReplicaHealth("VictoriaMetrics", url, tuple(problems), **facts)


def _queues(urls: Sequence[str], access: SiteAccess, timeout: float) -> tuple[dict[int, dict[str, int]], str]:
    """{replica index: {vmagent instance: bytes queued}} asked of any replica, or a reason it could
    not be read (empty when read)."""
    client = Replicas(urls, service="VictoriaMetrics", access=access, timeout=timeout, max_bytes=ANSWER_BYTES)
    expr = 'sum by (instance, url) (vmagent_remotewrite_pending_data_bytes{job="vmagent"})'
    try:
        series = _instant(client.get("/api/v1/query", [("query", expr), ("nocache", "1")]).body)
    except (ReadFailed, TooLarge) as exc:
        return {}, str(exc.reason)
    except (ValueError, KeyError, TypeError, IndexError):
        return {}, "the queue query's answer is not a query result"
    out: dict[int, dict[str, int]] = {}
    for labels, value in series:
        m = _QUEUE_URL.match(labels.get("url", ""))
        if not m or int(m.group(1)) > len(urls):
            continue
        out.setdefault(int(m.group(1)) - 1, {})[labels.get("instance", "")] = int(value)
    return out, ""


def _alertmanager(url: str, members: int, access: SiteAccess, timeout: float) -> ReplicaHealth:
    client = Replicas([url], service="Alertmanager", access=access, timeout=timeout, max_bytes=ANSWER_BYTES)
    try:
        body = _get(client, "/api/v2/status")
    except StackError as exc:
        return ReplicaHealth("Alertmanager", url, (f"DOWN: {exc.reason}",), answered=False)
    try:
        status = json.loads(body)
        cluster = status["cluster"]
        state = cluster["status"]
        peers = cluster.get("peers") or []
        version = (status.get("versionInfo") or {}).get("version")
        if not isinstance(state, str) or not isinstance(peers, list):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        return ReplicaHealth("Alertmanager", url, ("its /api/v2/status is not Alertmanager's",))
    problems = []
    if members > 1 and state != "ready":
        problems.append(f"CLUSTER {state}: not yet one cluster with the other members")
    if members > 1 and len(peers) < members:
        problems.append(f"SPLIT: sees {len(peers)} of {members} members")
    return ReplicaHealth(
        "Alertmanager",
        url,
        tuple(problems),
        cluster_status=state,
        cluster_peers=len(peers),
        version=version if isinstance(version, str) else None,
    )


def read(
    vm: str | Sequence[str],
    alertmanager: str | Sequence[str] = (),
    *,
    access: SiteAccess | None = None,
    now: float | None = None,
    timeout: float = TIMEOUT,
    metrics_key: str | None = None,
) -> list[ReplicaHealth]:
    """Every replica's health, VictoriaMetrics' first, each in the order given; the replicas are
    asked side by side, so a dead one costs one timeout, not one per replica. METRICS_KEY: the
    site's key for a VictoriaMetrics that serves its /metrics only with it (1.79)."""
    access = access or SiteAccess()
    vm_urls, am_urls = split_urls(vm), split_urls(alertmanager)
    at = time.time() if now is None else now
    with ThreadPoolExecutor(max_workers=max(1, 2 * len(vm_urls) + len(am_urls) + 1)) as pool:
        vms = [pool.submit(_victoriametrics, u, access, at, timeout, metrics_key) for u in vm_urls]
        queues = pool.submit(_queues, vm_urls, access, timeout) if len(vm_urls) > 1 else None
        ams = [pool.submit(_alertmanager, u, len(am_urls), access, timeout) for u in am_urls]
        out = [f.result() for f in vms]
        if queues is not None:
            queued, why = queues.result()
            for i, health in enumerate(out):
                mine = queued.get(i, {})
                extra = [
                    f"CATCHING UP: {_size(b)} queued for it on {h}"
                    for h, b in sorted(mine.items())
                    if b >= QUEUE_NOTICE
                ]
                if why and health.answered:
                    extra.append(f"queues not read: {why}")
                out[i] = dataclasses.replace(
                    health,
                    queued_bytes={h: b for h, b in mine.items() if b},
                    problems=health.problems + tuple(extra),
                )
        out += [f.result() for f in ams]
    return out
