"""A small VictoriaMetrics client: instant and range queries, and raw samples (``/api/v1/export``).

Every call passes ``nocache=1`` so a report never reads a response VictoriaMetrics cached before
the data was complete. Requests go as the site's :class:`~vigil.installer.access.SiteAccess` says:
over TLS checked against the site CA and with the API login on a site deployed with TLS, plain http
otherwise, never through a proxy. Errors name the server and the reason: unreachable, a TLS failure
(a certificate the site CA did not issue, or for another name), an HTTP error with VictoriaMetrics'
own message, or an answer that is not what the API promises.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vigil.basics.bounded import shown
from vigil.installer.access import SiteAccess, failure_reason
from vigil.installer.reports.errors import ReportError, ReportInputError

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
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ReportInputError(f"--vm {url}", "not an http:// or https:// URL")
    if parts.query or parts.fragment:
        raise ReportInputError(f"--vm {url}", "must not have a query or a fragment")
    return url.rstrip("/")


@dataclass
class VictoriaMetrics:
    url: str
    timeout: float = 300.0
    #: the site CA and login; None: plain, no login (system CAs for an https URL)
    access: SiteAccess | None = None
    _opener: urllib.request.OpenerDirector = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.url = check_url(self.url)
        self._opener = (self.access or SiteAccess()).opener()

    @property
    def name(self) -> str:
        return f"VictoriaMetrics {self.url}"

    def _get(self, path: str, params: list[tuple[str, str]]) -> bytes:
        query = urllib.parse.urlencode([*params, ("nocache", "1")])
        # the URL's scheme was checked to be http(s) in check_url
        req = urllib.request.Request(f"{self.url}{path}", data=query.encode(), method="POST")  # noqa: S310
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                body: bytes = resp.read(MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(4096).decode("utf-8", "replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(detail).get("error", detail)
            detail = " ".join(str(detail).split())[:400]
            if exc.code == 401:
                detail = f"{detail or 'Unauthorized'}; {(self.access or SiteAccess()).unauthorized(self.url)}"
            raise ReportError(self.name, f"{path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = failure_reason(exc)
            if reason.startswith("TLS") and self.access is not None and self.access.ca_file:
                reason = f"{reason} (checked against the site CA {self.access.ca_file})"
            prefix = "" if reason.startswith("TLS") else "unreachable: "
            raise ReportError(self.name, f"{prefix}{reason}") from None
        if len(body) > MAX_BODY:
            raise ReportError(self.name, f"{path}: answer larger than {MAX_BODY:,} bytes; refused")
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
