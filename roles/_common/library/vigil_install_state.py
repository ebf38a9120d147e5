#!/usr/bin/python3
"""Ansible module: is a component installed exactly as the bundle says? One round trip, read only.

The ``_common`` install entry point asks this first and runs its install steps (system user and
group, data and config directories, version directories, artifacts copied and hashed, ``current``
link, pruning of old versions) only when the answer is no. So the check is as strict as the steps
it stands for, and errs towards "no": anything it cannot read or does not understand is a
difference, and the steps then run as they always did.

Checked, each against what the steps would set:

1. the group exists; the user exists, in that group as its primary group, in every extra group,
   with that shell, home and comment;
2. every directory exists as a directory (not a link), with its owner, group and mode;
3. every artifact is a regular file (not a link), with its sha256, owner, group and mode (for a
   component unpacked as a tree, only its sha256, which is all the tree's steps check);
4. ``<home>/current`` is a link to the version directory's name;
5. no more version directories are under ``<home>`` than the steps would keep (when ``home`` is
   given: the wheel's steps leave pruning to their unpack script, which prunes only when it unpacks);
6. every marker file (``markers``: path → text) is a regular file holding that text (the wheel's
   unpack script skips its work on the same evidence).

Returns ``in_sync`` and ``differences`` (one line each, the first few). Never changes anything.
Runs on the hosts' own python3 (3.9 or newer), standard library only.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: vigil_install_state
short_description: Whether a vigil component is installed exactly as its install steps would leave it
options:
  user: {type: dict, default: {}}
  directories: {type: list, elements: dict, default: []}
  directory_defaults: {type: dict, default: {}}
  version_dirs: {type: list, elements: str, default: []}
  artifacts: {type: dict, default: {}}
  tree: {type: bool, default: false}
  markers: {type: dict, default: {}}
  link: {type: dict, default: {}}
  home: {type: str, default: ""}
  prefix: {type: str, default: ""}
  keep_versions: {type: int, default: 2}
"""

#: differences reported at most (the first one is enough to decide)
MAX_REPORTED = 8


def _mode(value):
    """An octal mode string ("0755", "755") as an int, or None when it is anything else."""
    text = str(value).strip()
    if not text or len(text) > 5 or any(c not in "01234567" for c in text):
        return None
    return int(text, 8)


def _owner_ids(owner, group):
    try:
        uid = pwd.getpwnam(owner).pw_uid if owner else None
        gid = grp.getgrnam(group).gr_gid if group else None
    except KeyError as exc:
        return None, None, f"no such user or group: {exc.args[0]}"
    return uid, gid, ""


def check_user(spec):
    """Differences between the system's user and group and what the user steps would set."""
    name, group = spec.get("name") or "", spec.get("group") or ""
    if not name and not group:
        return []
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        return [f"group {group} is missing"]
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return [f"user {name} is missing"]
    out = []
    if entry.pw_gid != gid:
        out.append(f"user {name}: primary group is not {group}")
    for extra in spec.get("groups") or []:
        try:
            members = grp.getgrnam(extra).gr_mem
        except KeyError:
            out.append(f"group {extra} is missing")
            continue
        if name not in members:
            out.append(f"user {name} is not in group {extra}")
    for field, want in (("pw_shell", "shell"), ("pw_dir", "home"), ("pw_gecos", "comment")):
        if want in spec and getattr(entry, field) != spec[want]:
            out.append(f"user {name}: {want} is not {spec[want]}")
    return out


def _attributes(path, st, spec):
    out = []
    want_mode = _mode(spec.get("mode", ""))
    if want_mode is None:
        return [f"{path}: mode {spec.get('mode')!r} is not checked here"]
    if stat.S_IMODE(st.st_mode) != want_mode:
        out.append(f"{path}: mode {stat.S_IMODE(st.st_mode):04o}, not {want_mode:04o}")
    uid, gid, err = _owner_ids(spec.get("owner") or "", spec.get("group") or "")
    if err:
        return out + [f"{path}: {err}"]
    if uid is not None and st.st_uid != uid:
        out.append(f"{path}: owner is not {spec.get('owner')}")
    if gid is not None and st.st_gid != gid:
        out.append(f"{path}: group is not {spec.get('group')}")
    return out


