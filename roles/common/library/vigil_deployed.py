#!/usr/bin/python3
"""Ansible module: the host's facts file of what vigil deployed, written and read back.

``state: record`` (the site playbook's last play) merges what the run's roles installed
(``components``: the ``__common_deployed`` host fact the ``_common`` entry points build) into
``path`` (default /var/lib/vigil/deployed.json):

1. each entry of this run replaces the file's entry with the same ``id`` (the role, or the name a
   role gives its second service); an entry this run only configured (no install phase, so no
   version) keeps the version and bundle of the entry it replaces;
2. every file the entry names is hashed as it is now: its artifacts, its unit, every regular file
   under its configuration directories and its unpacked trees;
3. entries of roles that did not run are kept as they are;
4. each entry is named by its bundle component (``victoria-metrics``), or by the name its role
   installs it under (``vmalert``, installed apart from the VictoriaMetrics component), or by the
   role's name for a second service of a role (``redfish_bmcsim``); a name already taken by
   another role's entry falls back to the entry's id;
5. when nothing but ``run_id`` and ``written_at`` would differ, nothing is written (a rerun
   changes nothing); otherwise the file is staged beside the old one, fsynced, renamed over it, root
   only (0600: it holds the sha256 of credentials files).

``state: status`` changes nothing: it reads the file, hashes every file it lists again, reads each
install home's ``current`` link and asks systemd for each service's state; it returns ``facts``,
``drift`` (``changed``, ``missing``, ``added`` or ``unreadable: <why>``) and ``services``. A facts
file that is not a regular file, is too large, is not JSON or is not shaped as this module writes
it is one drift entry (component ``""``) and ``facts: null``: it is never followed, walked or
trusted. ``state: read`` returns ``facts`` and ``labels`` ({id: entry name}) and hashes nothing.

Runs on the hosts' own python3 (3.9 or newer), standard library only.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import os
import re
import stat
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: vigil_deployed
short_description: Write or read back vigil's per-host facts file (deployed.json)
options:
  state: {type: str, choices: [record, status, read], default: status}
  path: {type: path, default: /var/lib/vigil/deployed.json}
  components: {type: dict, default: {}}
  run: {type: dict, default: {}}
  host: {type: str, default: ""}
"""

FORMAT = 1
#: the most bytes of a facts file read back; a larger one is not one this module wrote
MAX_BYTES = 4 << 20
#: the most entries, and the most files hashed for one entry
MAX_ENTRIES = 256
MAX_FILES = 5000
SHA256 = re.compile(r"^[0-9a-f]{64}$")
SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,254}$")
#: entry names, ids, roles, components, versions: printable, one line, bounded
LABEL = re.compile(r"^[^\x00-\x1f\x7f]{0,256}$")
#: the name of a version directory (the `current` link's target)
DIRNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~:-]{0,254}$")


class Unreadable(Exception):
    """The facts file cannot be used; the message says why."""


# --- files ----------------------------------------------------------------------------------------


def is_abs(path, depth=1):
    """An absolute, normalised path of at least ``depth`` components, without NUL."""
    return (
        isinstance(path, str)
        and path.startswith("/")
        and "\x00" not in path
        and len(path) < 4096
        and os.path.normpath(path) == path
        and len([p for p in path.split("/") if p]) >= depth
    )


