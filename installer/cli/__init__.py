"""The ``vigil`` command line.

Each area registers its subcommands from its own module (``installer/cli/<area>.py``) with a
``register(subparsers)`` function. A subcommand handler has the signature
``handler(args, ctx) -> int | None`` and raises :class:`vigil.bundle.errors.VigilError` on failure.

Every invocation, successful or not, leaves one audit record and a signed checkpoint
(see :mod:`vigil.installer.audit`) before the process exits.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from vigil.basics.errors import UsageError, VigilError
from vigil.installer.cli._context import Context

DEFAULT_HOME = "/var/lib/vigil"


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so a bad invocation is audited too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    from vigil.installer.cli import audit as audit_cli
    from vigil.installer.cli import bundle as bundle_cli
    from vigil.installer.cli import demo as demo_cli
    from vigil.installer.cli import deploy as deploy_cli
    from vigil.installer.cli import keys as keys_cli
    from vigil.installer.cli import lab as lab_cli
    from vigil.installer.cli import trust as trust_cli

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
    for module in (keys_cli, trust_cli, bundle_cli, deploy_cli, lab_cli, audit_cli, demo_cli):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ctx = Context(home=Path(os.environ.get("VIGIL_HOME", DEFAULT_HOME)), argv=argv, action="vigil.usage")
    rc = 0
    try:
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help: nothing happened, nothing to record
            ctx.skip_audit = True
            return int(exc.code or 0)
        ctx.home = Path(args.home)
        ctx.operator = args.operator
        ctx.verbose = args.verbose
        ctx.action = getattr(args, "action", args.command)
        rc = int(args.func(args, ctx) or 0)
        ctx.outcome = "ok" if rc == 0 else "failed"
    except VigilError as exc:
        ctx.outcome = exc.outcome
        ctx.reason = str(exc)
        if ctx.verbose:
            traceback.print_exc()
        print(f"FAIL: {exc}", file=sys.stderr)
        if exc.diagnostics() and ctx.verbose:
            print(exc.diagnostics(), file=sys.stderr)
        rc = 1
    except KeyboardInterrupt:
        ctx.outcome = "failed"
        ctx.reason = "interrupted"
        print("FAIL: vigil: interrupted", file=sys.stderr)
        rc = 130
    finally:
        if not ctx.skip_audit:
            rc = _audit(ctx, rc)
    return rc


def _audit(ctx: Context, rc: int) -> int:
    """Record the invocation; a command whose audit record cannot be written fails."""
    from vigil.installer import audit

    try:
        audit.record_command(ctx)
    except VigilError as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return rc or 1
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
