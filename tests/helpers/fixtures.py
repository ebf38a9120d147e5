"""The shared fixtures, registered for every test directory by tests/conftest.py (see there)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.measured import FIGURES
from tests.helpers.release import Imported, Release, build_release, import_release
from tests.helpers.shared import shared_dir, shared_release


def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """$VIGIL_CACHE; else the lanes' shared one ($VIGIL_TEST_SHARED/vigil-cache); else the session's."""
    given, shared = os.environ.get("VIGIL_CACHE"), shared_dir()
    if given:
        return Path(given)
    return shared / "vigil-cache" if shared else tmp_path_factory.getbasetemp() / "vigil-cache"


@pytest.fixture(scope="session")
def vigil_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cache_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory, vigil_cache: Path) -> Release:
    """The debian-channel release of this session (built once; once for both lanes of `make test`,
    tests/helpers/shared.py)."""
    shared = shared_dir()
    if shared is not None:
        return shared_release(shared, vigil_cache, channel="debian", version=1)
    return build_release(tmp_path_factory.mktemp("release"), vigil_cache, channel="debian", version=1)


@pytest.fixture(scope="session")
def imported_release(
    tmp_path_factory: pytest.TempPathFactory, release: Release, vigil_cache: Path
) -> Imported:
    """The session's release imported into its own VIGIL_HOME (shared: only read it, or deploy from it)."""
    return import_release(release, tmp_path_factory.mktemp("imported") / "home", vigil_cache)


@pytest.fixture(scope="session")
def components(request: pytest.FixtureRequest) -> Path:
    """`<store>/bundles/<N>/files/components` of an imported debian bundle."""
    given = os.environ.get("VIGIL_BUNDLE_FILES")
    if given:
        return Path(given) / "components"
    imported: Imported = request.getfixturevalue("imported_release")
    return imported.components


@pytest.fixture
def measured(
    request: pytest.FixtureRequest, record_property: Callable[[str, object], None]
) -> Callable[[str, float], None]:
    """``measured(name, seconds)``: keep a timing this test took (listed at the end, never asserted)."""

    def record(name: str, seconds: float) -> None:
        FIGURES.add(name, seconds, request.node.nodeid)
        record_property(name, round(seconds, 1))

    return record
