"""Error types shared by vigil's packages.

Every error carries the object it is about and a short factual reason; the CLI prints
``FAIL: <object>: <reason>`` and nothing else unless asked for the traceback.
"""

from __future__ import annotations


class VigilError(Exception):
    """Base class of every error vigil reports to an operator."""

    #: audit outcome for this kind of error: "refused" when input was rejected on purpose,
    #: "failed" when something went wrong while trying.
    outcome = "failed"

    def __init__(self, obj: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"{obj}: {reason}")
        self.obj = obj
        self.reason = reason
        self.hint = hint

    def diagnostics(self) -> str:
        """A longer hint for the operator, when there is one."""
        return self.hint or ""


class UsageError(VigilError):
    """Bad command-line usage (unknown option, missing argument)."""

    outcome = "refused"


class BundleError(VigilError):
    """A bundle could not be built, read, verified or imported."""


class BundleRejected(BundleError):
    """A bundle was read and found unacceptable (tampered, malformed, expired, ...)."""

    outcome = "refused"


class TamperedFile(BundleRejected):
    """A payload file does not match what the signed manifest says."""


class SignatureError(BundleRejected):
    """A signature is missing, invalid, from an unknown key, or below the threshold."""


class RollbackRefused(BundleRejected):
    """A bundle version is not newer than the newest already imported."""


class KeyFileError(VigilError):
    """A key file could not be created, read or decrypted."""


class TrustError(VigilError):
    """A trust root is malformed or a new one is not signed by enough current keys."""

    outcome = "refused"


class CatalogError(VigilError):
    """A catalog or lock file is malformed or incomplete."""


class FetchError(VigilError):
    """An artifact could not be fetched, or its upstream checksum did not match."""
