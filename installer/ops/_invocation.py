"""One user action as every front end hands it to the operations layer, and the record it leaves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.basics.errors import VigilError
from vigil.installer.audit.command import record_command


@dataclass(frozen=True)
class Step:
    """A line of progress: what the action is doing now."""

    text: str


@dataclass(frozen=True)
class Bytes:
    """Progress through a byte stream (downloading, hashing, unpacking): ``done`` of ``total`` bytes
    (None while the total is not known, as for a download without a length)."""

    label: str
    done: int
    total: int | None


Event = Step | Bytes
EventSink = Callable[[Event], None]


@dataclass
class Invocation:
    """What one action carries from its front end to the operations and into the audit record.

    A front end fills in who and where (``home``, ``operator``, ``argv``) and how to show progress
    (``on_event``, called on the working thread); the operation fills in ``action``, ``object`` and
    ``details`` as it learns them; :func:`audited` sets the outcome and writes the record.
    """

    home: Path
    #: what the operator asked for: the command line, or the front end's equivalent of one
    argv: list[str] = field(default_factory=list)
    operator: str | None = None
    #: dotted action name recorded in the audit log, e.g. "bundle.import"
    action: str = "vigil"
    #: the object the action is about (a bundle path, a key prefix, an inventory, ...)
    object: str = ""
    #: details for the audit record (bundle version, manifest digest, run id, counts)
    details: dict[str, Any] = field(default_factory=dict)
    #: "ok", "failed" or "refused"; None until the action ends
    outcome: str | None = None
    reason: str = ""
    #: the error the action ended with, if any (kept when writing its record fails as well)
    error: VigilError | None = None
    #: set when nothing happened that needs a record (a --help page)
    skip_audit: bool = False
    on_event: EventSink | None = None

    def step(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(Step(text))

    def byte_progress(self, label: str) -> Callable[[int, int | None], None] | None:
        """A ``(done, total)`` callback for the byte-streaming functions, or None when nobody listens."""
        sink = self.on_event
        if sink is None:
            return None

        def update(done: int, total: int | None) -> None:
            sink(Bytes(label, done, total))

        return update


def record(inv: Invocation) -> None:
    """Append the action's audit record and a signed checkpoint (raises AuditError if it cannot)."""
    record_command(
        inv.home,
        action=inv.action,
        obj=inv.object,
        outcome=inv.outcome or "failed",
        reason=inv.reason,
        details=inv.details,
        argv=inv.argv,
        operator=inv.operator,
    )


@contextmanager
def audited(inv: Invocation) -> Iterator[Invocation]:
    """Run an action under its audit record: whatever happens inside, one record is written.

    A :class:`VigilError` gives its own outcome ("refused" or "failed") and its message as the
    reason; any other exception (an interrupt, a defect) is recorded as "failed". The exception
    then goes on to the front end. A record that cannot be written fails the action: its
    AuditError goes on instead, and the action's own error stays in ``inv.error``.
    """
    try:
        yield inv
    except VigilError as exc:
        inv.outcome = exc.outcome
        inv.reason = str(exc)
        inv.error = exc
        raise
    except KeyboardInterrupt:
        inv.outcome = "failed"
        inv.reason = "interrupted"
        raise
    except BaseException as exc:
        inv.outcome = "failed"
        inv.reason = inv.reason or f"{type(exc).__name__}: {exc}"
        raise
    else:
        if inv.outcome is None:
            inv.outcome = "ok"
    finally:
        if not inv.skip_audit:
            record(inv)
