"""The `_common` install entry point's one-round-trip check (roles/_common/library/vigil_install_state.py).

A rerun skips the install steps when this check says the host already holds exactly what they would
leave, so every way the host can differ from that must be a difference here: these tests take an
installed component as the steps leave it and change it the ways a host drifts.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.facts_helpers import load_module
from tests.unit.roles.rendering import ROLES

MODULE = ROLES / "_common" / "library" / "vigil_install_state.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners are checked against root's files")


vis = load_module(MODULE)


def installed(tmp: Path) -> dict[str, Any]:
    """A component as the install steps leave it, and the module's parameters for it."""
    home = tmp / "opt" / "thing"
    prefix = home / "1.0"
    (prefix / "bin").mkdir(parents=True)
    binary = prefix / "bin" / "thing"
    binary.write_bytes(b"\x7fELF the bundle's bytes")
    binary.chmod(0o755)
    for d in (home, prefix, prefix / "bin"):
        d.chmod(0o755)
    (home / "current").symlink_to("1.0")
    data, conf = tmp / "var" / "thing", tmp / "etc" / "thing"
    for d in (data, conf):
        d.mkdir(parents=True)
        d.chmod(0o750)
        os.chown(d, 1, 1)  # daemon:daemon
    os.chown(conf, 0, 1)
    return {
        "user": {
            "name": "daemon",
            "group": "daemon",
            "groups": [],
            "shell": "/usr/sbin/nologin",
            "home": "/usr/sbin",
            "comment": "daemon",
        },
        "directories": [{"path": str(data)}, {"path": str(conf), "owner": "root"}],
        "directory_defaults": {"owner": "daemon", "group": "daemon", "mode": "0750"},
        "version_dirs": [str(home), str(prefix), str(prefix / "bin")],
        "artifacts": {
            "bin/thing": {
                "sha256": hashlib.sha256(binary.read_bytes()).hexdigest(),
                "src": "/x",
                "mode": "0755",
            }
        },
        "tree": False,
        "link": {"path": str(home / "current"), "target": "1.0"},
        "home": str(home),
        "prefix": str(prefix),
        "keep_versions": 2,
    }


def test_a_component_as_the_steps_leave_it_is_in_sync(tmp_path: Path) -> None:
    assert vis.differences(installed(tmp_path)) == []


def _drift(tmp: Path, change: str) -> list[str]:
    params = installed(tmp)
    prefix, home = Path(params["prefix"]), Path(params["home"])
    binary = prefix / "bin" / "thing"
    if change == "binary edited":
        with binary.open("ab") as f:
            f.write(b"\0")
    elif change == "binary removed":
        binary.unlink()
    elif change == "binary replaced by a link":
        other = tmp / "elsewhere"
        other.write_bytes(binary.read_bytes())
        binary.unlink()
        binary.symlink_to(other)
    elif change == "binary mode":
        binary.chmod(0o775)
    elif change == "binary owner":
        os.chown(binary, 1, 0)
    elif change == "config dir mode":
        Path(params["directories"][1]["path"]).chmod(0o755)
    elif change == "data dir owner":
        os.chown(params["directories"][0]["path"], 0, 1)
    elif change == "data dir removed":
        Path(params["directories"][0]["path"]).rmdir()
    elif change == "data dir is a link":
        d = Path(params["directories"][0]["path"])
        d.rmdir()
        d.symlink_to(tmp)
    elif change == "version dir mode":
        prefix.chmod(0o700)
    elif change == "current link elsewhere":
        (home / "current").unlink()
        (home / "current").symlink_to("0.9")
    elif change == "current link removed":
        (home / "current").unlink()
    elif change == "one version too many":
        (home / "0.8").mkdir()
        (home / "0.9").mkdir()
    elif change == "bundle moved on":
        params["artifacts"]["bin/thing"]["sha256"] = "0" * 64
    elif change == "user shell":
        params["user"]["shell"] = "/bin/sh"
    elif change == "user home":
        params["user"]["home"] = "/var/lib/elsewhere"
    elif change == "user comment":
        params["user"]["comment"] = "vigil thing"
    elif change == "user missing":
        params["user"]["name"] = "vigil-no-such-user"
    elif change == "group missing":
        params["user"]["group"] = "vigil-no-such-group"
    elif change == "primary group":
        params["user"]["group"] = "adm"
    elif change == "extra group":
        params["user"]["groups"] = ["adm"]
    elif change == "symbolic mode":
        params["directory_defaults"]["mode"] = "u=rwx,g=rx"
    else:  # pragma: no cover
        raise AssertionError(change)
    return vis.differences(params)


@pytest.mark.parametrize(
    "change",
    [
        "binary edited",
        "binary removed",
        "binary replaced by a link",
        "binary mode",
        "binary owner",
        "config dir mode",
        "data dir owner",
        "data dir removed",
        "data dir is a link",
        "version dir mode",
        "current link elsewhere",
        "current link removed",
        "one version too many",
        "bundle moved on",
        "user shell",
        "user home",
        "user comment",
        "user missing",
        "group missing",
        "primary group",
        "extra group",
        "symbolic mode",
    ],
)
def test_every_drift_the_steps_would_put_back_is_a_difference(tmp_path: Path, change: str) -> None:
    found = _drift(tmp_path, change)
    assert found, change
    assert all(isinstance(line, str) and "\n" not in line for line in found)


def test_a_tree_component_is_checked_by_hash_only_as_its_steps_do(tmp_path: Path) -> None:
    params = installed(tmp_path)
    params["tree"] = True
    binary = Path(params["prefix"]) / "bin" / "thing"
    binary.chmod(0o700)  # the tree's unpack step does not set modes: no difference
    assert vis.differences(params) == []
    with binary.open("ab") as f:
        f.write(b"\0")
    assert any("sha256" in d for d in vis.differences(params))


def test_an_artifact_the_bundle_does_not_describe_is_a_difference(tmp_path: Path) -> None:
    params = installed(tmp_path)
    params["artifacts"]["bin/thing"] = "not a mapping"
    assert vis.differences(params) == ["bin/thing: not described by the bundle"]


def test_a_fifo_in_place_of_the_binary_is_not_opened(tmp_path: Path) -> None:
    """A named pipe where the binary was would block a reader forever; the check never opens it."""
    params = installed(tmp_path)
    binary = Path(params["prefix"]) / "bin" / "thing"
    binary.unlink()
    os.mkfifo(binary)
    assert any("not a regular file" in d for d in vis.differences(params))


def test_the_wheels_marker_must_name_the_bundles_sha256(tmp_path: Path) -> None:
    """The exporters wheel's steps skip their unpack when the tree's marker names the wheel's sha256;
    the check takes the same evidence, and nothing but a regular file holding it."""
    marker = tmp_path / ".vigil-wheel-sha256"
    params: dict[str, Any] = {"markers": {str(marker): "ab" * 32}}
    assert vis.differences(params) == [f"{marker}: No such file or directory"]
    marker.write_text("ab" * 32 + "\n")
    assert vis.differences(params) == []
    marker.write_text("cd" * 32 + "\n")
    assert vis.differences(params) == [f"{marker}: names another version"]
    marker.unlink()
    (tmp_path / "elsewhere").write_text("ab" * 32)
    marker.symlink_to(tmp_path / "elsewhere")
    assert vis.differences(params), "a link at the marker is never followed"
    marker.unlink()
    os.mkfifo(marker)
    assert vis.differences(params) == [f"{marker}: not a regular file"]