def hash_file(path):
    """(state, sha256): ``ok`` and the hash, or ``missing``, ``changed`` (not a regular file any
    more) or ``unreadable: <why>`` and None. A final link is never followed, a FIFO never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "missing", None
        if exc.errno == errno.ELOOP:
            return "changed", None
        return f"unreadable: {exc.strerror or exc}", None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "changed", None
        h = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            h.update(chunk)
        return "ok", h.hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}", None
    finally:
        os.close(fd)


def files_under(directory, limit=MAX_FILES):
    """Every regular file under ``directory``, sorted; links (the directory itself included) are
    never followed; at most ``limit``."""
    out = []
    if os.path.islink(directory) or not os.path.isdir(directory):
        return out
    stack = [directory]
    while stack and len(out) < limit:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    out.append(e.path)
            except OSError:
                continue
        stack.extend(reversed(subdirs))
    return sorted(out[:limit])


def entry_files(entry):
    """The files an entry names: its artifacts, its unit, what is under its config dirs and trees."""
    paths = [p for p in entry.get("paths") or [] if is_abs(p)]
    if is_abs(entry.get("unit")):
        paths.append(entry["unit"])
    for d in list(entry.get("config_dirs") or []) + list(entry.get("trees") or []):
        if is_abs(d, depth=2):
            paths.extend(files_under(d))
    return sorted(set(paths))[:MAX_FILES]


# --- the facts file -------------------------------------------------------------------------------


def _str_list(value, what, depth=1):
    if not isinstance(value, list) or len(value) > MAX_FILES:
        raise Unreadable(f"{what} is not a list of paths")
    for p in value:
        if not is_abs(p, depth):
            raise Unreadable(f"{what} names {str(p)[:80]!r}, not an absolute path")
    return value


def check_entry(name, entry):
    """Raise Unreadable when an entry is not shaped as this module writes it."""
    where = f"entry {name[:80]!r}"
    if not isinstance(entry, dict):
        raise Unreadable(f"{where} is not an object")
    for key in ("version", "role", "service", "component", "id", "home", "current", "unit"):
        value = entry.get(key, "")
        if not isinstance(value, str) or not LABEL.match(value):
            raise Unreadable(f"{where}: {key} is not a short string")
    bv = entry.get("bundle_version")
    if not isinstance(bv, int) or isinstance(bv, bool):
        raise Unreadable(f"{where}: bundle_version is not an integer")
    if entry.get("service") and not SERVICE.match(entry["service"]):
        raise Unreadable(f"{where}: service {entry['service'][:80]!r} is not a unit name")
    for key in ("home", "unit"):
        if entry.get(key) and not is_abs(entry[key], depth=2):
            raise Unreadable(f"{where}: {key} is not an absolute path")
    if entry.get("current") and not DIRNAME.match(entry["current"]):
        raise Unreadable(f"{where}: current {entry['current'][:80]!r} is not a directory name")
    files = entry.get("files")
    if not isinstance(files, dict) or len(files) > MAX_FILES:
        raise Unreadable(f"{where}: files is not an object of paths")
    for path, digest in files.items():
        if not is_abs(path):
            raise Unreadable(f"{where}: files names {path[:80]!r}, not an absolute path")
        if not isinstance(digest, str) or not SHA256.match(digest):
            raise Unreadable(f"{where}: {path[:80]} has no sha256")
    _str_list(entry.get("paths", []), where + ": paths")
    _str_list(entry.get("config_dirs", []), where + ": config_dirs", depth=2)
    _str_list(entry.get("trees", []), where + ": trees", depth=2)


def check_doc(doc):
    """Raise Unreadable when ``doc`` is not a facts document of this format."""
    if not isinstance(doc, dict):
        raise Unreadable("not a JSON object")
    if doc.get("format") != FORMAT:
        raise Unreadable(f"format {str(doc.get('format'))[:20]!r}, not {FORMAT}")
    bv = doc.get("bundle_version")
    if not isinstance(bv, int) or isinstance(bv, bool):
        raise Unreadable("bundle_version is not an integer")
    for key in ("host", "bundle_channel", "manifest_sha256", "run_id", "written_at"):
        value = doc.get(key, "")
        if not isinstance(value, str) or not LABEL.match(value):
            raise Unreadable(f"{key} is not a short string")
    comps = doc.get("components")
    if not isinstance(comps, dict) or len(comps) > MAX_ENTRIES:
        raise Unreadable("components is not an object")
    for name, entry in comps.items():
        if not name or not LABEL.match(name):
            raise Unreadable("an entry name is empty or not printable")
        check_entry(name, entry)


def read_facts(path):
    """The facts document at ``path``: None when there is none; Unreadable when it cannot be used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        if exc.errno == errno.ELOOP:
            raise Unreadable("a symbolic link, not a file") from None
        raise Unreadable(exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BYTES:
                raise Unreadable(f"more than {MAX_BYTES} bytes, larger than any facts file")
            chunks.append(chunk)
    finally:
        os.close(fd)
    try:
        doc = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Unreadable(f"not JSON ({str(exc)[:120]})") from None
    check_doc(doc)
    return doc


def write_atomic(path, data):
    """Stage beside ``path``, fsync, rename over it (a link there is replaced, never followed)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".deployed.", dir=directory)
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


# --- record ---------------------------------------------------------------------------------------

#: what a kept entry carries forward to an entry of this run that only configured its role
CARRIED = ("component", "version", "bundle_version", "home", "current", "paths", "config_dirs", "trees")


def _identity(entry, name):
    return entry.get("id") or entry.get("role") or name


def merge(old, ran, run, host):
    """The new facts document: ``old`` (a checked document or None) with the entries of ``ran``
    ({id: what the run's roles recorded}) replaced; ``run`` has the run's bundle fields."""
    old_comps = dict((old or {}).get("components") or {})
    by_id = {}
    for name, entry in old_comps.items():
        by_id.setdefault(_identity(entry, name), name)
    new = {}
    for rid in sorted(ran):
        rec = dict(ran[rid] or {})
        before = old_comps.get(by_id.get(rid, ""), {})
        entry = {
            "id": rid,
            "role": str(rec.get("role") or before.get("role") or rid),
            "service": str(rec.get("service") or before.get("service") or ""),
            "unit": str(rec.get("unit") or before.get("unit") or ""),
        }
        installed = bool(rec.get("version"))
        for key in CARRIED:
            value = rec.get(key) if installed else before.get(key)
            if key == "bundle_version":
                value = (
                    int(value)
                    if installed
                    else (value if isinstance(value, int) else int(run["bundle_version"]))
                )
            elif key in ("paths", "config_dirs", "trees"):
                value = [str(p) for p in (value or []) if is_abs(str(p))]
            else:
                value = str(value or "")
            entry[key] = value
        if not installed and rec.get("config_dirs"):
            entry["config_dirs"] = [str(p) for p in rec["config_dirs"] if is_abs(str(p))]
        files = {}
        for path in entry_files(entry):
            state, digest = hash_file(path)
            if state == "ok":
                files[path] = digest
        entry["files"] = files
        new[rid] = entry
    replaced = set(by_id[rid] for rid in new if rid in by_id)
    comps = dict((name, e) for name, e in old_comps.items() if name not in replaced)
    # 4: the names of this run's entries; the kept entries keep theirs
    for rid in sorted(new, key=lambda r: (new[r]["role"], new[r]["service"], r)):
        entry = new[rid]
        rec = ran[rid] or {}
        wanted = str(rec.get("record_as") or rec.get("install_name") or entry["component"] or rid)
        if not rec.get("version") and rid in by_id:  # only configured: the name it had
            wanted = by_id[rid]
        names = [wanted, rid] + [f"{wanted}/{rid}/{n}" for n in range(2, MAX_ENTRIES + 2)]
        comps[next(n for n in names if n and n not in comps)] = entry
    return {
        "format": FORMAT,
        "host": host,
        "bundle_version": int(run["bundle_version"]),
        "bundle_channel": str(run.get("bundle_channel") or ""),
        "manifest_sha256": str(run.get("manifest_sha256") or ""),
        "run_id": str(run.get("run_id") or ""),
        "components": comps,
    }


def record(path, ran, run, host, write=True, now=None):
    """(changed, document, warning): merge ``ran`` into the file at ``path`` and write it."""
    warning = ""
    try:
        old = read_facts(path)
    except Unreadable as exc:
        old, warning = (
            None,
            f"{path} was unreadable ({exc}); it is rewritten with this run's entries only",
        )
    doc = merge(old, ran, run, host)
    if old is not None:
        same = dict(old, run_id=None, written_at=None) == dict(doc, run_id=None, written_at=None)
        if same:  # 5
            return False, old, warning
    stamp = now or datetime.datetime.now(datetime.timezone.utc)
    doc["written_at"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    check_doc(doc)  # what this module writes, it can read back
    if write:
        write_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return True, doc, warning


# --- status ---------------------------------------------------------------------------------------


def service_state(name):
    try:
        res = subprocess.run(  # noqa: S603 - a checked unit name, no shell
            ["systemctl", "is-active", name],  # noqa: S607 - the host's systemctl, from its PATH
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    out = res.stdout.decode("utf-8", "replace").strip().splitlines()
    return out[0][:64] if out else "unknown"


def link_drift(entry):
    """The drift of an entry's `current` link: None, ``missing`` or ``changed``."""
    if not entry.get("home") or not entry.get("current"):
        return None
    link = os.path.join(entry["home"], "current")
    try:
        target = os.readlink(link)
    except OSError as exc:
        return "missing" if exc.errno in (errno.ENOENT, errno.ENOTDIR) else "changed"
    if target.rstrip("/") in (entry["current"], os.path.join(entry["home"], entry["current"])):
        return None
    return "changed"


def status(path):
    """(facts, drift, services) of the host as it is now."""
    try:
        facts = read_facts(path)
    except Unreadable as exc:
        return None, [{"component": "", "path": path, "reason": f"unreadable: {exc}"}], {}
    drift, services = [], {}
    for name, entry in sorted(((facts or {}).get("components") or {}).items()):
        recorded = entry["files"]
        for p, want in sorted(recorded.items()):
            state, got = hash_file(p)
            if state == "ok" and got != want:
                state = "changed"
            if state != "ok":
                drift.append({"component": name, "path": p, "reason": state})
        for d in list(entry.get("config_dirs") or []) + list(entry.get("trees") or []):
            for f in files_under(d):
                if f not in recorded:
                    drift.append({"component": name, "path": f, "reason": "added"})
        why = link_drift(entry)
        if why:
            drift.append({"component": name, "path": os.path.join(entry["home"], "current"), "reason": why})
        if entry.get("service"):
            services[entry["service"]] = service_state(entry["service"])
    return facts, drift, services


def labels(facts):
    """{id: entry name}: what the health checks call each role's component on this host."""
    out = {}
    for name, entry in sorted(((facts or {}).get("components") or {}).items()):
        out.setdefault(_identity(entry, name), name)
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["record", "status", "read"], "default": "status"},
            "path": {"type": "path", "default": "/var/lib/vigil/deployed.json"},
            "components": {"type": "dict", "default": {}},
            "run": {"type": "dict", "default": {}},
            "host": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "status":
        facts, drift, services = status(p["path"])
        module.exit_json(changed=False, facts=facts, drift=drift, services=services)
    if p["state"] == "read":
        try:
            facts = read_facts(p["path"])
        except Unreadable as exc:
            module.exit_json(changed=False, facts=None, labels={}, problem=f"unreadable: {exc}")
        module.exit_json(changed=False, facts=facts, labels=labels(facts), problem="")
    if not isinstance(p["run"].get("bundle_version"), int):
        try:
            p["run"]["bundle_version"] = int(p["run"].get("bundle_version"))
        except (TypeError, ValueError):
            module.fail_json(
                msg="vigil_deployed: run.bundle_version must be an integer (vigil_bundle_version)"
            )
    try:
        changed, doc, warning = record(
            p["path"], p["components"], p["run"], p["host"], write=not module.check_mode
        )
    except OSError as exc:
        module.fail_json(msg=f"{p['path']}: cannot write: {exc.strerror or exc}")
    except Unreadable as exc:
        module.fail_json(msg=f"{p['path']}: would write a document it cannot read back: {exc}")
    if warning:
        module.warn(warning)
    module.exit_json(changed=changed, facts=doc)


if __name__ == "__main__":
    main()
