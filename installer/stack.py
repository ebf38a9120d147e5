"""Reads from the monitoring stack's services (VictoriaMetrics, vmalert, Alertmanager) for every
vigil client of them on the admin host: the reports, the console and the demo. One transport, here.

A service may run on several monitoring hosts, replicas holding the same data. A :class:`Replicas`
is the ordered list of one service's base URLs; a read goes to the first replica that answers
(docs/security.md, "Reads from replicas"):

1. it starts at the replica that answered last in this process, else the first (sticky: a dead
   first replica costs its timeout once, not on every query);
2. a replica that cannot be reached, whose TLS handshake fails, that sends no whole answer within
   the timeout (however slowly it trickles bytes), or that answers HTTP 5xx or 429 is passed over
   for the next;
3. any other answer is the service's: 2xx is returned; another 4xx (a bad query, a refused login)
   is reported as it is and not asked of the next replica, which would answer the same;
4. an answer larger than the cap is refused, not passed over: the replicas hold the same data, so
   the next would send as much, and a replica that floods must be seen, not hidden by a quieter one;
5. when none answered, one line names every replica and its reason.

Requests go as :class:`~vigil.installer.access.SiteAccess` says (the site CA, the API login over
https only), straight to the server (never a proxy from the environment) and redirects are not
followed: a replica answers for itself. What a replica sends is data for the caller to check.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vigil.basics.errors import VigilError
from vigil.installer.access import SiteAccess, failure_reason

#: the most bytes kept of an error answer's body (the server's own message)
ERROR_BYTES = 4096

#: the replica that answered last, per replica list, in this process
_sticky: dict[tuple[str, ...], int] = {}
_sticky_lock = threading.Lock()


class StackError(VigilError):
    """A read from the monitoring stack failed; the front end says why in one line."""


def check_url(url: str, what: str = "URL") -> str:
    """URL without a trailing slash; only http(s) with a host, no query or fragment. WHAT names the
    option it came from in the error."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StackError(f"{what} {url}".strip(), "not an http:// or https:// URL")
    if parts.query or parts.fragment:
        raise StackError(f"{what} {url}".strip(), "must not have a query or a fragment")
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise StackError(f"{what} {url}".strip(), "its port is not a number") from None
    return url.rstrip("/")


def split_urls(given: str | Iterable[str] | None) -> list[str]:
    """Replica URLs as an operator gives them: a comma-separated list, or several (``--vm`` given
    more than once), each possibly comma-separated; blanks dropped, each kept once, in order."""
    if given is None:
        return []
    items = [given] if isinstance(given, str) else list(given)
    out: list[str] = []
    for item in items:
        for url in item.split(","):
            url = url.strip()
            if url and url not in out:
                out.append(url)
    return out


@dataclass(frozen=True)
class Answer:
    """A replica's 2xx answer: which replica, its content type and its body (at most the cap)."""

    replica: str
    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True)
class Failure:
    """Why one replica gave no answer (``status`` None), or the HTTP error it answered."""

    replica: str
    reason: str
    status: int | None = None
    phrase: str = ""
    #: the first :data:`ERROR_BYTES` of an HTTP error's body: the server's message, untrusted
    detail: bytes = b""

    @property
    def tls(self) -> bool:
        return self.status is None and self.reason.startswith("TLS")

    @property
    def passed_over(self) -> bool:
        """Whether the next replica is asked: no answer, a server error or "too many requests"."""
        return self.status is None or self.status >= 500 or self.status == 429


class ReadFailed(StackError):
    """No replica answered (each one's failure in ``failures``, in the order asked), or the one that
    answered refused the request (a 4xx other than 429: one failure)."""

    def __init__(self, service: str, path: str, failures: Sequence[Failure]) -> None:
        self.failures = tuple(failures)
        self.path = path
        reasons = "; ".join(f"{f.replica}: {f.reason}" for f in self.failures)
        what = "no replica answered: " if len(self.failures) > 1 else ""
        super().__init__(service, f"{path}: {what}{reasons}")


class TooLarge(StackError):
    """A replica's answer is larger than the cap; refused, and not asked of another replica."""

    def __init__(self, service: str, replica: str, path: str, limit: int) -> None:
        self.replica, self.path, self.limit = replica, path, limit
        super().__init__(f"{service} {replica}", f"{path}: answer larger than {limit:,} bytes; refused")


