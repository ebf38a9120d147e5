"""vigil's signed offline bundle: catalog, lock, fetch, build, sign, verify, import."""

from bundle.errors import (
    BundleError,
    BundleRejected,
    CatalogError,
    FetchError,
    KeyFileError,
    RollbackRefused,
    SignatureError,
    TamperedFile,
    TrustError,
    VigilError,
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
