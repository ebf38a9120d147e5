"""A channel's component as a build fetches it, for the integration tests that run the real binaries
(VictoriaMetrics' tools, Alertmanager), and a free port on 127.0.0.1 for them to listen on."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from vigil.bundle.catalog import CATALOG_DIR, load_lock
from vigil.bundle.fetchers import fetch_component


def fetched_bin(
    channel: str, component: str, vigil_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """(the package's version, the component's ``bin`` directory): COMPONENT of CHANNEL's lock,
    fetched from the download cache and checked against the lock as a build does."""
    comp = load_lock(CATALOG_DIR / f"{channel}.lock.yaml").component(component)
    out = tmp_path_factory.mktemp(channel)
    fetch_component(comp, vigil_cache, out)
    bin_dir = out / "components" / component / "bin"
    assert bin_dir.is_dir(), bin_dir
    return comp.version, bin_dir


def free_port() -> int:
    """A TCP port nothing listens on now on 127.0.0.1 (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