class _NoAnswer(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


class Replicas:
    """The replicas of one service, read with failover (the module's steps 1 to 5).

    ``timeout`` bounds each replica's whole request, from connecting to the last byte;
    ``max_bytes`` caps an answer's body. ``service`` names the service in errors
    ("VictoriaMetrics")."""

    def __init__(
        self,
        urls: str | Iterable[str],
        *,
        service: str,
        access: SiteAccess | None = None,
        timeout: float,
        max_bytes: int,
        what: str = "URL",
    ) -> None:
        found = split_urls(urls)
        if not found:
            raise StackError(what or service, "no URL given")
        self.urls: tuple[str, ...] = tuple(check_url(u, what) for u in found)
        self.service = service
        self.access = access or SiteAccess()
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._context: ssl.SSLContext | None = None
        self._login: str | None = None
        if self.access.user and self.access.password:
            token = base64.b64encode(f"{self.access.user}:{self.access.password}".encode()).decode("ascii")
            self._login = f"Basic {token}"

    def __repr__(self) -> str:  # never the login
        return f"Replicas({self.service}, {', '.join(self.urls)})"

    @property
    def first(self) -> str:
        """The replica a read starts at now: the one that answered last in this process."""
        with _sticky_lock:
            return self.urls[_sticky.get(self.urls, 0) % len(self.urls)]

    def get(self, path: str, params: Sequence[tuple[str, str]] = (), *, form: bool = False) -> Answer:
        """GET PATH?PARAMS (POST them as a form with FORM: VictoriaMetrics' long queries) from the
        first replica that answers. Raises :class:`ReadFailed` or :class:`TooLarge`."""
        with _sticky_lock:
            start = _sticky.get(self.urls, 0) % len(self.urls)
        failures: list[Failure] = []
        for i in (*range(start, len(self.urls)), *range(start)):
            replica = self.urls[i]
            try:
                answer = self._once(replica, path, params, form)
            except _NoAnswer as exc:
                failures.append(Failure(replica, exc.reason))
                continue
            if isinstance(answer, Failure) and answer.passed_over:
                failures.append(answer)
                continue
            with _sticky_lock:
                _sticky[self.urls] = i
            if isinstance(answer, Failure):
                raise ReadFailed(self.service, path, [answer])
            return answer
        raise ReadFailed(self.service, path, failures)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = self.access.ssl_context()
        return self._context

    def _once(
        self, replica: str, path: str, params: Sequence[tuple[str, str]], form: bool
    ) -> Answer | Failure:
        """One request to one replica, bounded by the timeout as a whole: a watchdog shuts the
        socket down when it is up, so a server that trickles a byte at a time is cut off too."""
        parts = urllib.parse.urlsplit(replica)
        https = parts.scheme == "https"
        host = parts.hostname or ""
        conn: http.client.HTTPConnection
        if https:
            conn = http.client.HTTPSConnection(
                host, parts.port, timeout=self.timeout, context=self._ssl_context()
            )
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=self.timeout)
        query = urllib.parse.urlencode(list(params))
        target = parts.path + path
        headers = {"Accept": "application/json", "Connection": "close"}
        if https and self._login:  # never in clear
            headers["Authorization"] = self._login
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):  # closed already: nothing to cut off
                    sock.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(self.timeout, expire)
        watchdog.daemon = True
        started = time.monotonic()
        watchdog.start()
        try:
            if form:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                conn.request("POST", target, body=query.encode(), headers=headers)
            else:
                conn.request("GET", f"{target}?{query}" if query else target, headers=headers)
            resp = conn.getresponse()
            if not 200 <= resp.status < 300:
                detail = resp.read(ERROR_BYTES)
                return Failure(
                    replica,
                    f"HTTP {resp.status} {resp.reason}".strip(),
                    status=resp.status,
                    phrase=resp.reason,
                    detail=detail,
                )
            length = resp.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
                raise TooLarge(self.service, replica, path, self.max_bytes)
            body = resp.read(self.max_bytes + 1)
            if len(body) > self.max_bytes:
                raise TooLarge(self.service, replica, path, self.max_bytes)
            if expired.is_set():  # the body was cut off by the watchdog
                raise _NoAnswer(f"no whole answer within {self.timeout:g} s")
            kind = resp.getheader("Content-Type") or ""
            return Answer(replica, resp.status, kind.split(";")[0].strip().lower(), body)
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set() or time.monotonic() - started >= self.timeout:
                raise _NoAnswer(f"no whole answer within {self.timeout:g} s") from None
            raise _NoAnswer(failure_reason(exc)) from None
        finally:
            watchdog.cancel()
            conn.close()


#: what an alert says of the jobs it concerns: a job alert carries them as labels, a GPU alert as
#: annotations vmalert fills in at each evaluation (roles/vmalert/files/rules/vigil-gpu-alerts.yml)
WHO = ("hpc_job", "user", "account")


def alert_who(alert: dict[str, Any]) -> dict[str, str]:
    """{hpc_job, user, account} of an alert as Alertmanager or vmalert serves it: from its labels, else
    from its annotations (a GPU alert's: the jobs on the GPU, several joined by ", "); "" where
    neither says. The values are the service's data, to be shown as plain text."""
    labels, notes = alert.get("labels"), alert.get("annotations")
    labels = labels if isinstance(labels, dict) else {}
    notes = notes if isinstance(notes, dict) else {}
    out = {}
    for key in WHO:
        value = labels.get(key) or notes.get(key) or ""
        out[key] = value if isinstance(value, str) else ""
    return out
