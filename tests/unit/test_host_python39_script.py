"""scripts/host_python39.py trusts a prepared interpreter only when it is whole, and never through a link.

The interpreter is made once, as root, in a cache folder, and later runs reuse it. Here its making
is a stand-in (a small folder, sealed by the script's own MANIFEST and READY): what is checked is
what the script does with the folder it finds. The real making is tests/integration/test_host_python39.py's.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.host_python import PREPARE


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("host_python39_under_test", PREPARE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hp = load()


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The stages the stand-in made (it replaces the download, unpacking and checks)."""
    stages: list[Path] = []

    def make(stage: Path, arch: str, digest: str) -> None:
        stages.append(stage)
        (stage / "usr" / "lib").mkdir(parents=True)
        (stage / "usr" / "lib" / "os.py").write_text("sep = '/'\n")
        (stage / "usr" / "lib" / "posixpath.py").symlink_to("os.py")
        (stage / "python3.9").write_text("#!/bin/sh\n")
        (stage / "python3.9").chmod(0o755)
        hp.seal(stage, digest)

    monkeypatch.setattr(hp, "make", make)
    return stages


def prepare(cache: Path) -> Path:
    return Path(hp.prepare(cache, arch="amd64"))


def entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir())


def test_made_once_then_found_whole(
    tmp_path: Path, made: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    launcher = prepare(cache)
    assert launcher == cache / "python3.9" / "python3.9" and launcher.is_file()
    assert prepare(cache) == launcher
    assert len(made) == 1
    assert entries(cache) == [".python3.9.lock", "python3.9"]  # no stage left
    assert (cache / "python3.9" / "READY").read_text() == hp.recipe("amd64") + "\n"
    assert capsys.readouterr().err == ""


def test_a_link_planted_at_its_path_is_refused_and_what_it_points_to_is_untouched(
    tmp_path: Path, made: list[Path]
) -> None:
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    cache.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("keep me\n")
    (cache / "python3.9").symlink_to(elsewhere)
    with pytest.raises(hp.Refused, match="python3.9: is a symbolic link"):
        prepare(cache)
    assert made == [] and (cache / "python3.9").is_symlink()
    assert (
        sorted(p.name for p in elsewhere.iterdir()) == ["keep"]
        and (elsewhere / "keep").read_text() == "keep me\n"
    )


def test_a_cache_folder_that_is_a_link_is_refused(tmp_path: Path, made: list[Path]) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "real")
    with pytest.raises(hp.Refused, match="cache: is a symbolic link"):
        prepare(tmp_path / "cache")
    assert made == [] and list((tmp_path / "real").iterdir()) == []


def test_a_cache_folder_others_may_write_to_is_refused_unless_sticky(
    tmp_path: Path, made: list[Path]
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(hp.Refused, match="others may write to it"):
        prepare(cache)
    assert made == []
    cache.chmod(0o1777)  # as /tmp: others cannot rename or remove what this user made there
    assert prepare(cache).is_file()


def damage_content(d: Path) -> None:
    (d / "usr" / "lib" / "os.py").write_text("sep = '\\\\'\n")


def damage_extra_file(d: Path) -> None:
    (d / "usr" / "lib" / "__pycache__").mkdir()
    (d / "usr" / "lib" / "__pycache__" / "os.cpython-39.pyc").write_bytes(b"\0")


def damage_missing_file(d: Path) -> None:
    (d / "usr" / "lib" / "os.py").unlink()


def damage_mode(d: Path) -> None:
    (d / "python3.9").chmod(0o777)


def damage_link(d: Path) -> None:
    (d / "usr" / "lib" / "posixpath.py").unlink()
    (d / "usr" / "lib" / "posixpath.py").symlink_to("/etc/passwd")


def damage_no_ready(d: Path) -> None:
    (d / "READY").unlink()  # as a copy made by hand, or cut short before its last file


def damage_ready_link(d: Path) -> None:
    ready = (d / "READY").read_text()
    (d / "READY").unlink()
    (d.parent / "planted").write_text(ready)
    (d / "READY").symlink_to(d.parent / "planted")


def damage_recipe(d: Path) -> None:
    (d / "READY").write_text("0" * 64 + "\n")


def damage_manifest(d: Path) -> None:
    (d / "MANIFEST").write_text("")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (damage_content, "damaged: usr/lib/os.py differs from MANIFEST"),
        (damage_extra_file, "damaged: usr/lib/__pycache__ differs from MANIFEST"),
        (damage_missing_file, "damaged: usr/lib/os.py differs from MANIFEST"),
        (damage_mode, "damaged: python3.9 differs from MANIFEST"),
        (damage_link, "damaged: usr/lib/posixpath.py differs from MANIFEST"),
        (damage_no_ready, "no READY marker: an unfinished or damaged copy"),
        (damage_ready_link, "no READY marker"),
        (damage_recipe, "made from another recipe"),
        (damage_manifest, "damaged:"),
    ],
    ids=lambda v: v.__name__.removeprefix("damage_") if callable(v) else "",
)
def test_a_copy_that_is_not_whole_is_said_and_made_again(
    tmp_path: Path,
    made: list[Path],
    capsys: pytest.CaptureFixture[str],
    damage: Callable[[Path], None],
    said: str,
) -> None:
    cache = tmp_path / "cache"
    launcher = prepare(cache)
    damage(cache / "python3.9")
    assert said in hp.inspect(cache / "python3.9", hp.recipe("amd64"))
    capsys.readouterr()
    assert prepare(cache) == launcher and len(made) == 2
    assert f"{cache / 'python3.9'}: {said}" in capsys.readouterr().err
    assert hp.inspect(cache / "python3.9", hp.recipe("amd64")) == ""
    assert set(entries(cache)) - {"planted"} == {".python3.9.lock", "python3.9"}


def test_a_failed_make_leaves_no_stage_and_nothing_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def make(stage: Path, arch: str, digest: str) -> None:
        (stage / "half").write_text("written before the failure\n")
        raise hp.VigilError("apt-get download", "E: Unable to locate package python3.9-minimal")

    monkeypatch.setattr(hp, "make", make)
    cache = tmp_path / "cache"
    with pytest.raises(hp.VigilError, match="Unable to locate"):
        prepare(cache)
    assert entries(cache) == [".python3.9.lock"]


def test_stages_an_interrupted_run_left_are_removed(tmp_path: Path, made: list[Path]) -> None:
    cache = tmp_path / "cache"
    (cache / ".python3.9.stage-x1" / "usr").mkdir(parents=True)
    (cache / ".python3.9.old-x2").mkdir()
    prepare(cache)
    assert entries(cache) == [".python3.9.lock", "python3.9"]


def test_links_out_of_the_folder_are_removed_and_those_inside_kept(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "usr" / "lib" / "a.py").write_text("")
    (root / "usr" / "lib" / "inside").symlink_to("a.py")
    (root / "usr" / "lib" / "absolute").symlink_to("/etc/python3.9/sitecustomize.py")
    (root / "usr" / "lib" / "up").symlink_to("../../../elsewhere")
    hp._unlink_escaping_links(root)
    assert sorted(os.listdir(root / "usr" / "lib")) == ["a.py", "inside"]
