"""A role's fingerprint on a host (roles/_common/library/vigil_fingerprint.py); the run's key is
tests/unit/deploy/test_fingerprint_key.py's.

A rerun lets a role end at once only where the host is as the role's last whole run left it and the
run's inputs are the same: every kind of drift is a difference, named; a difference removes the
role's fingerprint before the role runs; a fingerprints file an attacker prepared (a link, another
owner's, too large, the wrong shape, commands of its own) matches nothing and runs nothing.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.facts_helpers import load_module
from tests.unit.roles.rendering import ROLES

fp = load_module(ROLES / "_common" / "library" / "vigil_fingerprint.py")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners are set and measured as root")

KEY = "a" * 64
OTHER = "b" * 64


def layout(tmp: Path) -> dict[str, Any]:
    """A role's files: an install tree with a version and its link, a config file, a data directory."""
    home = tmp / "opt" / "thing"
    (home / "1.0").mkdir(parents=True)
    (home / "1.0" / "thing").write_bytes(b"\x7fELF binary")
    os.chmod(home / "1.0" / "thing", 0o755)
    (home / "current").symlink_to("1.0")
    conf = tmp / "etc" / "thing.yml"
    conf.parent.mkdir()
    conf.write_text("listen: 9100\n")
    os.chmod(conf, 0o640)
    data = tmp / "var" / "thing"
    data.mkdir(parents=True)
    (data / "samples").write_text("changes all the time\n")
    probe = tmp / "probe.txt"
    probe.write_text("rules: 3\n")
    return {
        "spec": {
            "trees": [str(home)],
            "paths": [str(conf), str(data)],
            "users": ["root"],
            "groups": ["root"],
        },
        "commands": [["/bin/cat", str(probe)]],
        "home": home,
        "conf": conf,
        "data": data,
        "probe": probe,
    }


def record(path: Path, lay: dict[str, Any], key: str = KEY) -> None:
    fp.record(str(path), key, {"thing": {**lay["spec"], "commands": lay["commands"]}}, True)


def check(path: Path, lay: dict[str, Any], key: str = KEY, write: bool = True) -> tuple[bool, str, bool]:
    return fp.check(str(path), "thing", key, lay["commands"], write)


def test_a_host_as_the_last_run_left_it_matches_and_its_data_may_change(tmp_path: Path) -> None:
    lay, store = layout(tmp_path), tmp_path / "fingerprints.json"
    record(store, lay)
    st = store.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    (lay["data"] / "samples").write_text("new samples\n")  # a data directory is measured alone
    assert check(store, lay) == (True, "", False)
    mtime = store.stat().st_mtime_ns
    record(store, lay)  # the same fingerprint again: nothing written
    assert store.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".fingerprints")) == []


def _edit(lay: dict[str, Any]) -> None:
    lay["conf"].write_text("listen: 9101\n")


def _same_size(lay: dict[str, Any]) -> None:
    lay["conf"].write_text("listen: 9199\n")
    os.utime(lay["conf"], (0, 0))


DRIFTS = {
    "a file edited": (_edit, "path {conf}"),
    "the same size, an old mtime": (_same_size, "path {conf}"),
    "a mode": (lambda lay: os.chmod(lay["conf"], 0o644), "path {conf}"),
    "an owner": (lambda lay: os.chown(lay["conf"], 1, 0), "path {conf}"),
    "a file removed": (lambda lay: lay["conf"].unlink(), "path {conf}: file 0640 0:0"),
    "a binary replaced": (
        lambda lay: (lay["home"] / "1.0" / "thing").write_bytes(b"other"),
        "tree {home}/1.0/thing",
    ),
    "a file added to a tree": (
        lambda lay: (lay["home"] / "1.0" / "extra").write_text("x"),
        "tree {home}/1.0/extra",
    ),
    "a link retargeted": (
        lambda lay: ((lay["home"] / "current").unlink(), (lay["home"] / "current").symlink_to("0.9")),
        "tree {home}/current: link -> 1.0 -> link -> 0.9",
    ),
    "a directory's mode": (lambda lay: os.chmod(lay["data"], 0o777), "path {data}"),
    "a probe's output": (lambda lay: lay["probe"].write_text("rules: 0\n"), "command "),
}


@pytest.mark.parametrize("drift", list(DRIFTS))
def test_every_kind_of_drift_is_a_difference_that_removes_the_fingerprint(tmp_path: Path, drift: str) -> None:
    lay, store = layout(tmp_path), tmp_path / "fingerprints.json"
    record(store, lay)
    change, reason = DRIFTS[drift]
    change(lay)
    # check mode: the difference, and the fingerprint left as it was
    match, why, forgot = check(store, lay, write=False)
    assert (match, forgot) == (False, False)
    assert why.startswith(reason.format(**{k: v for k, v in lay.items() if isinstance(v, Path)})), why
    assert "thing" in json.loads(store.read_text())["roles"]
    match, why2, forgot = check(store, lay)
    assert (match, why2, forgot) == (False, why, True)
    assert json.loads(store.read_text())["roles"] == {}  # a run that fails now leaves nothing to match
    assert check(store, lay)[:2] == (False, "no fingerprint of this role")


