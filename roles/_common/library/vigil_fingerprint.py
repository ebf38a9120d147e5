#!/usr/bin/python3
"""Ansible module: one round trip that tells whether a role would change anything on this host.

A rerun that changes nothing still costs every task of every role a round trip. After a whole run of
a role succeeded on a host (its tasks and the play's handlers), ``state: record`` (the site
playbook's last play) writes the role's **fingerprint** to ``path`` (/var/lib/vigil/fingerprints.json):

- ``key``: the run's inputs, computed on the controller by ``vigil deploy`` (the bundle, the roles,
  the inventory, the extra vars and the controller files they name; installer/deploy/fingerprint.py);
- ``spec``: what the role put in place, as the run collected it: ``trees`` (directories hashed
  recursively: every file's sha256, and every entry's type, mode, owner and group, a link's target),
  ``paths`` (one file or directory each, not its content below), ``units`` (each unit's enablement,
  and whether it was active), ``packages`` (each Debian package's version and state), ``users``
  (each account's uid, gid, home and shell), ``groups`` (each group's gid and members);
- ``state``: that spec measured on the host right then, and ``commands``: the output of each probe
  command the role names (a kernel's loaded rules), measured the same way.

``state: check`` (the first task of a role) measures the stored spec again and compares: the role's
entry is a **match** when its key equals the run's key, the probes the role names now are the ones
it stored, and every measurement is the same. A match lets the role end there. Anything else is a
difference, named in ``reason`` (the first one found), and the role's entry is removed before the
role runs (so that a run that fails half-way leaves no fingerprint to match next time). Check mode
removes nothing and writes nothing.

The file is root's, 0600, written beside itself and renamed over; one that is a link, not a regular
file, too large, not JSON or not shaped as this module writes it matches nothing and is replaced by
the next record. The commands run are those of the task's arguments, never the file's.

Runs on the hosts' own python3 (3.9 or newer), standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import hashlib
import json
import os
import pwd
import re
import stat
import subprocess
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: vigil_fingerprint
short_description: Record or check a role's fingerprint on a host, in one round trip
options:
  state: {type: str, choices: [check, record], default: check}
  path: {type: path, default: /var/lib/vigil/fingerprints.json}
  key: {type: str, default: ""}
  role: {type: str, default: ""}
  commands: {type: list, elements: list, default: []}
  roles: {type: dict, default: {}}
"""

FORMAT = 1
#: the most bytes of a fingerprints file read back, the most roles, paths and files measured per role
MAX_BYTES = 16 << 20
MAX_ROLES = 64
MAX_SPEC = 4096
MAX_FILES = 20000
KEY = re.compile(r"^[0-9a-f]{64}$")
ROLE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
UNIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,254}$")
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,127}$")
ACCOUNT = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SPEC_LISTS = ("trees", "paths", "units", "packages", "users", "groups")
COMMAND_TIMEOUT = 30


class Unusable(Exception):
    """The fingerprints file cannot be used; the message says why."""


def is_abs(path):
    return (
        isinstance(path, str)
        and path.startswith("/")
        and path != "/"
        and "\x00" not in path
        and len(path) < 4096
        and os.path.normpath(path) == path
    )


# --- measuring ------------------------------------------------------------------------------------


