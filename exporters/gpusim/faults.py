"""Injected faults: a small JSON state file the simulator re-reads at every scrape.

The file (default ``/var/lib/vigil/gpusim/faults.json``) maps a GPU index to its active faults::

    {"format": 1, "gpus": {"0": {"xid": {"code": 79}}, "2": {"thermal": {}}}}

This module uses the standard library only and imports nothing from the package, so it also runs
as a script fed on standard input — that is how ``vigil lab fault`` edits the file on a host that
has no copy of vigil::

    python3 - set xid 0 [--code 79] [--state FILE] < faults.py
    python3 - clear xid 0 [--state FILE] < faults.py
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

DEFAULT_STATE = "/var/lib/vigil/gpusim/faults.json"
FORMAT = 1

#: fault kind -> what it does to the simulated GPU (also the CLI's help)
KINDS: dict[str, str] = {
    "ecc-dbe": "one double-bit ECC error: DBE volatile total +1, a page retired, row remap failure = 1",
    "ecc-sbe-storm": "single-bit ECC errors at --rate per second (default 50), reached over --ramp seconds",
    "xid": "XID error --code (default 79, GPU fallen off the bus) as the last XID",
    "thermal": "temperature ramps up at 1 C/s to 97 C; thermal throttling above 85 C",
    "throttle": "clocks throttled: HW slowdown reason set, SM clock halved",
    "nvlink-crc": "NVLink CRC flit and data errors at --rate per second (default 20)",
    "fb-full": "frame buffer full: FB free near 0 MiB",
    "stuck-idle": "allocated to a job but 0 % utilisation and idle-level power",
}

#: parameters each kind takes, with defaults
PARAMS: dict[str, dict[str, float]] = {
    "ecc-sbe-storm": {"rate": 50.0, "ramp": 0.0},
    "xid": {"code": 79.0},
    "nvlink-crc": {"rate": 20.0},
}


class FaultError(Exception):
    pass


def empty() -> dict[str, Any]:
    return {"format": FORMAT, "gpus": {}}


def parse(text: str) -> dict[str, dict[str, dict[str, float]]]:
    """The active faults, ``{gpu: {kind: params}}``, from the file's text; unknown kinds are dropped."""
    if not text.strip():
        return {}
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("gpus"), dict):
        raise FaultError(f"not a fault state file (format {FORMAT} expected)")
    out: dict[str, dict[str, dict[str, float]]] = {}
    for gpu, kinds in doc["gpus"].items():
        if not isinstance(kinds, dict):
            continue
        active: dict[str, dict[str, float]] = {}
        for kind, params in kinds.items():
            if kind not in KINDS:
                continue
            merged = dict(PARAMS.get(kind, {}))
            if isinstance(params, dict):
                for k, v in params.items():
                    if k in merged and isinstance(v, (int, float)) and not isinstance(v, bool):
                        merged[k] = float(v)
            active[kind] = merged
        if active:
            out[str(gpu)] = active
    return out


def load(path: str) -> dict[str, dict[str, dict[str, float]]]:
    """Active faults from PATH; a missing file means none."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read())
    except FileNotFoundError:
        return {}


def apply(
    doc: dict[str, Any], kind: str, gpu: str, *, clear: bool, params: dict[str, float] | None = None
) -> dict[str, Any]:
    """DOC with KIND set on (or cleared from) GPU. Raises FaultError for an unknown kind or GPU."""
    if kind not in KINDS:
        raise FaultError(f"unknown fault {kind!r} (known: {', '.join(KINDS)})")
    if not gpu.isdigit():
        raise FaultError(f"GPU must be an index (0, 1, ...), not {gpu!r}")
    gpus = doc.setdefault("gpus", {})
    entry = gpus.setdefault(str(int(gpu)), {})
    if clear:
        entry.pop(kind, None)
    else:
        p = dict(PARAMS.get(kind, {}))
        for k, v in (params or {}).items():
            if k not in p:
                raise FaultError(f"fault {kind} takes no parameter {k!r}")
            p[k] = float(v)
        entry[kind] = p
    for g in [g for g, e in gpus.items() if not e]:
        del gpus[g]
    doc["format"] = FORMAT
    return doc


def edit(
    path: str, kind: str, gpu: str, *, clear: bool, params: dict[str, float] | None = None
) -> dict[str, Any]:
    """Set or clear one fault in the state file at PATH, under its lock; returns the new document."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        doc = json.loads(text) if text.strip() else empty()
        parse(json.dumps(doc))  # refuse to rewrite a file that is not ours
        doc = apply(doc, kind, gpu, clear=clear, params=params)
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
    ap = argparse.ArgumentParser(prog="vigil-gpusim fault", description="Set or clear a simulated GPU fault.")
    ap.add_argument("action", choices=("set", "clear", "list"))
    ap.add_argument("kind", nargs="?", choices=sorted(KINDS))
    ap.add_argument("gpu", nargs="?")
    ap.add_argument("--state", default=DEFAULT_STATE, help="fault state file (default: %(default)s)")
    ap.add_argument("--code", type=int, help="XID code for `xid`")
    ap.add_argument("--rate", type=float, help="errors per second for `ecc-sbe-storm`, `nvlink-crc`")
    ap.add_argument("--ramp", type=float, help="seconds `ecc-sbe-storm` takes to grow from 0 to --rate")
    a = ap.parse_args(argv)
    try:
        if a.action == "list":
            print(json.dumps(load(a.state), sort_keys=True))
            return 0
        if a.kind is None or a.gpu is None:
            raise FaultError(f"{a.action} needs a fault kind and a GPU index")
        params: dict[str, float] = {}
        if a.code is not None:
            params["code"] = a.code
        if a.rate is not None:
            params["rate"] = a.rate
        if a.ramp is not None:
            params["ramp"] = a.ramp
        doc = edit(a.state, a.kind, a.gpu, clear=a.action == "clear", params=params or None)
    except (FaultError, ValueError, OSError) as e:
        print(f"FAIL: {a.state}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(doc.get("gpus", {}), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
