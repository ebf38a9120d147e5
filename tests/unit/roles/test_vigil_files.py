"""The `_common` entry point `files` and its module (roles/_common/library/vigil_files.py).

A rerun writes nothing where the host holds each file as the role has it, and puts back every way a
host can differ from that; a path an attacker prepared (a link at the file's path, a directory, a
FIFO) is replaced or refused, never written through.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.facts_helpers import load_module
from tests.unit.roles.rendering import ROLES, run_playbook

MODULE = ROLES / "_common" / "library" / "vigil_files.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners are set and checked as root")

vf = load_module(MODULE)


def params(tmp: Path) -> dict[str, Any]:
    return {
        "directories": [
            {"path": str(tmp / "etc" / "thing"), "owner": "root", "group": "daemon", "mode": "0750"},
        ],
        "files": [
            {
                "path": str(tmp / "etc" / "thing" / "thing.conf"),
                "content": "listen: 9100\n",
                "owner": "root",
                "group": "daemon",
                "mode": "0640",
            },
            {
                "path": str(tmp / "etc" / "thing" / "server.key"),
                "content": "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n",
                "owner": "daemon",
                "group": "root",
                "mode": "0600",
            },
        ],
    }


def changed(results: list[dict[str, Any]]) -> dict[str, str]:
    return {Path(r["path"]).name: r["reason"] for r in results if r["changed"]}


def test_first_run_writes_everything_then_a_rerun_writes_nothing(tmp_path: Path) -> None:
    p = params(tmp_path)
    first = changed(vf.apply(p, False))
    assert first == {"thing": "missing", "thing.conf": "missing", "server.key": "missing"}
    conf = tmp_path / "etc" / "thing" / "thing.conf"
    st = conf.stat()
    assert conf.read_text() == "listen: 9100\n"
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 1, 0o640)
    key = (tmp_path / "etc" / "thing" / "server.key").stat()
    assert (key.st_uid, key.st_gid, stat.S_IMODE(key.st_mode)) == (1, 0, 0o600)
    d = (tmp_path / "etc" / "thing").stat()
    assert (d.st_uid, d.st_gid, stat.S_IMODE(d.st_mode)) == (0, 1, 0o750)
    mtime = conf.stat().st_mtime_ns
    assert changed(vf.apply(p, False)) == {}
    assert conf.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in conf.parent.iterdir()) == ["server.key", "thing.conf"]  # no temp left


@pytest.mark.parametrize(
    ("drift", "reason"),
    [
        ("content edited", "content"),
        ("content same size", "content"),
        ("content appended", "content"),
        ("emptied", "content"),
        ("mode", "mode"),
        ("owner", "owner"),
        ("group", "owner"),
        ("removed", "missing"),
        ("link to an identical file", "not a regular file"),
        ("fifo", "not a regular file"),
    ],
)
def test_every_drift_is_put_back(tmp_path: Path, drift: str, reason: str) -> None:
    p = params(tmp_path)
    vf.apply(p, False)
    conf = tmp_path / "etc" / "thing" / "thing.conf"
    if drift == "content edited":
        conf.write_text("listen: 9999\n# local edit\n")
    elif drift == "content same size":
        conf.write_text("listen: 9101\n")
    elif drift == "content appended":
        with conf.open("a") as f:
            f.write("x")
    elif drift == "emptied":
        conf.write_text("")
    elif drift == "mode":
        conf.chmod(0o644)
    elif drift == "owner":
        os.chown(conf, 1, -1)
    elif drift == "group":
        os.chown(conf, -1, 0)
    elif drift == "removed":
        conf.unlink()
    elif drift == "link to an identical file":
        twin = tmp_path / "twin"
        twin.write_text("listen: 9100\n")
        os.chown(twin, 0, 1)
        twin.chmod(0o640)
        conf.unlink()
        conf.symlink_to(twin)
    elif drift == "fifo":
        conf.unlink()
        os.mkfifo(conf)
    # check mode names it and writes nothing
    before = os.lstat(conf) if os.path.lexists(conf) else None
    assert changed(vf.apply(p, True)) == {"thing.conf": reason}
    after = os.lstat(conf) if os.path.lexists(conf) else None
    assert (before and (before.st_ino, before.st_mode, before.st_uid, before.st_gid)) == (
        after and (after.st_ino, after.st_mode, after.st_uid, after.st_gid)
    )
    # a run puts it back, and the next finds nothing
    assert changed(vf.apply(p, False)) == {"thing.conf": reason}
    st = os.lstat(conf)
    assert stat.S_ISREG(st.st_mode) and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 1, 0o640)
    assert conf.read_text() == "listen: 9100\n"
    assert changed(vf.apply(p, False)) == {}


def test_a_link_planted_at_the_path_is_replaced_and_its_target_untouched(tmp_path: Path) -> None:
    p = params(tmp_path)
    (tmp_path / "etc" / "thing").mkdir(parents=True)
    victim = tmp_path / "shadow"
    victim.write_text("root:x:0:0\n")
    victim.chmod(0o600)
    key = tmp_path / "etc" / "thing" / "server.key"
    key.symlink_to(victim)
    vf.apply(p, False)
    assert victim.read_text() == "root:x:0:0\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert victim.stat().st_uid == 0
    assert not key.is_symlink() and key.read_text().startswith("-----BEGIN PRIVATE KEY-----")


def test_a_dangling_link_is_replaced_not_followed(tmp_path: Path) -> None:
    p = params(tmp_path)
    (tmp_path / "etc" / "thing").mkdir(parents=True)
    conf = tmp_path / "etc" / "thing" / "thing.conf"
    conf.symlink_to(tmp_path / "created-through-the-link")
    vf.apply(p, False)
    assert not (tmp_path / "created-through-the-link").exists()
    assert not conf.is_symlink() and conf.read_text() == "listen: 9100\n"


def test_a_directory_at_a_files_path_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    p = params(tmp_path)
    conf = tmp_path / "etc" / "thing" / "thing.conf"
    conf.mkdir(parents=True)
    (conf / "keep").write_text("operator's\n")
    with pytest.raises(vf.Refused, match=r"thing\.conf: is a directory$"):
        vf.apply(p, False)
    assert (conf / "keep").read_text() == "operator's\n"


def test_a_file_at_a_directorys_path_is_refused(tmp_path: Path) -> None:
    p = params(tmp_path)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "thing").write_text("not a directory\n")
    with pytest.raises(vf.Refused, match=r"etc/thing: exists and is not a directory$"):
        vf.apply(p, False)
    assert (tmp_path / "etc" / "thing").read_text() == "not a directory\n"


def test_a_link_to_a_directory_is_followed_as_the_file_module_does(tmp_path: Path) -> None:
    p = params(tmp_path)
    real = tmp_path / "data" / "thing"
    real.mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "thing").symlink_to(real)
    vf.apply(p, False)
    assert (real / "thing.conf").read_text() == "listen: 9100\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o750 and real.stat().st_gid == 1
    assert changed(vf.apply(p, False)) == {}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("owner", "no-such-user-here", "no user 'no-such-user-here' on this host"),
        ("group", "no-such-group-here", "no group 'no-such-group-here' on this host"),
        ("mode", "rw-r--r--", "mode 'rw-r--r--' is not an octal mode"),
        ("mode", "17777", "mode '17777' is out of range"),
        ("path", "relative/thing.conf", "'relative/thing.conf': not an absolute path"),
    ],
)
def test_bad_parameters_are_refused_naming_the_path_before_anything_is_written(
    tmp_path: Path, field: str, value: str, message: str
) -> None:
    p = params(tmp_path)
    p["files"] = [{**p["files"][0], field: value}]
    p["directories"] = []
    (tmp_path / "etc" / "thing").mkdir(parents=True)
    with pytest.raises(vf.Refused) as err:
        vf.apply(p, False)
    assert str(err.value).endswith(message)
    assert list((tmp_path / "etc" / "thing").iterdir()) == []


def test_specs_and_results_pair_one_to_one_or_raise() -> None:
    """What zip(strict=True) checked, by hand for the hosts' 3.9: lists of two lengths never pair."""
    assert list(vf._pairs([1, 2], ["a", "b"])) == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError, match="2 items against 1"):
        vf._pairs([1, 2], ["a"])


