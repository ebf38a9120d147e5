"""``vigil tui``: the operator's console (the Textual front end in :mod:`vigil.tui`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from vigil.installer import ops

#: the screens' names in key order (F2 onwards), as vigil.tui.screens.SCREENS has them; written out so
#: that `vigil --help` does not import Textual (a test keeps the two equal)
SCREENS = ("import", "deploy", "audit", "overview", "bundle", "inventory", "reports")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "tui",
        help="the operator's console in the terminal",
        description="Open the operator's console, on Home (the site: trust root, bundles, the last deploy, "
        "the audit trail's last verify; the cluster: panels and firing alerts): import (verify, inspect, "
        "import a bundle with live "
        "progress), deploy (plan, confirm, follow the run host by host, cancel), audit (browse, verify, "
        "checkpoint, export), "
        "bundle (build a channel's signed bundle, split it), inventory (check it as deploy does, edit the "
        "shared variables, ping the hosts) and reports (generate, list, show, verify, export). Every "
        "action in it is the same operation as the command of the same name and leaves the same audit "
        "record, with the operator from --operator. F1 shows the keys; ctrl+p lists every action; ctrl+q "
        "quits. `vigil` without arguments opens it too, on a terminal. Works at 80x24 without a mouse.",
    )
    p.add_argument(
        "--screen",
        choices=SCREENS,
        default="overview",
        help="the screen to open on (default %(default)s: Home, the site and the cluster at a glance)",
    )
    p.set_defaults(func=_tui, action="tui")


def _tui(args: argparse.Namespace, inv: ops.Invocation) -> int:
    run_app(Path(args.home).absolute(), args.operator, args.screen)
    return 0


def run_app(home: Path, operator: str | None, screen: str) -> None:
    """Build the console as the tests do and run it until the operator quits."""
    from vigil.tui import make_app

    make_app(home, operator, start=screen).run()