def _sha256(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        h = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
    finally:
        os.close(fd)


def node(path, content):
    """One line for what is at ``path`` (never following a link): its type, mode, owner and group, a
    link's target and, with ``content``, a regular file's sha256."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "missing"
        return f"unreadable: {exc.strerror or exc}"
    meta = f"{stat.S_IMODE(st.st_mode):04o} {st.st_uid}:{st.st_gid}"
    if stat.S_ISLNK(st.st_mode):
        try:
            return f"link -> {os.readlink(path)}"
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return f"dir {meta}"
    if stat.S_ISREG(st.st_mode):
        if not content:
            return f"file {meta}"
        try:
            return f"file {meta} {_sha256(path)}"
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
    return f"other {stat.S_IFMT(st.st_mode):o} {meta}"


def tree(top, out, budget):
    """Every entry under ``top`` (itself included), into ``out``; links are never followed."""
    stack = [top]
    while stack:
        here = stack.pop()
        if len(out) >= budget:
            out[here] = "too many files to measure"
            return
        line = node(here, content=True)
        out[here] = line
        if not line.startswith("dir "):
            continue
        try:
            names = sorted(os.listdir(here))
        except OSError as exc:
            out[here] = f"unreadable: {exc.strerror or exc}"
            continue
        stack.extend(os.path.join(here, n) for n in reversed(names))


def _units(units):
    if not units:
        return {}
    try:
        proc = subprocess.run(  # noqa: S603 - names checked (UNIT), no shell
            ["/usr/bin/systemctl", "show", "--property=Id,UnitFileState,ActiveState", "--", *units],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {u: f"unreadable: {exc}" for u in units}
    blocks = [b for b in proc.stdout.split("\n\n") if b.strip()]
    if len(blocks) != len(units):
        return {u: f"unreadable: systemctl show gave {len(blocks)} answers" for u in units}
    out = {}
    for unit, block in zip(units, blocks):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        # a unit that runs now and then (a timer's service) is compared by its enablement alone
        active = "active" if props.get("ActiveState") == "active" else "-"
        out[unit] = f"{props.get('UnitFileState') or '-'} {active}"
    return out


def _packages(packages):
    out = {}
    for pkg in packages:
        try:
            proc = subprocess.run(  # noqa: S603 - names checked (PACKAGE), no shell
                ["/usr/bin/dpkg-query", "--show", "--showformat=${Version} ${db:Status-Abbrev}", "--", pkg],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            out[pkg] = f"unreadable: {exc}"
            continue
        out[pkg] = proc.stdout.strip() if proc.returncode == 0 else "not installed"
    return out


def _users(users):
    out = {}
    for name in users:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            out[name] = "missing"
            continue
        try:
            group = grp.getgrgid(pw.pw_gid).gr_name
        except KeyError:
            group = "?"
        out[name] = f"{pw.pw_uid}:{pw.pw_gid}({group}) {pw.pw_dir} {pw.pw_shell}"
    return out


def _groups(groups):
    out = {}
    for name in groups:
        try:
            gr = grp.getgrnam(name)
        except KeyError:
            out[name] = "missing"
            continue
        out[name] = f"{gr.gr_gid} {','.join(sorted(gr.gr_mem))}"
    return out


def command_digest(argv):
    """The exit status and sha256 of the output of one probe command (no shell, stdin closed)."""
    try:
        proc = subprocess.run(  # noqa: S603 - the role's own probe, from the task's arguments, no shell
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not run: {exc}"
    digest = hashlib.sha256(proc.stdout + b"\0" + proc.stderr).hexdigest()
    return f"exit {proc.returncode} {digest}"


def measure(spec, commands):
    """The host's state for ``spec`` (a checked spec) and ``commands``: {kind: {item: line}}."""
    files = {}
    for top in spec["trees"]:
        tree(top, files, MAX_FILES)
    paths = {p: node(p, content=True) for p in spec["paths"]}
    return {
        "trees": files,
        "paths": paths,
        "units": _units(spec["units"]),
        "packages": _packages(spec["packages"]),
        "users": _users(spec["users"]),
        "groups": _groups(spec["groups"]),
        "commands": {json.dumps(c): command_digest(c) for c in commands},
    }


def first_difference(old, new):
    """The first difference between two measurements, as a short line."""
    for kind in (*SPEC_LISTS, "commands"):
        a, b = old.get(kind) or {}, new.get(kind) or {}
        for item in sorted(set(a) | set(b)):
            if a.get(item) != b.get(item):
                was = a.get(item, "absent")
                now = b.get(item, "absent")
                return f"{kind[:-1]} {item[:200]}: {str(was)[:80]} -> {str(now)[:80]}"
    return ""


# --- arguments and the file -----------------------------------------------------------------------


def check_spec(spec, where):
    """A spec as a record carries it: lists of absolute paths, unit, package and account names."""
    if not isinstance(spec, dict):
        raise Unusable(f"{where}: spec is not an object")
    out = {}
    for kind in SPEC_LISTS:
        value = spec.get(kind, [])
        if not isinstance(value, list) or len(value) > MAX_SPEC:
            raise Unusable(f"{where}: {kind} is not a list")
        pattern = {"units": UNIT, "packages": PACKAGE, "users": ACCOUNT, "groups": ACCOUNT}.get(kind)
        for item in value:
            ok = isinstance(item, str) and (pattern.match(item) if pattern else is_abs(item))
            if not ok:
                raise Unusable(f"{where}: {kind} names {str(item)[:80]!r}")
        out[kind] = sorted(set(value))
    return out


def check_commands(commands, where):
    if not isinstance(commands, list) or len(commands) > 16:
        raise Unusable(f"{where}: commands is not a list")
    for argv in commands:
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(a, str) and "\x00" not in a for a in argv)
            or not is_abs(argv[0])
        ):
            raise Unusable(f"{where}: a command is not a list of arguments starting with an absolute path")
    return [list(a) for a in commands]


