"""What the lanes of one `make test` run share: the release, built once for both.

`make test` runs the lab tests and the rest side by side, as two pytest processes (tests/lanes.py).
Each process has its own session fixtures, so each would build the debian release (minutes) on its
own. With ``VIGIL_TEST_SHARED`` set (the lanes' runner sets it), the release lives in
``$VIGIL_TEST_SHARED/release`` instead: the first process to ask builds it there while holding an
exclusive lock on ``release.lock``; the other waits on the lock and reads what was built. The
description of a finished build (``release.json``) is written last, by rename, so a build killed
half-way is never taken for a release: the next one to ask starts it again from an empty
directory. A build that failed is recorded (``release.failed``) and the other lane fails at once
with its reason instead of spending minutes failing the same way.

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

from tests.helpers.release import Release, build_release

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


def shared_release(
    root: Path,
    cache: Path,
    *,
    channel: str = "debian",
    version: int = 1,
    build: Callable[..., Release] = build_release,
) -> Release:
    """The release under ROOT: built here (by BUILD) if no process has built it yet, else the one built."""
    root.mkdir(parents=True, exist_ok=True)
    done, failed, tree = root / "release.json", root / "release.failed", root / "release"
    with open(root / "release.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other lane building: wait for it
        if done.exists():
            rel = _from_json(done.read_text())
            if not rel.bundle.is_file():
                raise SharedBuildFailed(f"{done}: names {rel.bundle}, which is gone")
            return rel
        if failed.exists():
            raise SharedBuildFailed(f"the release build failed in the other lane: {failed.read_text()}")
        shutil.rmtree(tree, ignore_errors=True)  # what a killed build left
        tree.mkdir()
        try:
            rel = build(tree, cache, channel=channel, version=version)
        except BaseException as exc:  # pytest.fail() raises a BaseException
            failed.write_text(f"{type(exc).__name__}: {exc}"[-4000:])
            raise
        staged = root / "release.json.new"
        staged.write_text(_to_json(rel) + "\n")
        staged.rename(done)
        return rel


class Prefetch:
    """Build the shared release in a thread, so a lane that has other things to do first (the lab
    boots its hosts) does not wait for it afterwards; ``result()`` waits and returns it (or raises
    what the build raised)."""

    def __init__(self, root: Path, cache: Path) -> None:
        self._out: list[Release] = []
        self._err: list[BaseException] = []

        def run() -> None:
            try:
                self._out.append(shared_release(root, cache))
            except BaseException as exc:
                self._err.append(exc)

        self._thread = threading.Thread(target=run, name="release-prefetch", daemon=True)
        self._thread.start()

    def result(self) -> Release:
        self._thread.join()
        if self._err:
            raise self._err[0]
        return self._out[0]
