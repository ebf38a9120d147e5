"""The bundle store on the admin host: ``$VIGIL_HOME/bundles/``.

::

    bundles/
      highest                  the highest version ever imported (only grows)
      7/manifest.json          the signed manifest, as carried in
      7/signatures/*.minisig   its signatures
      7/files/...              the verified payload files
      7/import.json            when, from which file, which signers, manifest digest

An import verifies the bundle while unpacking it into ``bundles/.staging-*`` and renames
the staging directory to its version only when every check passed; on any failure the
staging directory is removed and the store is as it was. Imports serialize on a lock of
the store directory. A version not above ``highest`` is refused (rollback protection)
unless the operator passes ``allow_downgrade`` — the caller records that choice. An import
verified with a trust root other than the installed one does not raise ``highest``
(``raise_highest=False``). A staging directory left by an import that was killed is removed
by the next import, under the lock (only names the store itself makes, links not followed).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vigil.basics.atomic import fsync_dir, write_file_atomic
from vigil.bundle.errors import BundleError, RollbackRefused
from vigil.bundle.manifest import format_time
from vigil.bundle.payload import Progress
from vigil.bundle.trust import TrustRoot
from vigil.bundle.verify import VerifiedHead, verify_bundle

#: the names ``tempfile.mkdtemp(prefix=".staging-")`` gives; nothing else is taken for stale staging
_STAGING_NAME = re.compile(r"\.staging-[a-z0-9_]{8}")


@dataclass(frozen=True)
class ImportResult:
    version: int
    path: Path
    manifest_sha256: str
    signers: list[str]
    already_imported: bool
    downgrade: bool
    files: int
    bytes: int
    #: whether this import raised the store's highest version
    highest_raised: bool = False
    #: staging directories of earlier, interrupted imports that this one removed
    stale_staging: tuple[str, ...] = ()


class _AlreadyImported(Exception):
    def __init__(self, head: VerifiedHead) -> None:
        self.head = head


class BundleStore:
    def __init__(self, home: Path) -> None:
        self.root = Path(home) / "bundles"

    def highest(self) -> int:
        try:
            text = (self.root / "highest").read_text().strip()
        except FileNotFoundError:
            return 0
        if not text.isdigit():
            raise BundleError(str(self.root / "highest"), f"corrupt: {text[:40]!r} is not a version number")
        return int(text)

    def versions(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(p.name) for p in self.root.iterdir() if p.name.isdigit() and p.is_dir())

    def record(self, version: int) -> dict[str, object]:
        path = self.root / str(version) / "import.json"
        try:
            data: dict[str, object] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BundleError(str(path), f"cannot read import record: {exc}") from None
        return data

    def clean_staging(self) -> list[str]:
        """Remove what interrupted imports left (under the store's lock); the names removed."""
        if not self.root.is_dir():
            return []
        lock_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            return self._remove_stale_staging()
        finally:
            os.close(lock_fd)

    def _remove_stale_staging(self) -> list[str]:
        """With the lock held, every staging directory is one whose import died (kill -9, power)."""
        removed: list[str] = []
        for entry in os.scandir(self.root):
            if not _STAGING_NAME.fullmatch(entry.name):
                continue
            path = self.root / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(path)  # does not follow links inside it
                else:
                    path.unlink()  # a link or a file under a staging name: only the name goes
            except OSError as exc:
                raise BundleError(
                    str(path), f"cannot remove an interrupted import's staging: {exc.strerror}"
                ) from None
            removed.append(entry.name)
        return sorted(removed)

    def import_bundle(
        self,
        path: Path,
        trust: TrustRoot,
        *,
        vigil_version: str,
        allow_downgrade: bool = False,
        raise_highest: bool = True,
        now: datetime | None = None,
        progress: Progress | None = None,
    ) -> ImportResult:
        created_root = not self.root.exists()
        self.root.mkdir(mode=0o750, parents=True, exist_ok=True)
        lock_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        staging: Path | None = None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            stale = tuple(self._remove_stale_staging())
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
            highest = self.highest()
            downgrade = False

            def gate(head: VerifiedHead) -> None:  # step 6: rollback protection
                nonlocal downgrade
                version = head.manifest.version
                existing = self.root / str(version)
                if existing.is_dir():
                    try:
                        same = json.loads((existing / "import.json").read_text()).get("manifest_sha256")
                    except (OSError, json.JSONDecodeError):
                        same = None
                    if same == head.manifest_sha256:
                        raise _AlreadyImported(head)
                    raise RollbackRefused(
                        head.path.name, f"version {version} is already imported with a different manifest"
                    )
                if version <= highest:
                    if not allow_downgrade:
                        raise RollbackRefused(
                            head.path.name,
                            f"version {version} is not newer than the highest imported ({highest}); "
                            "pass --allow-downgrade to import it anyway",
                        )
                    downgrade = True

            try:
                head = verify_bundle(
                    path,
                    trust,
                    vigil_version=vigil_version,
                    now=now,
                    extract_to=staging / "files",
                    before_payload=gate,
                    progress=progress,
                )
            except _AlreadyImported as done:
                # The same signed manifest as the stored copy; its payload is checked all the same,
                # streamed and extracted nowhere: a damaged copy of an imported bundle is refused,
                # never reported as imported.
                h = verify_bundle(path, trust, vigil_version=vigil_version, now=now, progress=progress)
                if h.manifest_sha256 != done.head.manifest_sha256:  # the file changed under us
                    raise RollbackRefused(
                        h.path.name, f"version {h.manifest.version} changed while it was read"
                    ) from None
                return ImportResult(
                    version=h.manifest.version,
                    path=self.root / str(h.manifest.version),
                    manifest_sha256=h.manifest_sha256,
                    signers=h.signers,
                    already_imported=True,
                    downgrade=False,
                    files=len(h.manifest.files),
                    bytes=h.manifest.total_size,
                    stale_staging=stale,
                )
            version = head.manifest.version
            (staging / "files").mkdir(exist_ok=True)
            write_file_atomic(staging / "manifest.json", head.manifest_bytes)
            (staging / "signatures").mkdir()
            for key_id, sig in sorted(head.signatures.items()):
                write_file_atomic(staging / "signatures" / f"{key_id}.minisig", sig)
            record = {
                "version": version,
                "source": str(Path(path).resolve()),
                "imported": format_time(datetime.now(UTC)),
                "manifest_sha256": head.manifest_sha256,
                "signers": head.signers,
                "downgrade": downgrade,
                "channel": head.manifest.channel,
                "arch": head.manifest.arch,
            }
            write_file_atomic(staging / "import.json", json.dumps(record, indent=1, sort_keys=True).encode())
            os.chmod(staging, 0o750)  # noqa: S103 - a directory, root and group only
            final = self.root / str(version)
            os.rename(staging, final)
            staging = None
            raised = raise_highest and version > highest
            if raised:
                write_file_atomic(self.root / "highest", f"{version}\n".encode())
            fsync_dir(self.root)
            return ImportResult(
                version=version,
                path=final,
                manifest_sha256=head.manifest_sha256,
                signers=head.signers,
                already_imported=False,
                downgrade=downgrade,
                files=len(head.manifest.files),
                bytes=head.manifest.total_size,
                highest_raised=raised,
                stale_staging=stale,
            )
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            os.close(lock_fd)
            if created_root and not any(self.root.iterdir()):
                self.root.rmdir()
