"""vigil's installer: the operations layer and the CLI over it, deploy over ansible-runner, the audit
log, the lab."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vigil")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
