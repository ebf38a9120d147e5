"""A guarded Redfish HTTP client: one per target, used by one worker at a time.

A BMC is a device on the management network, not a trusted peer. The client therefore

1. only ever fetches paths under ``/redfish/`` on the target's own origin (scheme, host, port):
   an ``@odata.id`` that names another origin is refused, and redirects are not followed;
2. refuses a body over ``max_body`` bytes (by Content-Length before reading, or while reading),
   JSON nested deeper than ``max_depth``, and JSON that is not an object;
3. holds every request to the target's deadline: the socket's timeout is the time left, and a
   watchdog shuts the socket down at the deadline, so a BMC that trickles bytes (slow loris)
   cannot hold the worker past it;
4. logs in with a Redfish session (POST to the SessionService, then ``X-Auth-Token``; a 401 logs in
   again, once) or sends HTTP Basic, and never puts a credential or token in a message.
"""

from __future__ import annotations

import base64
import contextlib
import heapq
import http.client
import itertools
import json
import socket
import ssl
import threading
import time
from typing import Any, Callable
from urllib.parse import urlsplit

from vigil.exporters.redfish.config import Target

#: bytes of one response body at most (a Sensors collection expanded on a big chassis is ~300 KB)
MAX_BODY = 4 * 1024 * 1024
#: JSON nesting at most (Redfish resources are under 10 deep)
MAX_DEPTH = 32
#: the longest link accepted
MAX_LINK = 1024
SERVICE_ROOT = "/redfish/v1/"
DEFAULT_SESSIONS = "/redfish/v1/SessionService/Sessions"


class FetchError(Exception):
    """A request that failed; the message is one line without credentials."""


class TargetError(FetchError):
    """The target as a whole cannot be read now (connection, TLS, timeout, authentication)."""


class ResourceError(FetchError):
    """One resource cannot be used (not found, too big, too deep, not JSON, off-origin link)."""


class NotFound(ResourceError):
    pass


class Watchdog:
    """One thread that shuts down sockets whose deadline has passed."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, deadline: float, kill: Callable[[], None]) -> int:
        with self._cv:
            token = next(self._ids)
            heapq.heappush(self._heap, (deadline, token, kill))
            self._live.add(token)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="redfish-watchdog", daemon=True)
                self._thread.start()
            self._cv.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._cv:
            self._live.discard(token)

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                deadline, token, kill = self._heap[0]
                now = time.monotonic()
                if now < deadline:
                    self._cv.wait(deadline - now)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(token)
            with contextlib.suppress(Exception):  # a socket already gone is what we wanted
                kill()


WATCHDOG = Watchdog()


def json_depth(doc: object) -> int:
    """The nesting depth of a parsed JSON value (iterative: a hostile document cannot recurse us)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in value)
    return deepest


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes, what: str, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    try:
        doc = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
    except RecursionError:
        raise ResourceError(f"{what}: JSON nested deeper than {max_depth}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ResourceError(f"{what}: not JSON ({str(e)[:80]})") from None
    if not isinstance(doc, dict):
        raise ResourceError(f"{what}: a JSON {type(doc).__name__}, not an object")
    if json_depth(doc) > max_depth:
        raise ResourceError(f"{what}: JSON nested deeper than {max_depth}")
    return doc


def resolve(origin: tuple[str, str, int], link: object) -> str:
    """The request path for LINK (an ``@odata.id``), or ResourceError when it leaves ORIGIN or /redfish/."""
    if not isinstance(link, str) or not link or len(link) > MAX_LINK:
        raise ResourceError(f"link {str(link)[:80]!r}: not a usable @odata.id")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in link):
        raise ResourceError(f"link {link[:80]!r}: control character or space")
    try:
        parts = urlsplit(link)
        port = parts.port
    except ValueError:
        raise ResourceError(f"link {link[:80]!r}: not a URL") from None
    if parts.scheme or parts.netloc:
        scheme = parts.scheme or origin[0]
        there = (scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80))
        if there != origin:
            raise ResourceError(f"link {link[:80]!r}: leaves the target's origin; refused")
    path = parts.path
    if not path.startswith("/redfish/") or "/../" in path + "/" or "/./" in path + "/" or "//" in path:
        raise ResourceError(f"link {link[:80]!r}: not a path under /redfish/; refused")
    return path


def normalize(path: str) -> str:
    """A resource path as a dictionary key: no fragment, no trailing slash."""
    return path.split("#", 1)[0].rstrip("/") or "/"


