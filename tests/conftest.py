"""Shared pytest configuration: the markers, and the fixtures every test directory may use.

Markers: ``integration`` (real binaries on this machine, or the network), ``lab`` (the lab's
systemd hosts) and ``soak`` (the long loops: kills at every phase, repetitions; `make test-soak`).
``-m "not integration and not lab"`` is the fast part, run on every change. `make test` runs the lab
tests beside the rest (tests/lanes.py). A soak test runs only when ``-m`` names ``soak``: any other
run leaves it out (deselected, as ``-m`` would), so `pytest tests` is what `make test` runs.

Session fixtures, each made once per test session, whichever tests ask first:

* ``vigil_cache`` — the download cache of bundle builds ($VIGIL_CACHE, else one per session);
* ``release`` — the debian-channel bundle built with a fresh key and trust root (minutes: built
  once and shared; see tests/helpers/release.py);
* ``imported_release`` — that bundle imported into a VIGIL_HOME of its own, with its trust root
  installed: what the lab deploys from;
* ``components`` — the imported bundle's `files/components` (or $VIGIL_BUNDLE_FILES/components).

A test that uses one of these (or ``lab``/``deployed_stack``) must be marked ``integration`` or
``lab``; collection stops otherwise (``NEEDS_MARKER``).

``measured`` records a figure a test measures but does not assert (tests/helpers/measured.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from tests.helpers.fixtures import components, imported_release, measured, release, vigil_cache  # noqa: F401
from tests.helpers.measured import FIGURES

# Every vigil command sends its audit checkpoint to syslog (the witness, docs/audit.md); a test run
# must not fill the developer's own syslog. Tests of the witness name their own socket.
os.environ.setdefault("VIGIL_AUDIT_SYSLOG", "")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: uses real binaries on this machine or the network")
    config.addinivalue_line("markers", "lab: needs the lab's systemd hosts (vigil lab up)")
    config.addinivalue_line(
        "markers", "soak: a long loop or repetition, run by `make test-soak` only (-m soak)"
    )


#: fixtures that build a bundle or need the lab, and the marker a test that uses one must carry, so
#: that `-m "not integration and not lab"` stays the fast part
NEEDS_MARKER = {
    "release": "integration",
    "imported_release": "integration",
    "components": "integration",
    "lab": "lab",
    "deployed_stack": "lab",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not re.search(r"\bsoak\b", config.getoption("markexpr") or ""):
        soak = [item for item in items if item.get_closest_marker("soak") is not None]
        if soak:
            items[:] = [item for item in items if item.get_closest_marker("soak") is None]
            config.hook.pytest_deselected(items=soak)
    unmarked = sorted(
        f"{item.nodeid} uses `{name}` but is not marked {marker}"
        for item in items
        for name, marker in NEEDS_MARKER.items()
        if name in getattr(item, "fixturenames", ())
        and item.get_closest_marker(marker) is None
        and not (marker == "integration" and item.get_closest_marker("lab") is not None)
    )
    if unmarked:
        raise pytest.UsageError("\n".join(unmarked))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES.items:
        terminalreporter.write_sep("=", "measured (not asserted)")
        for line in FIGURES.lines():
            terminalreporter.write_line(line)
    FIGURES.write()


@pytest.fixture(scope="session", autouse=True)
def vigil_admin_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`vigil upgrade` and `rollback` install the admin host's vigil from the bundle (docs/upgrade.md):
    a test session does so in a directory of its own (removed with the session's others), never in
    the machine's /opt/vigil/admin. Set before any other fixture copies the environment."""
    if os.environ.get("VIGIL_ADMIN_ROOT"):
        yield
        return
    os.environ["VIGIL_ADMIN_ROOT"] = str(tmp_path_factory.mktemp("admin-root"))
    try:
        yield
    finally:
        os.environ.pop("VIGIL_ADMIN_ROOT", None)
