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
import stat
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


def _write(path, data, uid, gid, mode):
    parent = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=parent)
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
        os.rename(tmp, path)  # over a link: the link is replaced, its target untouched
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def regular_file(spec, check):
    """Put SPEC's file in place; returns the reason it changed, or "" when it was in place."""
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
    if reason and not check:
        if not os.path.isdir(os.path.dirname(path)):
            raise Refused(f"{path}: its directory does not exist")
        _write(path, data, uid, gid, mode)
    return reason


def apply(params, check):
    """Every directory, then every file; the results, one per path, in order."""
    results = []
    for put, specs in ((directory, params["directories"]), (regular_file, params["files"])):
        for spec in specs:
            reason = put(spec, check)
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
    file_opts = dict(dir_opts, content={"type": "str", "required": True, "no_log": True})
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
