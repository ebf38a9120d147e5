"""What the lanes of one `make test` run share: the release, and the upgrade's bundles, built once.

`make test` runs the lab tests and the rest side by side, as two pytest processes (tests/lanes.py).
Each process has its own session fixtures, so each would build the debian release (minutes) on its
own. With ``VIGIL_TEST_SHARED`` set (the lanes' runner sets it), the release lives in
``$VIGIL_TEST_SHARED/release`` instead: the first process to ask builds it there while holding an
exclusive lock on ``release.lock``; the other waits on the lock and reads what was built. The
description of a finished build (``release.json``) is written last, by rename, so a build killed
half-way is never taken for a release: the next one to ask starts it again from an empty
directory. A build that failed is recorded (``release.failed``) and the other lane fails at once
with its reason instead of spending minutes failing the same way. The upgrade's two bundles
(debian-next, and a bad one after it) are built the same way, by the lab lane's prefetch thread
while its hosts boot and its first modules run, so the upgrade module finds them built.

Without ``VIGIL_TEST_SHARED`` (a plain `pytest` run) nothing here is used: the fixtures build in the
session's own temporary directory, as before.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from tests.helpers.release import Release, build_bad, build_next, build_release

ENV = "VIGIL_TEST_SHARED"


class SharedBuildFailed(Exception):
    """The shared release could not be built (here or in the other lane)."""


def shared_dir() -> Path | None:
    """``$VIGIL_TEST_SHARED``, or None when the run has no lanes."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def _to_json(rel: Release) -> str:
    return json.dumps(
        {
            "tmp": str(rel.tmp),
            "key": str(rel.key),
            "pub": str(rel.pub),
            "trust": str(rel.trust),
            "bundle": str(rel.bundle),
            "channel": rel.channel,
            "version": rel.version,
            "build_env": rel.build_env,
        },
        indent=1,
    )


def _from_json(text: str) -> Release:
    d = json.loads(text)
    return Release(
        tmp=Path(d["tmp"]),
        key=Path(d["key"]),
        pub=Path(d["pub"]),
        trust=Path(d["trust"]),
        bundle=Path(d["bundle"]),
        channel=str(d["channel"]),
        version=int(d["version"]),
        build_env={str(k): str(v) for k, v in d["build_env"].items()},
    )


def _once(root: Path, name: str, build: Callable[[Path], str]) -> str:
    """What BUILD (given an empty directory ROOT/NAME) described, built by whichever process asks
    first; the others wait on ROOT/NAME.lock and get the description it wrote (NAME.json)."""
    root.mkdir(parents=True, exist_ok=True)
    done, failed, tree = root / f"{name}.json", root / f"{name}.failed", root / name
    with open(root / f"{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other lane building: wait for it
        if done.exists():
            return done.read_text()
        if failed.exists():
            raise SharedBuildFailed(f"the {name} build failed in the other lane: {failed.read_text()}")
        shutil.rmtree(tree, ignore_errors=True)  # what a killed build left
        tree.mkdir()
        try:
            text = build(tree)
        except BaseException as exc:  # pytest.fail() raises a BaseException
            failed.write_text(f"{type(exc).__name__}: {exc}"[-4000:])
            raise
        staged = root / f"{name}.json.new"
        staged.write_text(text + "\n")
        staged.rename(done)
        return text


def shared_release(
    root: Path,
    cache: Path,
    *,
    channel: str = "debian",
    version: int = 1,
    build: Callable[..., Release] = build_release,
) -> Release:
    """The release under ROOT: built here (by BUILD) if no process has built it yet, else the one built."""
    text = _once(root, "release", lambda tree: _to_json(build(tree, cache, channel=channel, version=version)))
    rel = _from_json(text)
    if not rel.bundle.is_file():
        raise SharedBuildFailed(f"{root / 'release.json'}: names {rel.bundle}, which is gone")
    return rel


def shared_bundle(root: Path, name: str, build: Callable[[Path], Path]) -> Path:
    """A further bundle file of the run (the upgrade's targets), built once under ROOT/NAME."""
    path = Path(_once(root, name, lambda tree: str(build(tree))).strip())
    if not path.is_file():
        raise SharedBuildFailed(f"{root / (name + '.json')}: names {path}, which is gone")
    return path


class Prefetch:
    """Build the shared release in a thread, then the upgrade's two bundles (debian-next, and the bad
    one after it), so the lab lane, which has other things to do first (boot its hosts, deploy, the
    modules before the upgrade), does not wait for them later; whoever asks for one waits on its lock
    if it is still being built. ``result()`` waits for all and raises what a build raised."""

    def __init__(self, root: Path, cache: Path) -> None:
        self._err: list[BaseException] = []

        def run() -> None:
            try:
                rel = shared_release(root, cache)
                shared_bundle(root, "debian-next", lambda tree: build_next(rel, tree))
                shared_bundle(root, "debian-next-bad", lambda tree: build_bad(rel, tree))
            except BaseException as exc:
                self._err.append(exc)

        self._thread = threading.Thread(target=run, name="release-prefetch", daemon=True)
        self._thread.start()

    def result(self) -> None:
        self._thread.join()
        if self._err:
            raise self._err[0]
