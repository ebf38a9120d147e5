"""The help screen: keys, and what each screen does."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown

HELP = """\
# vigil operator console

A front end over the same operations as the `vigil` command line: every action here leaves the
same audit record as the command it names, and a refusal shows the same `FAIL:` line.

- **F1** this help (escape closes it)
- **F2** Import: verify, inspect and import a bundle
- **F3** Deploy: plan, confirm and run a deploy, live
- **F4** Audit: browse and verify the audit log
- **F5** Overview: the cluster panels and firing alerts
- **ctrl+p** command palette: every action of every screen
- **tab / shift+tab** move between fields and buttons; **enter** presses a button
- **ctrl+q** quit (during a deploy: the first press warns, the second cancels it and quits)

## Import (F2)
Type the bundle's path (and a trust root, or leave it empty for the installed one).
enter or **ctrl+r** verifies (signatures, threshold, expiry, then every byte, with progress) and
then inspects; **ctrl+t** inspects only (reads without verifying); **ctrl+g** imports into the store.

## Deploy (F3)
The inventory path, then **ctrl+r** plans: the inventory is checked, the bundle re-verified and every
host reached; nothing is changed. **ctrl+y** confirms and runs; **ctrl+n** drops the plan. While it runs:
hosts × counts, the current task per host, the log, elapsed time; **ctrl+b** cancels safely
(Ansible ends the play). A failure lists each failed task's result.

## Audit (F4)
The log's records, newest last; the filters take an action prefix (`bundle` matches `bundle.import`)
and a start time (ISO 8601). **ctrl+r** reloads, **ctrl+y** verifies the chain and its checkpoints.

## Overview (F5)
VictoriaMetrics' cluster panels (the Grafana overview's queries) and Alertmanager's firing alerts,
every 5 seconds while shown; **ctrl+r** refreshes now.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and screens, over whatever screen is in front."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,q", "dismiss", "Close", id="close-help"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(HELP)
        yield Footer(compact=True)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
