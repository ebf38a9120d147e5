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
- **F5** Home, where the console opens: the site (trust root, bundles, last deploy, audit) and the cluster
- **F6** Bundle: build a channel's signed bundle (build host), split it for media
- **F7** Inventory: check an inventory as deploy does; hosts, shared variables (editable), reachability
- **F8** Reports: generate, list, show, verify and export the signed reports
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
and a start time (ISO 8601). **ctrl+r** reloads, **ctrl+y** verifies the chain and its checkpoints
(and against the *Witness* files given: the log receiver's copy, comma-separated), **ctrl+t** signs
a checkpoint now and sends it to syslog, **ctrl+o** exports log, checkpoints and key into *Out*.

## Home (F5)
Where the console opens. This host's state: the trust root installed, the bundles in the store, the
last deploy, upgrade or rollback and how it ended, the audit trail's last verify (read when shown
and on **ctrl+r**). Then the cluster: VictoriaMetrics' panels (the Grafana overview's queries) and
Alertmanager's firing alerts by severity, every 5 seconds while shown; **ctrl+r** refreshes now.
**enter** on an alert that names a job explains the job (`vigil explain job`): its GPUs, their
errors, whether they were degrading, and the runbook; **escape** closes it.

## Bundle (F6)
The channels of the catalogs (the packaged ones, or the *Catalogs* directory), and the highlighted
channel's components as its lock pins them: version, kind, licence, bytes to fetch. Give the version,
the *Out* directory, the signing key(s) (comma-separated) and, for encrypted keys, the passphrase
(masked; emptied when the action starts, never recorded). **ctrl+g** builds, with each component's
state as it is fetched, then packed and signed; the result shows the path, size, payload digest and
signers. **ctrl+t** splits the bundle in *Split* into parts of at most *Size* (`4G`, `700M`) with a
signed index. **ctrl+r** reads the catalogs again.

## Inventory (F7)
**ctrl+r** (or enter) checks the inventory as `vigil deploy` does before any change (groups, every
host placed and addressed, the limit, each host's variables against the roles' argument specs):
hosts by group with their `ansible_host`, any refused variable, and the variables every host
shares. **ctrl+g** edits those (`group_vars/all.yml`); **ctrl+s** there saves them only if the
inventory still passes the check. **ctrl+t** reaches every host with Ansible's ping, as the deploy's
pre-flight does: it contacts the hosts, so only when asked.

## Reports (F8)
**ctrl+g** generates the usage report for *Period* (and *Account*), **ctrl+n** the energy report for
*Year* from *Site*; *VM* starts as `$VIGIL_VM_URL`, left empty it is the monitoring hosts of the last
deploy. The stored reports are listed (**ctrl+r** again); **ctrl+t** or enter shows the highlighted
one, **ctrl+y** verifies the *File* (the highlighted report's, or any report.json), **ctrl+o**
exports the highlighted one into *Out*.
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
