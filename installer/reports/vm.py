"""A small VictoriaMetrics client: instant and range queries, and raw samples (``/api/v1/export``).

Every call passes ``nocache=1`` so a report never reads a response VictoriaMetrics cached before
the data was complete. The transport is :class:`vigil.installer.stack.Replicas`: the replicas of
VictoriaMetrics in order, the first that answers read (a dead or failing one passed over, a bad
query not asked twice), over TLS checked against the site CA and with the API login on a site
deployed with TLS, plain http otherwise, never through a proxy. Errors name the server and the
reason: unreachable, a TLS failure (a certificate the site CA did not issue, or for another name),
an HTTP error with VictoriaMetrics' own message, an answer over the caps, or an answer that is not
what the API promises; with several replicas and none answering, each one's reason.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from vigil.basics.bounded import shown
from vigil.installer.access import SiteAccess
from vigil.installer.reports.errors import ReportError, ReportInputError
from vigil.installer.stack import Failure, ReadFailed, Replicas, StackError, TooLarge
from vigil.installer.stack import check_url as _check_url

Labels = dict[str, str]
#: the most bytes one answer may have. A year's job count of 300,000 jobs (VictoriaMetrics' default
#: -search.maxUniqueTimeseries) is about 30 MB; a month of one meter's raw samples at 15 s about 5 MB.
MAX_BODY = 64 << 20
#: the most values one answer may hold, counted on its bytes before it is parsed (:func:`_values`).
#: Memory goes with values, not bytes: 60 MB of ``[1,"1"],`` parsed and read took 1.5 GB. The worst
#: answers just under both caps peaked at about 530 MB (raw samples) and 490 MB (range points, labels)
#: in the whole process. A year's job count is 17 values a job (5.1 M at 300,000 jobs).
MAX_VALUES = 6_000_000


def check_url(url: str) -> str:
    """``url`` without a trailing slash; only http(s) with a host is accepted."""
    try:
        return _check_url(url, "--vm")
    except StackError as exc:
        raise ReportInputError(exc.obj, exc.reason) from None


class VictoriaMetrics:
    """The reports' VictoriaMetrics: URL is one base URL, a comma-separated list or several, the
    replicas in the order to try them."""

    def __init__(
        self, url: str | Iterable[str], timeout: float = 300.0, access: SiteAccess | None = None
    ) -> None:
        urls = [check_url(u) for u in (url.split(",") if isinstance(url, str) else url) if u.strip()]
        if not urls:
            raise ReportInputError("--vm", "no URL given")
        self.timeout = timeout
        #: the site CA and login; None: plain, no login (system CAs for an https URL)
        self.access = access
        self._replicas = Replicas(
            urls, service="VictoriaMetrics", access=access, timeout=timeout, max_bytes=MAX_BODY, what="--vm"
        )
        #: the replicas that answered a query, in the order they first did
        self.answered: dict[str, None] = {}
        self._last: str | None = None

    @property
    def urls(self) -> tuple[str, ...]:
        return self._replicas.urls

    @property
    def url(self) -> str:
        """The replica that answered last (the one read from now), or the one a read starts at."""
        return self._last or self._replicas.first

    @property
    def source(self) -> str:
        """What the report was read from: each replica that answered, comma-separated (one URL for
        a single VictoriaMetrics, as before)."""
        return ", ".join(self.answered) or ", ".join(self.urls)

    @property
    def name(self) -> str:
        return f"VictoriaMetrics {self.url}"

    def __repr__(self) -> str:
        return f"VictoriaMetrics({', '.join(self.urls)}, timeout={self.timeout:g})"

    def _why(self, failure: Failure, path: str) -> str:
        """One replica's failure as the reports say it."""
        if failure.status is not None:
            detail = failure.detail.decode("utf-8", "replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(detail).get("error", detail)
            detail = " ".join(str(detail).split())[:400]
            if failure.status == 401:
                why = (self.access or SiteAccess()).unauthorized(failure.replica)
                detail = f"{detail or 'Unauthorized'}; {why}"
            return f"{path}: HTTP {failure.status}: {detail}"
        reason = failure.reason
        if failure.tls and self.access is not None and self.access.ca_file:
            reason = f"{reason} (checked against the site CA {self.access.ca_file})"
        return reason if failure.tls else f"unreachable: {reason}"

    def _get(self, path: str, params: list[tuple[str, str]]) -> bytes:
        try:
            answer = self._replicas.get(path, [*params, ("nocache", "1")], form=True)
        except ReadFailed as exc:
            if len(exc.failures) == 1:
                (failure,) = exc.failures
                raise ReportError(f"VictoriaMetrics {failure.replica}", self._why(failure, path)) from None
            reasons = "; ".join(f"{f.replica}: {self._why(f, path)}" for f in exc.failures)
            raise ReportError(
                f"VictoriaMetrics {', '.join(self.urls)}", f"no replica answered: {reasons}"
            ) from None
        except TooLarge as exc:
            self._last = exc.replica
            raise ReportError(self.name, f"{path}: answer larger than {MAX_BODY:,} bytes; refused") from None
        self._last = answer.replica
        self.answered[answer.replica] = None
        body = answer.body
        if _values(body) > MAX_VALUES:
            raise ReportError(
                self.name,
                f"{path}: answer holds more than {MAX_VALUES:,} values "
                "(counted before reading them); refused",
            )
        return body

    def _data(self, path: str, params: list[tuple[str, str]]) -> Any:
        body = self._get(path, params)
        try:
            doc = json.loads(body)
        except ValueError:
            raise ReportError(self.name, f"{path}: answer is not JSON") from None
        if (
            not isinstance(doc, dict)
            or doc.get("status") != "success"
            or not isinstance(doc.get("data"), dict)
        ):
            raise ReportError(self.name, f"{path}: unexpected answer {str(doc)[:200]}")
        return doc["data"]

    def _results(self, path: str, data: Any) -> Iterator[tuple[int, Labels, Any]]:
        """Each series of a query's ``result``: its number, checked labels, and the item itself."""
        result = data.get("result", [])
        if not isinstance(result, list):
            raise ReportError(self.name, f"{path}: result is not a list")
        for n, item in enumerate(result, 1):
            if not isinstance(item, dict):
                raise ReportError(self.name, f"{path}: result {n} is not a series")
            yield n, _labels(item.get("metric", {}), f"{path}: result {n}", self.name), item

    def query(self, expr: str, at: int) -> list[tuple[Labels, float]]:
        """An instant query at ``at``: each series' labels and value (NaN values left out)."""
        path = "/api/v1/query"
        data = self._data(path, [("query", expr), ("time", str(at))])
        out = []
        for n, labels, item in self._results(path, data):
            try:
                value = _number(item["value"][1], self.name)
            except (KeyError, IndexError, TypeError):
                raise ReportError(self.name, f"{path}: result {n} has no value") from None
            if math.isfinite(value):
                out.append((labels, value))
        return out

    def query_range(
        self, expr: str, start: int, end: int, step: int
    ) -> list[tuple[Labels, list[tuple[int, float]]]]:
        path = "/api/v1/query_range"
        data = self._data(
            path, [("query", expr), ("start", str(start)), ("end", str(end)), ("step", f"{step}s")]
        )
        out = []
        for n, labels, item in self._results(path, data):
            try:
                points = [(int(t), _number(v, self.name)) for t, v in item.get("values", [])]
            except (ValueError, TypeError):
                raise ReportError(self.name, f"{path}: result {n} has values that are not points") from None
            out.append((labels, points))
        return out

    def export(self, selector: str, start: int, end: int) -> list[tuple[Labels, list[tuple[float, float]]]]:
        """Raw samples of every series ``selector`` matches in ``[start, end]``, in time order."""
        body = self._get("/api/v1/export", [("match[]", selector), ("start", str(start)), ("end", str(end))])
        out = []
        for n, line in enumerate(body.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                labels = _labels(item["metric"], f"/api/v1/export: line {n}", self.name)
                times, values = item["timestamps"], item["values"]
                pairs: Iterator[tuple[Any, Any]] = zip(times, values, strict=True)
                if any(a > b for a, b in itertools.pairwise(times)):
                    pairs = iter(sorted(pairs))  # VictoriaMetrics sends them in order: no copy then
                samples = [(t / 1000.0, float(v)) for t, v in pairs if v is not None]
                del item, times, values
            except (ValueError, KeyError, TypeError):
                raise ReportError(self.name, f"/api/v1/export: line {n} is not a series") from None
            out.append((labels, samples))
        return out


def _values(body: bytes) -> int:
    """At least as many as the JSON values and keys ``body`` holds, counted on its bytes: a value is
    a container (opened by a bracket), a string (two quotes), or follows a comma or is first in its
    container (counted by the bracket). Brackets, quotes and commas inside strings count too."""
    return body.count(b",") + body.count(b"[") + body.count(b"{") + body.count(b'"') // 2


def _labels(metric: Any, what: str, where: str) -> Labels:
    """A series' labels: names and values that are text. A lone surrogate (``"\\ud800"`` in the JSON)
    is not: VictoriaMetrics stores labels as UTF-8, so only something else answering in its place
    writes one. It is refused rather than replaced by U+FFFD, which would merge two accounts that
    differ in it and print a name no one has."""
    if not isinstance(metric, dict):
        raise ReportError(where, f"{what}: its labels are not a mapping")
    for name, value in metric.items():
        if not isinstance(value, str):
            raise ReportError(where, f"{what}: label {shown(name)} is not text")
        for text in (name, value):
            if not text.isascii():
                try:
                    text.encode()
                except UnicodeEncodeError:
                    raise ReportError(
                        where,
                        f"{what}: label {shown(name)} is not valid Unicode (a lone surrogate), which "
                        "VictoriaMetrics does not store; refused",
                    ) from None
    return metric


def _number(text: Any, where: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ReportError(where, f"not a number in an answer: {str(text)[:40]!r}") from None
