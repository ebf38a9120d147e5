"""vigil's signed offline bundle: catalog, lock, fetch, build, sign, verify, import."""

from vigil.basics.errors import VigilError
from vigil.bundle.errors import (
    BundleError,
    BundleRejected,
    CatalogError,
    FetchError,
    KeyFileError,
    RollbackRefused,
    SignatureError,
    TamperedFile,
    TrustError,
)

__all__ = [
    "BundleError",
    "BundleRejected",
    "CatalogError",
    "FetchError",
    "KeyFileError",
    "RollbackRefused",
    "SignatureError",
    "TamperedFile",
    "TrustError",
    "VigilError",
]
