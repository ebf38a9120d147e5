"""The bundle's errors: building, reading, verifying and importing bundles, keys, trust roots, catalogs.

All derive from :class:`vigil.basics.errors.VigilError`.
"""

from __future__ import annotations

from vigil.basics.errors import VigilError


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
