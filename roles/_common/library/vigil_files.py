#!/usr/bin/python3
"""Ansible module: put a role's small files and their directories in place, in one round trip.

A `copy` or `template` task costs one round trip per file (a loop, one per item) whether or not
the file changes; a rerun of a role with ten small files pays ten. The `_common` entry point
`files` renders the files on the controller (templates and lookups, as those tasks would) and
hands them all to this module, which compares each with the host's and writes only those that
differ:

- a directory is created where missing (its missing parents root's, 0755, as ``file`` does) and
  given its owner, group and mode; a link to a directory is followed, as ``file`` follows it;
- a file is in place when the path is a regular file (not a link) with exactly that content,
  owner, group and mode; anything else is a difference, and the file is written whole: a new file
  beside it (created exclusively, owner and mode set before a byte is written, flushed to disk),
  then renamed over the path. A link planted at the path is replaced, never followed; a directory
  at the path is refused.

A file may name a checker (``validate``: a command and its arguments, split as a shell would but
run without one, ``%s`` standing for the file): every differing file of the call is first staged
beside its path and each checker runs on its staged file; only when all are staged and every
checker passed are they renamed into place, so a refused file leaves all of the call's files as
they were. Check mode stages nothing and runs no checker, as ``copy`` does.

Check mode reports what would change and writes nothing. Contents are ``no_log``: they never
appear in results or logs (a host's key goes through here). Returns ``results``: one entry per
directory and file, with ``path``, ``changed`` and, when changed, ``reason``.
Runs on the hosts' own python3 (3.9 or newer), standard library only.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shlex
import stat
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: vigil_files
short_description: Put small files and their directories in place in one round trip, writing only what differs
options:
  directories:
    type: list
    elements: dict
    default: []
    options:
      path: {type: str, required: true}
      owner: {type: str, default: root}
      group: {type: str, default: root}
      mode: {type: str, required: true}
  files:
    type: list
    elements: dict
    default: []
    options:
      path: {type: str, required: true}
      content: {type: str, required: true, no_log: true}
      owner: {type: str, default: root}
      group: {type: str, default: root}
      mode: {type: str, required: true}
      validate: {type: str, default: ""}
"""


class Refused(Exception):
    """A path this module will not write (one line, naming it)."""


def _mode(path, value):
    text = str(value).strip()
    try:
        mode = int(text, 8)
    except ValueError:
        raise Refused(f"{path}: mode {value!r} is not an octal mode") from None
    if not 0 <= mode <= 0o7777:
        raise Refused(f"{path}: mode {value!r} is out of range")
    return mode


def _ids(path, owner, group):
    try:
        uid = pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise Refused(f"{path}: no user {owner!r} on this host") from None
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise Refused(f"{path}: no group {group!r} on this host") from None
    return uid, gid


def _absolute(path):
    if not os.path.isabs(path) or "\0" in path:
        raise Refused(f"{path!r}: not an absolute path")
    return os.path.normpath(path)


def directory(spec, check):
    """Make SPEC's directory as it says; returns the reason it changed, or "" when it was in place."""
    path = _absolute(spec["path"])
    mode = _mode(path, spec["mode"])
    uid, gid = _ids(path, spec["owner"], spec["group"])
    try:
        st = os.stat(path)  # a link to a directory is followed, as the file module does
    except FileNotFoundError:
        if not check:
            parent = os.path.dirname(path)
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
            os.mkdir(path, 0o700)
            os.chown(path, uid, gid)
            os.chmod(path, mode)
        return "missing"
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"{path}: exists and is not a directory")
    reasons = []
    if (st.st_uid, st.st_gid) != (uid, gid):
        reasons.append("owner")
    if stat.S_IMODE(st.st_mode) != mode:
        reasons.append("mode")
    if reasons and not check:
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    return ", ".join(reasons)


def _same_content(path, data, size):
    if size != len(data):
        return False
    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW)) as f:
        return f.read(len(data) + 1) == data


