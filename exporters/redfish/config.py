"""The exporter's configuration: a list of BMC/PDU targets, from JSON or a strict subset of YAML.

The YAML accepted is the shape the docs show and nothing more (no third-party parser on the nodes)::

    targets:
      - name: node01                      # the target="node01" label
        url: https://bmc-node01.example   # base URL; the service root is <url>/redfish/v1
        credentials_file: /etc/vigil/redfish/node01.cred
        ca_file: /etc/vigil/pki/bmc-ca.pem
        insecure: false
        auth: session                     # optional: session (default) or basic
        timeout: 10                       # optional: seconds for this target's whole scrape

A file whose first significant character is ``{`` is read as JSON with the same shape. Anything else
(tabs, flow collections, anchors, tags, multi-line scalars, unknown keys, duplicate keys or names)
is refused with a :class:`ConfigError` naming the file, the line and the reason.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

DEFAULT_TIMEOUT = 10.0
#: a credentials file is one short line; anything bigger is not one
MAX_CREDENTIALS_BYTES = 4096
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: JSON nesting at most: the shape is {"targets": [{...}]}, 3 deep
MAX_JSON_DEPTH = 8

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TARGET_KEYS = ("name", "url", "credentials_file", "ca_file", "insecure", "auth", "timeout")
AUTH_MODES = ("session", "basic")


class ConfigError(Exception):
    """A configuration or credentials file that cannot be used; the message is one line:
    ``<file>[:<line>]: <reason>``."""


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str = field(repr=False)

    def __repr__(self) -> str:  # never shows the password, even in a traceback
        return f"Credentials(user={self.user!r}, password=<hidden>)"


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    #: (scheme, host, port): every link the exporter follows must stay on it
    origin: tuple[str, str, int]
    credentials: Credentials | None = field(default=None, repr=False)
    credentials_file: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    auth: str = "session"
    timeout: float = DEFAULT_TIMEOUT


# --- the YAML subset -----------------------------------------------------------------------------


def _strip_comment(text: str, where: str) -> str:
    """TEXT without a trailing ``# comment`` (a ``#`` at the start or after a space, outside quotes)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                continue
        elif ch in "\"'" and (i == 0 or text[i - 1] in " :-"):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    if quote:
        raise ConfigError(f"{where}: unterminated quoted string")
    return text.rstrip()


def _scalar(raw: str, where: str) -> object:
    """A scalar: a quoted string, true/false, a number, null/~ (as None) or a plain string."""
    if not raw:
        raise ConfigError(f"{where}: missing value (nested mappings and block scalars are not supported)")
    if raw[0] == '"':
        if len(raw) < 2 or raw[-1] != '"':
            raise ConfigError(f"{where}: text after the closing quote")
        try:
            value = json.loads(raw)  # YAML's double-quoted escapes are a superset of JSON's common ones
        except ValueError:
            raise ConfigError(f"{where}: bad double-quoted string") from None
        if not isinstance(value, str):
            raise ConfigError(f"{where}: bad double-quoted string")
        return value
    if raw[0] == "'":
        body = raw[1:-1] if len(raw) >= 2 and raw[-1] == "'" else None
        if body is None or re.search(r"(?<!')'(?!')", body):
            raise ConfigError(f"{where}: text after the closing quote")
        return body.replace("''", "'")
    if raw[0] in "[{&*!|>%@`":
        raise ConfigError(
            f"{where}: {raw[0]!r} (flow collections, anchors, tags, block scalars) not supported"
        )
    if raw in ("true", "false"):
        return raw == "true"
    if raw in ("null", "~"):
        return None
    if re.fullmatch(r"[-+]?[0-9]+(\.[0-9]+)?", raw):
        return float(raw) if "." in raw else int(raw)
    if ": " in raw or raw.endswith(":"):
        raise ConfigError(f"{where}: nested mappings are not supported")
    return raw


