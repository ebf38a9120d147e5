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
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from vigil.installer.access import SiteAccess, failure_reason
from vigil.installer.reports.errors import ReportError, ReportInputError

Labels = dict[str, str]
#: the most bytes one answer may have (a year of raw samples of one meter at 15 s is ~60 MB)
MAX_BODY = 1 << 30


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
            raise ReportError(self.name, f"{path}: answer larger than {MAX_BODY} bytes")
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

    def query(self, expr: str, at: int) -> list[tuple[Labels, float]]:
        """An instant query at ``at``: each series' labels and value (NaN values left out)."""
        data = self._data("/api/v1/query", [("query", expr), ("time", str(at))])
        out = []
        for item in data.get("result", []):
            value = _number(item["value"][1], self.name)
            if math.isfinite(value):
                out.append((dict(item.get("metric", {})), value))
        return out

    def query_range(
        self, expr: str, start: int, end: int, step: int
    ) -> list[tuple[Labels, list[tuple[int, float]]]]:
        data = self._data(
            "/api/v1/query_range",
            [("query", expr), ("start", str(start)), ("end", str(end)), ("step", f"{step}s")],
        )
        return [
            (
                dict(item.get("metric", {})),
                [(int(t), _number(v, self.name)) for t, v in item.get("values", [])],
            )
            for item in data.get("result", [])
        ]

    def export(self, selector: str, start: int, end: int) -> list[tuple[Labels, list[tuple[float, float]]]]:
        """Raw samples of every series ``selector`` matches in ``[start, end]``, in time order."""
        body = self._get("/api/v1/export", [("match[]", selector), ("start", str(start)), ("end", str(end))])
        out = []
        for n, line in enumerate(body.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                labels = dict(item["metric"])
                pairs = sorted(zip(item["timestamps"], item["values"], strict=True))
                samples = [(t / 1000.0, float(v)) for t, v in pairs if v is not None]
            except (ValueError, KeyError, TypeError):
                raise ReportError(self.name, f"/api/v1/export: line {n} is not a series") from None
            out.append((labels, samples))
        return out


def _number(text: Any, where: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ReportError(where, f"not a number in an answer: {str(text)[:40]!r}") from None