def _stage(path, data, uid, gid, mode):
    """A new file beside PATH with DATA, owner and mode set before a byte is written; its name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
    try:
        try:
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _check(path, command, staged):
    """Run COMMAND on the staged file of PATH; Refused with the checker's last line when it fails."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise Refused(f"{path}: checker {command!r} cannot be read: {exc}") from None
    if not any("%s" in arg for arg in argv):
        raise Refused(f"{path}: checker {command!r} does not name the file (%s)")
    argv = [arg.replace("%s", staged) for arg in argv]
    try:
        proc = subprocess.run(  # noqa: S603 - the role's own checker command, no shell
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Refused(f"{path}: checker {argv[0]} could not run: {exc}") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        last = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        raise Refused(f"{path}: refused by {argv[0]}: {last}")


def _sync_dir(parent):
    dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def regular_file(spec, check):
    """Compare SPEC's file with the host's: (path, data, uid, gid, mode, reason); reason "" when in place."""
    path = _absolute(spec["path"])
    mode = _mode(path, spec["mode"])
    uid, gid = _ids(path, spec["owner"], spec["group"])
    data = spec["content"].encode("utf-8")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is None:
        reason = "missing"
    elif stat.S_ISDIR(st.st_mode):
        raise Refused(f"{path}: is a directory")
    elif not stat.S_ISREG(st.st_mode):
        reason = "not a regular file"
    else:
        reasons = []
        if not _same_content(path, data, st.st_size):
            reasons.append("content")
        if (st.st_uid, st.st_gid) != (uid, gid):
            reasons.append("owner")
        if stat.S_IMODE(st.st_mode) != mode:
            reasons.append("mode")
        reason = ", ".join(reasons)
    if reason and not check and not os.path.isdir(os.path.dirname(path)):
        raise Refused(f"{path}: its directory does not exist")
    return path, data, uid, gid, mode, reason


def _pairs(first, second):
    """The items of FIRST and SECOND side by side; ValueError when their lengths differ (what
    ``zip(strict=True)`` checks, which the hosts' python3 3.9 does not have)."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} items against {len(second)}: one list per path expected")
    return zip(first, second)


def _put_files(specs, check):
    """Stage every differing file, run its checker, then rename them all; the reasons, in order."""
    found = [regular_file(spec, check) for spec in specs]
    if check:
        return [item[-1] for item in found]
    staged = []
    try:
        for spec, (path, data, uid, gid, mode, reason) in _pairs(specs, found):
            if not reason:
                continue
            tmp = _stage(path, data, uid, gid, mode)
            staged.append((tmp, path))
            if spec.get("validate"):
                _check(path, spec["validate"], tmp)
        while staged:
            tmp, path = staged[0]
            os.rename(tmp, path)  # over a link: the link is replaced, its target untouched
            staged.pop(0)
            _sync_dir(os.path.dirname(path))
    finally:
        for tmp, _path in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return [item[-1] for item in found]


def apply(params, check):
    """Every directory, then every file; the results, one per path, in order."""
    reasons = [directory(spec, check) for spec in params["directories"]]
    reasons += _put_files(params["files"], check)
    results = []
    for spec, reason in _pairs(params["directories"] + params["files"], reasons):
        result = {"path": spec["path"], "changed": bool(reason)}
        if reason:
            result["reason"] = reason
        results.append(result)
    return results


def main():
    dir_opts = {
        "path": {"type": "str", "required": True},
        "owner": {"type": "str", "default": "root"},
        "group": {"type": "str", "default": "root"},
        "mode": {"type": "str", "required": True},
    }
    file_opts = dict(
        dir_opts,
        content={"type": "str", "required": True, "no_log": True},
        validate={"type": "str", "default": ""},
    )
    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "list", "elements": "dict", "default": [], "options": dir_opts},
            "files": {"type": "list", "elements": "dict", "default": [], "options": file_opts},
        },
        supports_check_mode=True,
    )
    try:
        results = apply(module.params, module.check_mode)
    except Refused as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"{exc.filename or 'vigil_files'}: {exc.strerror or exc}")
    module.exit_json(changed=any(r["changed"] for r in results), results=results)


if __name__ == "__main__":
    main()
