"""Build a channel's bundle: lock → fetch (verified) → stage → build → sign.

The lock file pins every upstream artifact; the fetchers check each against it. The
project's Ansible content (``roles/``, ``playbooks/``, ``inventories/example/``) travels
in the bundle too, under ``ansible/``, so the admin host deploys exactly what was signed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil.bundle.build import build_bundle
from vigil.bundle.catalog import CATALOG_DIR, catalog_path, check_lock_current, load_catalog, load_lock
from vigil.bundle.errors import CatalogError
from vigil.bundle.fetchers import apt_env, default_cache_dir, fetch_component
from vigil.bundle.manifest import ComponentEntry
from vigil.bundle.signing import SigningKey

__all__ = ["ANSIBLE_TREES", "TreeFile", "build_channel", "collect_ansible", "default_cache_dir"]

ANSIBLE_TREES = ("roles", "playbooks", "inventories/example")
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".git"}


@dataclass(frozen=True)
class TreeFile:
    path: str
    source: Path
    mode: int
    component: str
    version: str
    license: str = "Apache-2.0"
    upstream_url: str = ""
    upstream_sha256: str = ""


def collect_ansible(project_dir: Path, version: str) -> list[TreeFile]:
    """Every file of the project's Ansible trees, as payload files under ``ansible/``."""
    files: list[TreeFile] = []
    for tree in ANSIBLE_TREES:
        root = project_dir / tree
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for name in sorted(filenames):
                if name.endswith((".pyc", "~")):
                    continue
                src = Path(dirpath) / name
                if src.is_symlink() or not src.is_file():
                    raise CatalogError(str(src), "Ansible content must be regular files (no links)")
                rel = src.relative_to(project_dir).as_posix()
                mode = 0o755 if os.stat(src).st_mode & 0o111 else 0o644
                files.append(TreeFile(f"ansible/{rel}", src, mode, "vigil-ansible", version))
    return files


def build_channel(
    channel: str,
    *,
    version: int,
    keys: Sequence[SigningKey],
    out_dir: Path,
    builder_version: str,
    min_vigil_version: str | None = None,
    project_dir: Path | None = None,
    catalog_dir: Path = CATALOG_DIR,
    cache_dir: Path | None = None,
    valid_days: int = 365,
    # progress(done_bytes, total_bytes): total is None while a download's size is unknown
    progress: Callable[[int, int | None], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    cat = load_catalog(catalog_path(channel, catalog_dir))
    if not cat.lock_path.exists():
        raise CatalogError(
            str(cat.lock_path),
            f"no lock file; run `vigil bundle lock --channel {channel}` on a connected host",
        )
    lock = load_lock(cat.lock_path)
    check_lock_current(cat, lock)
    cache = cache_dir or default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    apt = apt_env(cat, cache)  # the catalog's own apt sources, if it names any
    project = project_dir or Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix=".vigil-stage-", dir=out_dir) as stage:
        files: list[object] = []
        kinds: dict[str, str] = {}
        entries: list[ComponentEntry] = []
        for comp in lock.components:
            single = comp.artifacts[0] if len(comp.artifacts) == 1 else None
            entries.append(
                ComponentEntry(
                    name=comp.name,
                    version=comp.version,
                    license=comp.license,
                    kind=comp.kind,
                    upstream_url=(single.url or "")
                    if single
                    else f"{len(comp.artifacts)} artifacts, see files",
                    upstream_sha256=(single.sha256 or "") if single else "",
                )
            )
            if log:
                log(f"fetch {comp.name} {comp.version} ({comp.kind})")
            files.extend(fetch_component(comp, cache, Path(stage), progress, apt, log=log))
            kinds[comp.name] = comp.kind
        ansible = collect_ansible(project, builder_version)
        files.extend(ansible)
        if ansible:
            kinds["vigil-ansible"] = "project"
        if log:
            log(f"build vigil-{version}-{lock.arch}.bundle from {len(files)} files")
        return build_bundle(
            files,  # type: ignore[arg-type]
            version=version,
            arch=lock.arch,
            channel=channel,
            keys=keys,
            out_dir=out_dir,
            min_vigil_version=min_vigil_version or builder_version,
            builder_version=builder_version,
            kinds=kinds,
            components=entries,
            valid_days=valid_days,
            progress=progress,
            log=log,
        )