def _key_value(text: str, where: str) -> tuple[str, object]:
    key, sep, rest = text.partition(":")
    if not sep or (rest and not rest.startswith(" ")):
        raise ConfigError(f"{where}: expected `key: value`")
    key = key.strip()
    if not _KEY.match(key):
        raise ConfigError(f"{where}: bad key {key!r}")
    return key, _scalar(rest.strip(), where)


def parse_yaml(text: str, path: str) -> list[tuple[int, dict[str, object]]]:
    """The targets list of the YAML subset, as (line of the item, {key: scalar}); raises ConfigError."""
    targets: list[tuple[int, dict[str, object]]] = []
    seen_targets = False
    current: dict[str, object] | None = None
    item_indent = key_indent = -1
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{n}"
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise ConfigError(f"{where}: tab in indentation")
        body = _strip_comment(line, where)
        if not body.strip():
            continue
        if n == 1 and body == "---":
            continue
        indent = len(body) - len(body.lstrip(" "))
        content = body.strip()
        if content in ("---", "..."):
            raise ConfigError(f"{where}: more than one YAML document")
        if indent == 0 and not (seen_targets and (content.startswith("- ") or content == "-")):
            key, sep, rest = content.partition(":")
            if not sep or key.strip() != "targets":
                raise ConfigError(f"{where}: expected `targets:` (the only top-level key)")
            if seen_targets:
                raise ConfigError(f"{where}: duplicate key 'targets'")
            seen_targets = True
            if rest.strip() not in ("", "[]"):
                raise ConfigError(f"{where}: `targets:` takes a list of mappings on the lines below")
            continue
        if not seen_targets:
            raise ConfigError(f"{where}: indented line before `targets:`")
        if content.startswith("- ") or content == "-":
            if item_indent == -1:
                item_indent = indent
            if indent != item_indent:
                raise ConfigError(f"{where}: list item indented {indent}, expected {item_indent}")
            rest = content[1:].lstrip(" ")
            if not rest:
                raise ConfigError(f"{where}: an empty list item (each target is a mapping)")
            if rest[0] in "[{&*!|>%@`\"'":
                raise ConfigError(f"{where}: {rest[0]!r} (flow collections, anchors, tags) not supported")
            current = {}
            targets.append((n, current))
            key_indent = indent + (len(content) - len(rest))
            key, value = _key_value(rest, where)
            current[key] = value
            continue
        if current is None or indent != key_indent:
            raise ConfigError(f"{where}: unexpected indentation (expected a `- name: ...` item or a key)")
        key, value = _key_value(content, where)
        if key in current:
            raise ConfigError(f"{where}: duplicate key {key!r}")
        current[key] = value
    if not seen_targets:
        raise ConfigError(f"{path}: no `targets:` list")
    return targets


# --- validation -----------------------------------------------------------------------------------