def test_a_checker_sees_the_staged_file_beside_the_path_with_its_owner_and_mode(tmp_path: Path) -> None:
    """The checker runs on the new content before it is in place: a file beside the path, with the
    owner and mode it will have, not the path itself (which still holds the old content)."""
    p = params(tmp_path)
    seen = tmp_path / "seen"
    checker = tmp_path / "checker.py"
    checker.write_text(
        "import os, sys\n"
        "s = os.stat(sys.argv[1])\n"
        f"with open({str(seen)!r}, 'a') as out:\n"
        "    seen = (sys.argv[1], oct(s.st_mode & 0o7777), s.st_gid, open(sys.argv[1]).read())\n"
        "    out.write(repr(seen) + chr(10))\n"
    )
    p["files"][0]["validate"] = f"/usr/bin/python3 -I {checker} %s"
    conf = tmp_path / "etc" / "thing" / "thing.conf"
    assert changed(vf.apply(p, False))["thing.conf"] == "missing"
    ((staged, mode, gid, text),) = [ast.literal_eval(line) for line in seen.read_text().splitlines()]
    assert Path(staged).parent == conf.parent and Path(staged).name.startswith(".thing.conf.")
    assert (mode, gid, text) == ("0o640", 1, "listen: 9100\n")
    assert not Path(staged).exists()
    assert changed(vf.apply(p, False)) == {}  # in place: the checker does not run again
    assert len(seen.read_text().splitlines()) == 1
    conf.write_text("listen: 9101\n")
    assert changed(vf.apply(p, True)) == {"thing.conf": "content"}  # check mode: no checker either
    assert len(seen.read_text().splitlines()) == 1
    assert conf.read_text() == "listen: 9101\n"
    assert changed(vf.apply(p, False)) == {"thing.conf": "content"}
    assert len(seen.read_text().splitlines()) == 2 and conf.read_text() == "listen: 9100\n"


