"""vigil's installer: the CLI, deploy/upgrade over ansible-runner, audit log, reports, the lab."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vigil")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
