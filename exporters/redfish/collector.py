"""One scrape of every target at once: a bounded worker pool, each target held to its own timeout.

Each target is read by one worker: the resource tree is walked when the target is first seen, every
``rewalk_interval`` seconds after that, and again after a resource of it disappears; between walks a
scrape fetches only the resources that carry readings (a collection in one request when the BMC
can ``$expand``). The scrape waits for each target until that target's deadline and no longer: a
dead, slow or hostile BMC gives ``redfish_up{target} 0``, one more ``redfish_scrape_errors_total``
and a log line when its state changes, while the other targets' samples come as usual. So does a
target whose samples could not be rendered (a label value that is not valid UTF-8): its samples are
checked on their own, before they join the others'.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Callable

from vigil.exporters._expo import Family, render
from vigil.exporters.redfish.client import MAX_BODY, MAX_DEPTH, Client, FetchError
from vigil.exporters.redfish.config import Target
from vigil.exporters.redfish.readings import FAMILIES, Sample, samples
from vigil.exporters.redfish.walk import Plan, fetch_readings, walk

log = logging.getLogger("vigil.exporters.redfish")

DEFAULT_PORT = 9610
DEFAULT_WORKERS = 64
DEFAULT_REWALK = 3600.0


def _not_utf8(got: list[Sample]) -> str | None:
    """Why GOT, one target's samples, cannot join the exposition text (a label value that UTF-8
    cannot encode would fail the whole answer), or None."""
    for metric, labels, _ in got:
        for name, text in labels:
            if not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{metric}: the {name} label is not valid UTF-8"
    return None


class _State:
    def __init__(self, target: Target, client: Client) -> None:
        self.target = target
        self.client = client
        self.plan: Plan | None = None
        self.walked_at = 0.0
        self.walked_unix = 0.0
        self.busy = threading.Lock()
        self.up: bool | None = None
        self.errors = 0  # failed scrapes
        self.refused = 0  # readings refused


class RedfishCollector:
    """Scrapes TARGETS; :meth:`scrape` renders the exposition text."""

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        workers: int = DEFAULT_WORKERS,
        rewalk_interval: float = DEFAULT_REWALK,
        max_body: int = MAX_BODY,
        max_depth: int = MAX_DEPTH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rewalk_interval = rewalk_interval
        self._clock = clock
        self._states = [_State(t, Client(t, max_body=max_body, max_depth=max_depth)) for t in targets]
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, min(workers, len(targets) or 1)), thread_name_prefix="redfish"
        )
        self._lock = threading.Lock()  # one fan-out at a time; a second /metrics waits for the first
        for t in targets:
            if t.insecure:
                log.warning(
                    "%s: insecure: true: %s",
                    t.name,
                    "plain http" if t.origin[0] == "http" else "TLS certificate not verified",
                )

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def _scrape_one(self, st: _State, start: float) -> tuple[list[Sample], str | None, float]:
        """(samples, error or None, seconds) of one target."""
        deadline = start + st.target.timeout
        if not st.busy.acquire(blocking=False):
            return [], "the previous scrape of it is still running", self._clock() - start
        try:
            if self._clock() >= deadline:
                return [], "not started before its timeout: all workers busy (raise --workers)", 0.0
            st.client.start(deadline)
            try:
                now = self._clock()
                if st.plan is None or now - st.walked_at >= self.rewalk_interval:
                    plan: Plan = walk(st.client)
                    st.plan, st.walked_at, st.walked_unix = plan, now, time.time()
                    log.info(
                        "%s: walked %d resources: %d chassis, %d PDUs%s",
                        st.target.name,
                        plan.resources,
                        len(plan.chassis),
                        len(plan.pdus),
                        f", collections read with {plan.expand}" if plan.expand else "",
                    )
                plan = st.plan
                readings = fetch_readings(st.client, plan)
                if readings.stale:
                    st.plan = None  # a resource is gone: walk again at the next scrape
                got, refused = samples(st.target.name, st.target.origin, plan, readings)
                st.refused += refused
                bad = _not_utf8(got)
                if bad is not None:
                    return [], bad, self._clock() - start
                return got, None, self._clock() - start
            except FetchError as e:
                return [], str(e), self._clock() - start
            finally:
                st.client.close()
        finally:
            st.busy.release()

    def collect(self) -> list[Family]:
        with self._lock:
            start = self._clock()
            futures = [self._pool.submit(self._scrape_one, st, start) for st in self._states]
            longest = max((st.target.timeout for st in self._states), default=0.0)
            wait_futures(futures, timeout=longest + 0.25)
            fams = {name: Family(name, type_, help_) for name, (type_, help_) in FAMILIES.items()}
            for st, fut in zip(self._states, futures):
                labels = (("target", st.target.name),)
                got: list[Sample] = []
                error: str | None = None
                if not fut.done():
                    fut.cancel()
                    error, seconds = f"timed out after {st.target.timeout:g}s", self._clock() - start
                elif fut.exception() is not None:
                    exc = fut.exception()
                    log.error("%s: unexpected error", st.target.name, exc_info=exc)
                    error, seconds = f"{type(exc).__name__}: {exc}", self._clock() - start
                else:
                    got, error, seconds = fut.result()
                up = error is None
                if up != st.up:
                    if up:
                        log.info("%s: up", st.target.name)
                    else:
                        log.warning("%s: down: %s", st.target.name, error)
                elif error is not None:
                    log.debug("%s: still down: %s", st.target.name, error)
                st.up = up
                st.errors += not up
                fams["redfish_up"].add(labels, 1 if up else 0)
                fams["redfish_scrape_duration_seconds"].add(labels, round(seconds, 6))
                fams["redfish_scrape_errors_total"].add(labels, st.errors)
                fams["redfish_readings_refused_total"].add(labels, st.refused)
                if st.walked_unix:
                    fams["redfish_walk_timestamp_seconds"].add(labels, round(st.walked_unix, 3))
                for metric, lbls, value in got:
                    fams[metric].add(lbls, value)
            return list(fams.values())

    def scrape(self) -> str:
        return render(self.collect())