def test_a_refused_file_leaves_every_file_of_the_call_as_it_was(tmp_path: Path) -> None:
    """Both files differ; the second's checker refuses: the first is not written either, no staged
    file is left, and the message names the refused file and the checker's last line."""
    p = params(tmp_path)
    vf.apply(p, False)
    conf = tmp_path / "etc" / "thing" / "thing.conf"
    key = tmp_path / "etc" / "thing" / "server.key"
    p["files"][0]["content"] = "listen: 9200\n"
    p["files"][1]["content"] = "not a key\n"
    p["files"][1]["validate"] = (
        "/usr/bin/python3 -I -c 'import sys; sys.exit(\"line one\\nno PEM block in \" + sys.argv[1])' %s"
    )
    with pytest.raises(vf.Refused) as err:
        vf.apply(p, False)
    refused = f"{key}: refused by /usr/bin/python3: no PEM block in {key.parent}/.server.key."
    assert str(err.value).startswith(refused)
    assert conf.read_text() == "listen: 9100\n"
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert sorted(x.name for x in conf.parent.iterdir()) == ["server.key", "thing.conf"]


def test_a_checker_that_cannot_run_refuses(tmp_path: Path) -> None:
    p = params(tmp_path)
    p["files"][0]["validate"] = "/nonexistent/checker %s"
    with pytest.raises(vf.Refused) as err:
        vf.apply(p, False)
    assert "thing.conf: checker /nonexistent/checker could not run" in str(err.value)
    assert sorted(x.name for x in (tmp_path / "etc" / "thing").iterdir()) == []


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("/usr/bin/true", "does not name the file (%s)"),
        ("/usr/bin/test -s '%s", "cannot be read: No closing quotation"),
    ],
)
def test_a_checker_command_that_cannot_check_is_refused(tmp_path: Path, command: str, message: str) -> None:
    p = params(tmp_path)
    p["files"][0]["validate"] = command
    with pytest.raises(vf.Refused) as err:
        vf.apply(p, False)
    assert str(err.value).endswith(message)
    assert sorted(x.name for x in (tmp_path / "etc" / "thing").iterdir()) == []


def test_through_ansible_check_mode_names_the_paths_and_the_key_never_shows(tmp_path: Path) -> None:
    """The entry point as the roles call it: the run's output names the changed paths (deploy's
    --check reads them from `results`), and the key's text is in no output."""
    target = tmp_path / "target"
    target.mkdir()
    secret = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIK9only-in-the-key\n"
    secret += "-----END PRIVATE KEY-----\n"
    # the module's `#!/usr/bin/python3` makes Ansible take ansible_python3_interpreter for it
    python = {"ansible_python_interpreter": sys.executable, "ansible_python3_interpreter": sys.executable}
    local = {"ansible_connection": "local", **python}
    play = [
        {
            "name": "files",
            "hosts": "mon01",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "The entry point",
                    "ansible.builtin.import_role": {"name": "_common", "tasks_from": "files"},
                    "vars": {
                        "_common_role": "thing",
                        "_common_files_what": "TLS material",
                        "_common_files_dirs": [{"path": str(target / "tls"), "mode": "0755"}],
                        "_common_files": [
                            {"path": str(target / "tls" / "server.key"), "content": secret, "mode": "0600"}
                        ],
                    },
                },
                {"name": "Show", "ansible.builtin.debug": {"var": "__common_files_result"}},
            ],
        }
    ]
    inventory = {"all": {"hosts": {"mon01": local}}}
    out = []
    for check in (True, False, False):
        (tmp_path / "run").mkdir(exist_ok=True)
        args = ["--check"] if check else []
        res = run_playbook(tmp_path / "run", play, inventory, {}, extra_args=args)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
        assert "only-in-the-key" not in res.stdout + res.stderr
        out.append(res.stdout)
        if check:
            assert not (target / "tls").exists()
    assert "changed=1" in out[0] and str(target / "tls" / "server.key") in out[0]
    assert "changed=1" in out[1] and "changed=0" in out[2]
    assert (target / "tls" / "server.key").read_text() == secret
    assert json.dumps(secret) not in out[1]
