"""Shared pytest configuration: the markers every test directory may use."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: uses real binaries on this machine or the network")
    config.addinivalue_line("markers", "lab: needs the lab's systemd hosts (vigil lab up)")
