"""Injected BMC faults: a small JSON state file the simulator re-reads at every request.

The file (default ``/var/lib/vigil/bmcsim/faults.json``)::

    {"format": 1, "faults": {"bmc-thermal": {}, "bmc-slow": {"delay": 5}}}

This module uses the standard library only and imports nothing from the package, so it also runs as
a script fed on standard input — how ``vigil lab fault`` can edit the file on a host::

    python3 - set bmc-thermal [--state FILE] < faults.py
    python3 - clear bmc-thermal [--state FILE] < faults.py
    python3 - list [--state FILE] < faults.py

Edits are made under an exclusive lock (``FILE.lock``) and written atomically (temp file + rename).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
import tempfile
from typing import Any

DEFAULT_STATE = "/var/lib/vigil/bmcsim/faults.json"
FORMAT = 1

KINDS: dict[str, str] = {
    "bmc-thermal": "inlet 48 C, CPU 96 C, exhaust 60 C; those sensors and the chassis report Health Critical",
    "bmc-down": "the BMC answers nothing: every connection is closed at once",
    "bmc-slow": "every answer waits --delay seconds (default 30), then trickles its body a byte at a time",
}
PARAMS: dict[str, dict[str, float]] = {"bmc-slow": {"delay": 30.0}}


class FaultError(Exception):
    pass


def parse(text: str) -> dict[str, dict[str, float]]:
    """The active faults ``{kind: params}`` from the file's text; unknown kinds are dropped."""
    if not text.strip():
        return {}
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("faults"), dict):
        raise FaultError(f"not a BMC fault state file (format {FORMAT} expected)")
    out: dict[str, dict[str, float]] = {}
    for kind, params in doc["faults"].items():
        if kind not in KINDS:
            continue
        merged = dict(PARAMS.get(kind, {}))
        if isinstance(params, dict):
            for k, v in params.items():
                if k in merged and isinstance(v, (int, float)) and not isinstance(v, bool):
                    merged[k] = float(v)
        out[kind] = merged
    return out


def load(path: str) -> dict[str, dict[str, float]]:
    """Active faults from PATH; a missing, unreadable or malformed file means none."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read())
    except (OSError, ValueError, FaultError):
        return {}


def edit(path: str, kind: str, *, clear: bool, params: dict[str, float] | None = None) -> dict[str, Any]:
    if kind not in KINDS:
        raise FaultError(f"unknown fault {kind!r} (known: {', '.join(KINDS)})")
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        doc: dict[str, Any] = json.loads(text) if text.strip() else {"format": FORMAT, "faults": {}}
        parse(json.dumps(doc))  # refuse to rewrite a file that is not ours
        faults = doc.setdefault("faults", {})
        if clear:
            faults.pop(kind, None)
        else:
            p = dict(PARAMS.get(kind, {}))
            for k, v in (params or {}).items():
                if k not in p:
                    raise FaultError(f"fault {kind} takes no parameter {k!r}")
                p[k] = float(v)
            faults[kind] = p
        fd, tmp = tempfile.mkstemp(prefix=".faults.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, sort_keys=True)
                f.write("\n")
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vigil-bmcsim fault", description="Set or clear a simulated BMC fault.")
    ap.add_argument("action", choices=("set", "clear", "list"))
    ap.add_argument("kind", nargs="?", choices=sorted(KINDS))
    ap.add_argument("--state", default=DEFAULT_STATE, help="fault state file (default: %(default)s)")
    ap.add_argument("--delay", type=float, help="seconds for `bmc-slow`")
    a = ap.parse_args(argv)
    try:
        if a.action == "list":
            print(json.dumps(load(a.state), sort_keys=True))
            return 0
        if a.kind is None:
            raise FaultError(f"{a.action} needs a fault kind")
        params = {"delay": a.delay} if a.delay is not None else None
        doc = edit(a.state, a.kind, clear=a.action == "clear", params=params)
    except (FaultError, ValueError, OSError) as e:
        print(f"FAIL: {a.state}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(doc.get("faults", {}), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
