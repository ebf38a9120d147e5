"""Helpers for the audit tests: the tampering hand and the in-process CLI result."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.installer.audit import AuditPaths
from vigil.installer.audit._canonical import canonical, record_hash


def unprotect(*paths: Path) -> None:
    """Drop the append-only attribute the log gets where the file system allows it."""
    chattr = shutil.which("chattr")
    existing = [str(p) for p in paths if p.exists()]
    if chattr and existing:
        subprocess.run([chattr, "-a", *existing], stderr=subprocess.DEVNULL, check=False)


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def first_error(self) -> str:
        return self.err.splitlines()[0] if self.err else ""


class LogFiles:
    """The audit files of a home, as lines a test can rewrite (the tampering hand)."""

    def __init__(self, home: Path) -> None:
        self.paths = AuditPaths.under(home)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.paths.log.read_text().splitlines()]

    def checkpoints(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.paths.checkpoints.read_text().splitlines()]

    def log_lines(self) -> list[str]:
        return self.paths.log.read_text().splitlines(keepends=True)

    def checkpoint_lines(self) -> list[str]:
        return self.paths.checkpoints.read_text().splitlines(keepends=True)

    def write_log(self, lines: list[str]) -> None:
        unprotect(self.paths.log)
        self.paths.log.write_text("".join(lines))

    def write_checkpoints(self, lines: list[str]) -> None:
        unprotect(self.paths.checkpoints)
        self.paths.checkpoints.write_text("".join(lines))

    def write_records(self, records: list[dict[str, Any]]) -> None:
        self.write_log([line(r) for r in records])

    def checkpoint_number(self, count: int) -> int:
        """The 1-based number of the checkpoint over ``count`` records."""
        for n, cp in enumerate(self.checkpoints(), start=1):
            if cp["count"] == count:
                return n
        raise AssertionError(f"no checkpoint over {count} records")


def line(obj: dict[str, Any]) -> str:
    return canonical(obj).decode() + "\n"


def rehash(record: dict[str, Any]) -> dict[str, Any]:
    record = dict(record)
    record["hash"] = record_hash(record)
    return record


def rechain(records: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """Recompute ``prev`` and ``hash`` from index ``start`` on, as someone who knows the format would."""
    out = list(records)
    for i in range(start, len(out)):
        r = dict(out[i])
        if i > 0:
            r["prev"] = out[i - 1]["hash"]
        out[i] = rehash(r)
    return out