def read_doc(path):
    """The fingerprints document at ``path``: {} when there is none; Unusable when it cannot be used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return {}
        if exc.errno == errno.ELOOP:
            raise Unusable("a symbolic link, not a file") from None
        raise Unusable(exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unusable("not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise Unusable("not this user's own, private file")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BYTES:
                raise Unusable(f"more than {MAX_BYTES} bytes")
            chunks.append(chunk)
    finally:
        os.close(fd)
    try:
        doc = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Unusable(f"not JSON ({str(exc)[:120]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("roles"), dict):
        raise Unusable(f"not a fingerprints document of format {FORMAT}")
    if len(doc["roles"]) > MAX_ROLES:
        raise Unusable("too many roles")
    for role, entry in doc["roles"].items():
        if not isinstance(role, str) or not ROLE.match(role) or not isinstance(entry, dict):
            raise Unusable(f"role {str(role)[:40]!r} is not a role's entry")
        if not isinstance(entry.get("key"), str) or not KEY.match(entry["key"]):
            raise Unusable(f"role {role}: no key")
        entry["spec"] = check_spec(entry.get("spec"), f"role {role}")
        check_commands(entry.get("command_list", []), f"role {role}")
        state = entry.get("state")
        if not isinstance(state, dict) or not all(
            isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in state.values()
        ):
            raise Unusable(f"role {role}: state is not a measurement")
    return doc


def write_doc(path, doc):
    """Stage beside ``path`` (0600), fsync, rename over it: a link there is replaced, never followed."""
    directory = os.path.dirname(path) or "."
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    fd, tmp = tempfile.mkstemp(prefix=".fingerprints.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# --- the two states -------------------------------------------------------------------------------


def check(path, role, key, commands, write):
    """(match, reason, changed): whether ``role``'s stored fingerprint matches the host and ``key``."""
    try:
        doc = read_doc(path)
    except Unusable as exc:
        return False, f"{path}: {exc}", False
    entry = doc.get("roles", {}).get(role)
    if entry is None:
        return False, "no fingerprint of this role", False
    if entry["key"] != key:
        reason = "the run's inputs differ (bundle, roles, inventory or secrets)"
    elif entry.get("command_list", []) != commands:
        reason = "the role's probes differ"
    else:
        reason = first_difference(entry["state"], measure(entry["spec"], commands))
        if not reason:
            return True, "", False
    if write:
        del doc["roles"][role]
        write_doc(path, doc)
    return False, reason, write


def record(path, key, roles, write):
    """Measure and store each of ``roles`` ({role: {spec lists..., commands}}) under ``key``."""
    try:
        doc = read_doc(path)
    except Unusable:
        doc = {}
    doc = {"format": FORMAT, "roles": dict(doc.get("roles", {}))}
    before = dict(doc["roles"])
    for role in sorted(roles):
        if not ROLE.match(role):
            raise Unusable(f"{role[:40]!r} is not a role name")
        raw = roles[role] or {}
        spec = check_spec({k: raw.get(k, []) for k in SPEC_LISTS}, f"role {role}")
        commands = check_commands(raw.get("commands", []), f"role {role}")
        doc["roles"][role] = {
            "key": key,
            "spec": spec,
            "command_list": commands,
            "state": measure(spec, commands),
            "recorded_at": int(time.time()),
        }
        old = before.get(role)
        if old is not None and {**old, "recorded_at": 0} == {**doc["roles"][role], "recorded_at": 0}:
            doc["roles"][role] = old  # the same fingerprint: nothing to write for it
    if write and doc["roles"] != before:
        write_doc(path, doc)
    return bool(roles)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["check", "record"], "default": "check"},
            "path": {"type": "path", "default": "/var/lib/vigil/fingerprints.json"},
            "key": {"type": "str", "default": ""},
            "role": {"type": "str", "default": ""},
            "commands": {"type": "list", "elements": "list", "default": []},
            "roles": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not KEY.match(p["key"]):
        module.fail_json(
            msg="vigil_fingerprint: key must be 64 hex digits (vigil deploy's vigil_fingerprint)"
        )
    try:
        if p["state"] == "check":
            if not ROLE.match(p["role"]):
                module.fail_json(msg=f"vigil_fingerprint: {p['role'][:40]!r} is not a role name")
            commands = check_commands(p["commands"], f"role {p['role']}")
            match, reason, changed = check(p["path"], p["role"], p["key"], commands, not module.check_mode)
            module.exit_json(changed=False, match=match, reason=reason, forgot=changed)
        wrote = record(p["path"], p["key"], p["roles"], not module.check_mode)
        module.exit_json(changed=False, recorded=sorted(p["roles"]) if wrote else [])
    except Unusable as exc:
        module.fail_json(msg=f"vigil_fingerprint: {exc}")
    except OSError as exc:
        module.fail_json(msg=f"{p['path']}: cannot write: {exc.strerror or exc}")


if __name__ == "__main__":
    main()
