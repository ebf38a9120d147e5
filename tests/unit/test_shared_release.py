"""The release both lanes of `make test` share (tests/helpers/shared.py): built once under a lock,
never taken half-built, a failure reported to the other lane instead of repeated."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.helpers.release import Release
from tests.helpers.shared import SharedBuildFailed, shared_bundle, shared_release


class FakeBuild:
    """Stands in for the minutes-long bundle build: writes a bundle file, counts its calls."""

    def __init__(self, seconds: float = 0.0, fail: bool = False) -> None:
        self.calls = 0
        self.seconds, self.fail = seconds, fail

    def __call__(self, tmp: Path, cache: Path, *, channel: str, version: int) -> Release:
        self.calls += 1
        time.sleep(self.seconds)
        if self.fail:
            raise RuntimeError("vigil bundle build exited 1: no space left")
        (tmp / "out").mkdir()
        bundle = tmp / "out" / f"vigil-{version}-amd64.bundle"
        bundle.write_bytes(b"bundle")
        return Release(
            tmp=tmp,
            key=tmp / "release.key",
            pub=tmp / "release.pub",
            trust=tmp / "trust.json",
            bundle=bundle,
            channel=channel,
            version=version,
            build_env={"VIGIL_CACHE": str(cache), "SOURCE_DATE_EPOCH": "1"},
        )


def test_two_lanes_asking_at_once_build_once_and_get_the_same_release(tmp_path: Path) -> None:
    build = FakeBuild(seconds=0.5)
    got: list[Release] = []
    threads = [
        threading.Thread(target=lambda: got.append(shared_release(tmp_path, tmp_path / "c", build=build)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert build.calls == 1
    assert len(got) == 2 and got[0] == got[1]
    assert got[0].bundle == tmp_path / "release" / "out" / "vigil-1-amd64.bundle"
    # and a third, later: read from release.json, not built again
    assert shared_release(tmp_path, tmp_path / "c", build=build) == got[0] and build.calls == 1


def test_a_build_killed_half_way_is_started_again_from_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "release" / "out").mkdir(parents=True)
    (tmp_path / "release" / "out" / "vigil-1-amd64.bundle").write_bytes(b"half")
    (tmp_path / "release.json.new").write_text("{")  # the description never renamed into place
    build = FakeBuild()
    rel = shared_release(tmp_path, tmp_path / "c", build=build)
    assert build.calls == 1 and rel.bundle.read_bytes() == b"bundle"


def test_a_failed_build_fails_the_other_lane_at_once_with_its_reason(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no space left"):
        shared_release(tmp_path, tmp_path / "c", build=FakeBuild(fail=True))
    again = FakeBuild()
    with pytest.raises(SharedBuildFailed, match="failed in the other lane: RuntimeError: vigil bundle build"):
        shared_release(tmp_path, tmp_path / "c", build=again)
    assert again.calls == 0


def test_a_description_naming_a_bundle_that_is_gone_is_refused(tmp_path: Path) -> None:
    rel = shared_release(tmp_path, tmp_path / "c", build=FakeBuild())
    rel.bundle.unlink()
    with pytest.raises(SharedBuildFailed, match="which is gone"):
        shared_release(tmp_path, tmp_path / "c", build=FakeBuild())


def test_a_further_bundle_is_built_once_and_its_file_checked(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(tree: Path) -> Path:
        calls.append(tree)
        (tree / "vigil-2-amd64.bundle").write_bytes(b"next")
        return tree / "vigil-2-amd64.bundle"

    first = shared_bundle(tmp_path, "debian-next", build)
    assert (
        shared_bundle(tmp_path, "debian-next", build)
        == first
        == tmp_path / "debian-next" / "vigil-2-amd64.bundle"
    )
    assert calls == [tmp_path / "debian-next"]
    first.unlink()
    with pytest.raises(SharedBuildFailed, match=r"debian-next\.json: names .*, which is gone"):
        shared_bundle(tmp_path, "debian-next", build)
