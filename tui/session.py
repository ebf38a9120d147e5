"""Who is at the console and how one action runs: under its Invocation, errors said in one line.

The TUI's counterpart of the CLI's ``main()``: an action is an operation of :mod:`vigil.installer.ops`
run under :func:`~vigil.installer.ops.audited`, so that it leaves exactly the record the CLI leaves
(the same ``action``, object, outcome and details, with ``argv`` the equivalent command line and
``details["front_end"] = "tui"``). A :class:`~vigil.basics.errors.VigilError` becomes the line the CLI
prints, ``FAIL: <object>: <reason>``; nothing reaches the screen as a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from vigil.basics.errors import VigilError, one_line
from vigil.installer.audit.errors import AuditError
from vigil.installer.ops import EventSink, Invocation, audited

T = TypeVar("T")


@dataclass(frozen=True)
class Session:
    """The state root and the operator, as ``vigil --home --operator tui`` was given them."""

    home: Path
    operator: str | None = None

    def invocation(self, action: str, argv: Sequence[str], on_event: EventSink | None = None) -> Invocation:
        """A new action: ``argv`` is the CLI command line that does the same (``["bundle", "verify", P]``)."""
        inv = Invocation(
            home=self.home, argv=list(argv), operator=self.operator, action=action, on_event=on_event
        )
        inv.details["front_end"] = "tui"
        return inv


@dataclass
class Outcome(Generic[T]):
    """What an action came to: its value, or the ``FAIL:`` lines to show (never both)."""

    value: T | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def fail_lines(inv: Invocation, exc: VigilError) -> list[str]:
    """The lines the CLI prints for EXC: an action that failed and then could not be recorded either
    gets both, in that order."""
    lines = []
    if isinstance(exc, AuditError) and inv.error is not None and inv.error is not exc:
        lines.append(f"FAIL: {inv.error}")
    lines.append(f"FAIL: {exc}")
    return lines


def perform(inv: Invocation, action: Callable[[Invocation], T]) -> Outcome[T]:
    """Run ACTION under INV's audit record; never raises (an interrupt aside).

    Called on a worker thread: the operation may take minutes and ``inv.on_event`` hears its progress.
    """
    try:
        with audited(inv):
            value = action(inv)
    except VigilError as exc:
        return Outcome(failures=fail_lines(inv, exc))
    except Exception as exc:  # a defect below: one line on screen, the traceback in the audit reason
        what = inv.object or inv.action
        return Outcome(failures=[f"FAIL: {one_line(what)}: {one_line(f'{type(exc).__name__}: {exc}')}"])
    return Outcome(value=value)