def read_credentials(path: str) -> Credentials:
    """The one ``user:password`` line of PATH. Refused unless PATH is a regular file (not a symlink)
    owned by this user or root with mode 0600 or 0400 — a secret others can read is no secret."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it below
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if os.path.islink(path):
            raise ConfigError(f"{path}: is a symbolic link; name the file itself") from None
        raise ConfigError(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)  # of the file opened, not of a name that may have changed since
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if mode not in (0o600, 0o400):
            raise ConfigError(f"{path}: mode {mode:04o}, must be 0600 or 0400 (chmod 600 {path})")
        if st.st_uid not in (os.geteuid(), 0):
            raise ConfigError(f"{path}: owned by uid {st.st_uid}, must be this user ({os.geteuid()}) or root")
        data = os.read(fd, MAX_CREDENTIALS_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_CREDENTIALS_BYTES:
        raise ConfigError(
            f"{path}: larger than {MAX_CREDENTIALS_BYTES} bytes; expected one line user:password"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise ConfigError(f"{path}: expected exactly one line user:password, found {len(lines)}")
    user, sep, password = lines[0].rstrip("\r").partition(":")
    if not sep or not user or not password:
        raise ConfigError(f"{path}: expected one line user:password")
    return Credentials(user, password)


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (parts.scheme, (parts.hostname or "").lower(), port)


def _target(raw: dict[str, object], where: str, base_dir: str) -> Target:
    for key in raw:
        if key not in TARGET_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(TARGET_KEYS)})")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: `name` must be letters, digits, `_.:-` (got {name!r})")
    url = raw.get("url")
    if not isinstance(url, str):
        raise ConfigError(f"{where}: target {name}: `url` is required (https://host[:port])")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises for a bad port)
    except ValueError as e:
        raise ConfigError(f"{where}: target {name}: bad url {url!r}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: target {name}: url must be https://host[:port], not {url!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(
            f"{where}: target {name}: url is the BMC's base (https://host[:port]); no path, "
            "query or user info (credentials go in credentials_file)"
        )
    insecure = raw.get("insecure", False)
    if not isinstance(insecure, bool):
        raise ConfigError(f"{where}: target {name}: `insecure` must be true or false")
    if parts.scheme == "http" and not insecure:
        raise ConfigError(f"{where}: target {name}: plain http needs `insecure: true` (lab only)")
    auth = raw.get("auth", "session")
    if auth not in AUTH_MODES:
        raise ConfigError(f"{where}: target {name}: `auth` must be one of {', '.join(AUTH_MODES)}")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
        raise ConfigError(f"{where}: target {name}: `timeout` must be seconds in (0, 300]")
    creds_file = raw.get("credentials_file")
    creds: Credentials | None = None
    if creds_file is not None:
        if not isinstance(creds_file, str) or not creds_file:
            raise ConfigError(f"{where}: target {name}: `credentials_file` must be a path")
        creds_file = os.path.join(base_dir, creds_file)
        creds = read_credentials(creds_file)
    ca_file = raw.get("ca_file")
    if ca_file is not None:
        if not isinstance(ca_file, str) or not ca_file:
            raise ConfigError(f"{where}: target {name}: `ca_file` must be a path")
        ca_file = os.path.join(base_dir, ca_file)
        if not os.path.isfile(ca_file):
            raise ConfigError(f"{ca_file}: no such file (ca_file of target {name})")
    return Target(
        name=name,
        url=f"{parts.scheme}://{parts.netloc}",
        origin=_origin(url),
        credentials=creds,
        credentials_file=creds_file,
        ca_file=ca_file,
        insecure=insecure,
        auth=str(auth),
        timeout=float(timeout),
    )


def _json_depth(doc: object) -> int:
    """The nesting depth of a parsed JSON value, measured without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def parse_config(text: str, path: str) -> list[Target]:
    """The targets of a configuration file's TEXT (PATH names it in messages)."""
    base_dir = os.path.dirname(os.path.abspath(path))
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except RecursionError:
            raise ConfigError(f"{path}: JSON nested deeper than {MAX_JSON_DEPTH}") from None
        except ValueError as e:
            raise ConfigError(f"{path}: not valid JSON: {e}") from None
        if _json_depth(doc) > MAX_JSON_DEPTH:
            raise ConfigError(f"{path}: JSON nested deeper than {MAX_JSON_DEPTH}")
        if not isinstance(doc, dict) or set(doc) != {"targets"} or not isinstance(doc["targets"], list):
            raise ConfigError(f'{path}: expected {{"targets": [...]}} and nothing else')
        items: list[Any] = doc["targets"]
        wheres = [f"{path}: targets[{i}]" for i in range(len(items))]
    else:
        parsed = parse_yaml(text, path)
        items = [raw for _, raw in parsed]
        wheres = [f"{path}:{n}" for n, _ in parsed]
    targets: list[Target] = []
    names: set[str] = set()
    for raw, where in zip(items, wheres):
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: each target is a mapping")
        t = _target(raw, where, base_dir)
        if t.name in names:
            raise ConfigError(f"{where}: duplicate target name {t.name!r}")
        names.add(t.name)
        targets.append(t)
    return targets


def load_config(path: str) -> list[Target]:
    """The targets in the file at PATH, a regular file; raises ConfigError (one line) for anything
    wrong with it."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path}: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 (byte {e.start})") from None
    return parse_config(text, path)