def _lstat(path, is_kind, kind):
    """(stat, []) for a PATH of that kind (never followed), or (None, [its difference])."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return None, [f"{path}: {exc.strerror or exc}"]
    if not is_kind(st.st_mode):
        return None, [f"{path}: not {kind}"]
    return st, []


def check_directory(spec):
    path = spec.get("path") or ""
    st, found = _lstat(path, stat.S_ISDIR, "a directory")
    return found if st is None else _attributes(path, st, spec)


def _read_regular(path, use):
    """``use(file)`` on the regular file at ``path``, opened without following a link and without
    blocking (a FIFO swapped in after an lstat is refused by the fstat of what was opened); returns
    (stat, use's result, []) or (None, None, [the difference])."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, None, [f"{path}: {exc.strerror or exc}"]
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None, None, [f"{path}: not a regular file"]
        try:
            return st, use(f), []
        except OSError as exc:
            return None, None, [f"{path}: {exc.strerror or exc}"]


def _sha256(f):
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def check_artifact(spec):
    """Hashed and judged by one open file (see _read_regular)."""
    path = spec.get("path") or ""
    st, got, found = _read_regular(path, _sha256)
    if found:
        return found
    if got != spec.get("sha256"):
        return [f"{path}: sha256 {got} is not the bundle's"]
    if spec.get("hash_only"):
        return []
    return _attributes(path, st, spec)


def check_link(spec):
    path, target = spec.get("path") or "", spec.get("target") or ""
    if not path:
        return []
    try:
        got = os.readlink(path)
    except OSError as exc:
        return [f"{path}: {exc.strerror or exc}"]
    return [] if got == target else [f"{path} points at {got}, not {target}"]


def check_versions(home, prefix, keep):
    """The pruning step keeps ``prefix`` and the newest ``keep - 1`` other version directories."""
    if not home:
        return []
    try:
        names = os.listdir(home)
    except OSError as exc:
        return [f"{home}: {exc.strerror or exc}"]
    others = []
    for name in names:
        path = os.path.join(home, name)
        if path == prefix:
            continue
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                others.append(path)
        except OSError:
            continue
    allowed = max(int(keep) - 1, 0)
    if len(others) > allowed:
        return [f"{home}: {len(others)} other versions, the steps keep {allowed}"]
    return []


def check_marker(path, want):
    _, got, found = _read_regular(path, lambda f: f.read(4096))
    if found:
        return found
    return (
        []
        if got.decode("utf-8", "replace").strip() == str(want).strip()
        else [f"{path}: names another version"]
    )


def differences(params):
    """Every difference found, in the order the install steps would meet them."""
    out = list(check_user(params.get("user") or {}))
    defaults = params.get("directory_defaults") or {}
    for spec in params.get("directories") or []:
        out.extend(check_directory({**defaults, **{k: v for k, v in spec.items() if v is not None}}))
    root = {"owner": "root", "group": "root", "mode": "0755"}
    for path in params.get("version_dirs") or []:
        out.extend(check_directory({**root, "path": path}))
    prefix = params.get("prefix") or ""
    for name, artifact in sorted((params.get("artifacts") or {}).items()):
        if not isinstance(artifact, dict):
            out.append(f"{name}: not described by the bundle")
            continue
        out.extend(
            check_artifact(
                {
                    **root,
                    "path": os.path.join(prefix, name),
                    "sha256": artifact.get("sha256"),
                    "mode": artifact.get("mode") or "0755",
                    "hash_only": bool(params.get("tree")),
                }
            )
        )
    out.extend(check_link(params.get("link") or {}))
    out.extend(
        check_versions(params.get("home") or "", params.get("prefix") or "", params.get("keep_versions", 2))
    )
    for path, want in sorted((params.get("markers") or {}).items()):
        out.extend(check_marker(path, want))
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "user": {"type": "dict", "default": {}},
            "directories": {"type": "list", "elements": "dict", "default": []},
            "directory_defaults": {"type": "dict", "default": {}},
            "version_dirs": {"type": "list", "elements": "str", "default": []},
            "artifacts": {"type": "dict", "default": {}},
            "tree": {"type": "bool", "default": False},
            "markers": {"type": "dict", "default": {}},
            "link": {"type": "dict", "default": {}},
            "home": {"type": "str", "default": ""},
            "prefix": {"type": "str", "default": ""},
            "keep_versions": {"type": "int", "default": 2},
        },
        supports_check_mode=True,
    )
    found = differences(module.params)
    module.exit_json(changed=False, in_sync=not found, differences=found[:MAX_REPORTED])


if __name__ == "__main__":
    main()