class Client:
    """Requests to one target, within a deadline set by :meth:`start`."""

    def __init__(
        self,
        target: Target,
        *,
        max_body: int = MAX_BODY,
        max_depth: int = MAX_DEPTH,
        watchdog: Watchdog = WATCHDOG,
    ) -> None:
        self.target = target
        self.max_body = max_body
        self.max_depth = max_depth
        self.sessions_path = DEFAULT_SESSIONS
        self.requests = 0
        self._watchdog = watchdog
        self._token: str | None = None
        self._conn: http.client.HTTPConnection | None = None
        self._deadline = 0.0
        self._ssl: ssl.SSLContext | None = None
        if target.origin[0] == "https":
            if target.insecure:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            else:
                ctx = ssl.create_default_context(cafile=target.ca_file)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            self._ssl = ctx

    # 1. the connection, held to the deadline

    def start(self, deadline: float) -> None:
        self._deadline = deadline

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TargetError(f"timed out after {self.target.timeout:g}s")
        return left

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            _, host, port = self.target.origin
            if self._ssl is not None:
                self._conn = http.client.HTTPSConnection(host, port, timeout=self._left(), context=self._ssl)
            else:
                self._conn = http.client.HTTPConnection(host, port, timeout=self._left())
        return self._conn

    def _kill(self, conn: http.client.HTTPConnection) -> Callable[[], None]:
        def kill() -> None:
            sock = conn.sock
            if sock is not None:
                # the socket layer's shutdown, under TLS too: the blocked read returns at once
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

        return kill

    def _exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        what = f"{method} {path}"
        conn = self._connection()
        token = self._watchdog.arm(self._deadline, self._kill(conn))
        try:
            left = self._left()
            conn.timeout = left
            if conn.sock is not None:
                conn.sock.settimeout(left)
            self.requests += 1
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            length = resp.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) > self.max_body:
                raise ResourceError(f"{what}: body of {length} bytes is over the {self.max_body}-byte cap")
            chunks: list[bytes] = []
            got = 0
            while True:
                self._left()
                chunk = resp.read(min(65536, self.max_body + 1 - got))
                if not chunk:
                    break
                got += len(chunk)
                if got > self.max_body:
                    raise ResourceError(f"{what}: body over the {self.max_body}-byte cap")
                chunks.append(chunk)
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close:
                self.close()
            return resp.status, hdrs, b"".join(chunks)
        except ResourceError:
            self.close()
            raise
        except (OSError, http.client.HTTPException, ValueError) as e:
            self.close()
            if time.monotonic() >= self._deadline:
                raise TargetError(f"{what}: timed out after {self.target.timeout:g}s") from None
            if isinstance(e, ssl.SSLError):
                raise TargetError(f"{what}: TLS: {e.reason or e}") from None
            raise TargetError(f"{what}: {type(e).__name__}: {str(e)[:120]}") from None
        finally:
            self._watchdog.disarm(token)

    # 2. authentication

    def _auth_headers(self) -> dict[str, str]:
        creds = self.target.credentials
        if creds is None:
            return {}
        if self.target.auth == "basic":
            raw = f"{creds.user}:{creds.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode("ascii")}
        if self._token:
            return {"X-Auth-Token": self._token}
        return {}

    def login(self) -> None:
        creds = self.target.credentials
        if creds is None or self.target.auth != "session":
            return
        body = json.dumps({"UserName": creds.user, "Password": creds.password}).encode()
        status, hdrs, _ = self._exchange(
            "POST",
            self.sessions_path,
            body,
            {"Content-Type": "application/json", "Accept": "application/json", "OData-Version": "4.0"},
        )
        token = hdrs.get("x-auth-token", "")
        if status in (200, 201) and token and len(token) <= 4096 and token.isprintable():
            self._token = token
            return
        if status in (401, 403):
            raise TargetError(f"login as {creds.user!r} refused (HTTP {status})")
        raise TargetError(f"login: HTTP {status} without a usable X-Auth-Token")

    # 3. GET a resource

    def get(self, link: object, *, query: str = "") -> dict[str, Any]:
        """The JSON object at LINK (an ``@odata.id`` on this target); raises FetchError."""
        path = resolve(self.target.origin, link)
        what = f"GET {path}"
        needs_auth = normalize(path) != normalize(SERVICE_ROOT)
        if needs_auth and self.target.auth == "session" and self._token is None:
            self.login()
        target = path + ("?" + query if query else "")
        headers = {"Accept": "application/json", "OData-Version": "4.0", **self._auth_headers()}
        status, _, body = self._exchange("GET", target, None, headers)
        if status == 401 and self.target.auth == "session" and self.target.credentials is not None:
            self._token = None  # expired or dropped by the BMC: log in again, once
            self.login()
            headers = {"Accept": "application/json", "OData-Version": "4.0", **self._auth_headers()}
            status, _, body = self._exchange("GET", target, None, headers)
        if status == 404:
            raise NotFound(f"{what}: not found")
        if status in (401, 403):
            raise TargetError(f"{what}: HTTP {status} (check the credentials)")
        if 300 <= status < 400:
            raise ResourceError(f"{what}: redirect (HTTP {status}) not followed")
        if status != 200:
            raise TargetError(f"{what}: HTTP {status}")
        return parse_json(body, what, self.max_depth)