def test_other_inputs_or_other_probes_are_a_difference(tmp_path: Path) -> None:
    lay, store = layout(tmp_path), tmp_path / "fingerprints.json"
    record(store, lay)
    assert check(store, lay, key=OTHER)[:2] == (
        False,
        "the run's inputs differ (bundle, roles, inventory or secrets)",
    )
    record(store, lay)
    lay["commands"] = [["/bin/cat", str(lay["conf"])]]
    assert check(store, lay)[:2] == (False, "the role's probes differ")


def test_users_groups_and_packages_are_measured(tmp_path: Path) -> None:
    state = fp.measure(
        fp.check_spec(
            {
                "users": ["root", "no-such-user"],
                "groups": ["no-such-group"],
                "packages": ["bash", "no-such-pkg"],
            },
            "t",
        ),
        [],
    )
    assert state["users"]["no-such-user"] == "missing"
    assert state["users"]["root"].startswith("0:0(root) /root ")
    assert state["groups"]["no-such-group"] == "missing"
    assert state["packages"]["bash"].endswith(" ii")
    assert state["packages"]["no-such-pkg"] == "not installed"


def test_a_tree_is_measured_without_following_links_or_opening_fifos(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not to be read")
    top = tmp_path / "tree"
    top.mkdir()
    (top / "to-secret").symlink_to(secret)
    (top / "loop").symlink_to(top)
    os.mkfifo(top / "fifo")
    out: dict[str, str] = {}
    fp.tree(str(top), out, 100)
    assert out[str(top / "to-secret")] == f"link -> {secret}"
    assert out[str(top / "loop")] == f"link -> {top}"
    assert out[str(top / "fifo")].startswith("other ")
    assert str(secret) not in out
    many: dict[str, str] = {}
    for i in range(5):
        (top / f"f{i}").write_text("x")
    fp.tree(str(top), many, 3)
    assert "too many files to measure" in many.values()


def _hostile(store: Path, tmp: Path, kind: str) -> Path | None:
    """Prepare the fingerprints file as an attacker would; return a file that must stay untouched."""
    victim = tmp / "victim"
    victim.write_text("keep me\n")
    if kind == "a link to another file":
        store.symlink_to(victim)
        return victim
    if kind == "a directory":
        store.mkdir()
        return None
    if kind == "another owner's file":
        store.write_text(json.dumps({"format": 1, "roles": {}}))
        os.chown(store, 1, 1)
        os.chmod(store, 0o600)
    elif kind == "a file others may read":
        store.write_text(json.dumps({"format": 1, "roles": {}}))
        os.chmod(store, 0o644)
    else:
        docs = {
            "not JSON": "{",
            "too large": " " * (fp.MAX_BYTES + 1),
            "a list": "[]",
            "a relative path": json.dumps(
                {"format": 1, "roles": {"thing": {"key": KEY, "spec": {"paths": ["etc/x"]}, "state": {}}}}
            ),
            "a unit name with a space": json.dumps(
                {"format": 1, "roles": {"thing": {"key": KEY, "spec": {"units": ["a b"]}, "state": {}}}}
            ),
        }
        store.write_text(docs[kind])
        os.chmod(store, 0o600)
    return None


HOSTILE = [
    "a link to another file",
    "a directory",
    "another owner's file",
    "a file others may read",
    "not JSON",
    "too large",
    "a list",
    "a relative path",
    "a unit name with a space",
]


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_prepared_fingerprints_file_matches_nothing_and_the_next_record_replaces_it(
    tmp_path: Path, kind: str
) -> None:
    lay, store = layout(tmp_path), tmp_path / "fingerprints.json"
    victim = _hostile(store, tmp_path, kind)
    match, reason, _ = check(store, lay)
    assert not match and reason.startswith(f"{store}: "), reason
    if kind == "a directory":
        with pytest.raises(OSError):
            record(store, lay)
        return
    record(store, lay)
    st = store.lstat()
    assert stat.S_ISREG(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    assert check(store, lay) == (True, "", False)
    if victim is not None:
        assert victim.read_text() == "keep me\n"


def test_the_commands_run_are_the_tasks_never_the_files(tmp_path: Path) -> None:
    lay, store = layout(tmp_path), tmp_path / "fingerprints.json"
    marker = tmp_path / "ran"
    record(store, lay)
    doc = json.loads(store.read_text())
    doc["roles"]["thing"]["command_list"] = [["/usr/bin/touch", str(marker)]]
    store.write_text(json.dumps(doc))
    assert check(store, lay)[:2] == (False, "the role's probes differ")
    assert not marker.exists()
    with pytest.raises(fp.Unusable, match="absolute path"):
        fp.check_commands([["touch", str(marker)]], "role thing")
