"""The ``vigil`` command line.

A front end over the operations layer (:mod:`vigil.installer.ops`): it parses, calls one operation
and renders its result, nothing else. Each area registers its subcommands from its own module
(``installer/cli/<area>.py``) with a ``register(subparsers)`` function. A subcommand handler has the
signature ``handler(args, inv) -> int | None`` and raises :class:`vigil.basics.errors.VigilError` on
failure.

Every invocation, successful or not, runs under :func:`vigil.installer.ops.audited` and so leaves
one audit record and a signed checkpoint before the process exits.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from vigil.basics.errors import UsageError, VigilError
from vigil.basics.printable import visible
from vigil.installer.audit.errors import AuditError
from vigil.installer.ops import Invocation, audited

DEFAULT_HOME = "/var/lib/vigil"


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so a bad invocation is audited too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    from vigil.installer.cli import audit as audit_cli
    from vigil.installer.cli import backup as backup_cli
    from vigil.installer.cli import bundle as bundle_cli
    from vigil.installer.cli import demo as demo_cli
    from vigil.installer.cli import deploy as deploy_cli
    from vigil.installer.cli import explain as explain_cli
    from vigil.installer.cli import inventory as inventory_cli
    from vigil.installer.cli import keys as keys_cli
    from vigil.installer.cli import lab as lab_cli
    from vigil.installer.cli import pki as pki_cli
    from vigil.installer.cli import plan as plan_cli
    from vigil.installer.cli import report as report_cli
    from vigil.installer.cli import trust as trust_cli
    from vigil.installer.cli import tui as tui_cli
    from vigil.installer.cli import upgrade as upgrade_cli

    parser = _Parser(
        prog="vigil",
        description="Build, carry in, verify and deploy vigil's signed offline observability bundle.",
    )
    parser.add_argument(
        "--home",
        default=os.environ.get("VIGIL_HOME", DEFAULT_HOME),
        help="state root on this host (bundles/, trust/, audit/, reports/, runs/); "
        "default $VIGIL_HOME or %(default)s",
    )
    parser.add_argument(
        "--operator",
        default=os.environ.get("VIGIL_OPERATOR"),
        help="operator name recorded in the audit log (default $VIGIL_OPERATOR)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print tracebacks on failure")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in (
        keys_cli,
        trust_cli,
        bundle_cli,
        inventory_cli,
        deploy_cli,
        upgrade_cli,
        lab_cli,
        pki_cli,
        report_cli,
        explain_cli,
        plan_cli,
        backup_cli,
        audit_cli,
        demo_cli,
        tui_cli,
    ):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv and on_terminal():  # `vigil` alone, typed at a terminal: the console
        argv = ["tui"]
    # absolute from here on: runs start programs in other working directories (a relative home broke
    # the run's own bin/ directory at the front of PATH)
    inv = Invocation(
        home=Path(os.environ.get("VIGIL_HOME", DEFAULT_HOME)).absolute(), argv=argv, action="vigil.usage"
    )
    verbose = False
    try:
        with audited(inv):
            try:
                parser = build_parser()
                args = parser.parse_args(argv)
            except SystemExit as exc:  # --help: nothing happened, nothing to record
                inv.skip_audit = True
                return int(exc.code or 0)
            inv.home = Path(args.home).absolute()
            inv.operator = args.operator
            verbose = args.verbose
            inv.action = getattr(args, "action", args.command)
            rc = int(args.func(args, inv) or 0)
            if rc != 0:
                inv.outcome = "failed"
            return rc
    except VigilError as exc:
        # an action that failed, then could not be recorded either: both are said, in that order
        if isinstance(exc, AuditError) and inv.error is not None and inv.error is not exc:
            _fail(inv.error, verbose)
        _fail(exc, verbose)
        return 1
    except KeyboardInterrupt:
        print("FAIL: vigil: interrupted", file=sys.stderr)
        return 130


def on_terminal() -> bool:
    """Both ends are a terminal (not a pipe, a file or a test's capture)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _fail(exc: VigilError, verbose: bool) -> None:
    if verbose:
        traceback.print_exception(exc)
    # the object and the reason may quote a host, a service or a bundle: one line, escapes visible
    print(f"FAIL: {visible(str(exc))}", file=sys.stderr)
    if exc.diagnostics() and verbose:
        print(visible(exc.diagnostics(), newlines=True), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
