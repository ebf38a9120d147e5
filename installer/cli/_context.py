"""What one ``vigil`` invocation carries from the parser to its handler and the audit log."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Context:
    home: Path
    argv: list[str]
    operator: str | None = None
    verbose: bool = False
    #: dotted action name recorded in the audit log, e.g. "bundle.import"
    action: str = "vigil"
    #: the object the action is about (a bundle path, a key prefix, ...)
    audit_object: str = ""
    #: extra details for the audit record (bundle version, manifest digest, run id, counts)
    audit_details: dict[str, Any] = field(default_factory=dict)
    outcome: str = "failed"
    reason: str = ""
    #: set by commands that must not append to the log they are reading (none today)
    skip_audit: bool = False
