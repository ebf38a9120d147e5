"""The app: one mode per screen (each keeps its state while another is shown), footer keys, help,
and a command-palette entry for every action of every screen."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from vigil.tui.screens import SCREENS, DeployScreen, HelpScreen, VigilScreen
from vigil.tui.session import Session


class VigilApp(App[None]):
    """vigil's operator console."""

    TITLE = "vigil"
    SUB_TITLE = "operator console"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True, show=False),
        Binding("f1", "help", "Help", id="help"),
        *(
            Binding(f"f{n}", f"show('{cls.MODE}')", cls.LABEL, id=f"screen-{cls.MODE}", show=False)
            for n, cls in enumerate(SCREENS, start=2)
        ),
    ]

    def __init__(self, session: Session, *, start: str = "overview") -> None:
        super().__init__()
        self.session = session
        self._start = start
        self._quit_warned = False
        for cls in SCREENS:
            self.add_mode(cls.MODE, partial(cls, session))

    def on_mount(self) -> None:
        self.switch_mode(self._start)

    def _deploying(self) -> DeployScreen | None:
        """The deploy screen, when a deploy is under way on it."""
        try:
            stack = self.get_screen_stack(DeployScreen.MODE)
        except KeyError:  # never opened
            return None
        return next((s for s in stack if isinstance(s, DeployScreen) and s.busy), None)

    async def action_quit(self) -> None:
        """Quit; during a deploy, the first ctrl+q warns and the second cancels the deploy and quits
        (the run ends and is recorded before the process exits)."""
        deploy = self._deploying()
        if deploy is not None and not self._quit_warned:
            self._quit_warned = True
            self.notify(
                "a deploy is under way: ctrl+b cancels it; ctrl+q again cancels it and quits",
                severity="warning",
            )
            return
        if deploy is not None:
            deploy.stop()
        self.exit()

    def action_show(self, mode: str) -> None:
        if mode != self.current_mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette: every screen, help, quit, and each action of the screen in front."""
        for cls in SCREENS:
            yield SystemCommand(f"Go to {cls.LABEL}", cls.HELP, partial(self.action_show, cls.MODE))
        yield SystemCommand("Help", "Keys and what each screen does", self.action_help)
        yield SystemCommand("Quit", "Leave the console (ctrl+q)", self.exit)
        if isinstance(screen, VigilScreen):
            for title, help_text, callback in screen.commands():
                yield SystemCommand(f"{screen.LABEL}: {title}", help_text, callback)


def load_ansible() -> None:
    """Import Ansible while the process's own stdout is in place.

    Ansible's colour module calls ``curses.setupterm()`` on ``sys.stdout`` when it is first imported;
    inside the running app that is Textual's capture, whose file descriptor is -1, and the import
    fails (a ValueError Ansible does not catch). The inventory check, the pre-flight ping and the
    deploy all import Ansible on a worker thread, so it is imported here, before the app runs.
    """
    import ansible.utils.display  # noqa: F401 - imported for its side effect


def make_app(home: Path, operator: str | None = None, *, start: str = "overview") -> VigilApp:
    """The app as ``vigil tui`` runs it (and as the tests drive it)."""
    load_ansible()
    return VigilApp(Session(home=home, operator=operator), start=start)


__all__ = ["VigilApp", "make_app"]
