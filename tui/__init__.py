"""The operator's console: a Textual front end over :mod:`vigil.installer.ops`.

Like the CLI it parses and renders, nothing else: every action is one operation, run under an
:class:`~vigil.installer.ops.Invocation` so that it leaves the same audit record the CLI's would.
``vigil tui`` (and ``vigil`` alone, on a terminal) builds the app with :func:`make_app`.
"""

from __future__ import annotations

from vigil.tui.app import VigilApp, make_app
from vigil.tui.session import Outcome, Session, fail_lines, perform

__all__ = ["Outcome", "Session", "VigilApp", "fail_lines", "make_app", "perform"]
