#!/usr/bin/python3
"""vigil-vm-backup: VictoriaMetrics' backups with vmbackup, their retention, their metrics, and a restore.

Four commands, each with the standard library of python3 >= 3.9 only:

prepare   (the deploy, as root) DST/HOST made as the service user's alone, DST checked first.
run       (vigil-vm-backup.service, as VictoriaMetrics' own user) one backup of the running
          VictoriaMetrics into DST/HOST/<UTC time>: vmbackup makes a snapshot through the server
          (-snapshot.createURL, read from the unit's environment with the login in it) and copies it
          to `fs://`, hard-linking what the newest complete backup already holds (-origin). A backup is
          complete only when vmbackup exits 0 and left its own marker (`backup_complete.ignore`, which it
          writes last: "ok" in 1.79, empty in 1.112); then
          `vigil-backup.json` (when, how many bytes and files) is written beside it, whole, by a rename.
          The oldest complete backups beyond --keep, and the leftovers of failed runs older than the
          newest complete one, are removed after that, never before. The outcome goes to --status.
textfile  (the same unit's ExecStopPost, as root) the --status file read as untrusted data and
          written as `vigil_backup.prom` into node_exporter's textfile directory:
              vigil_backup_last_success_timestamp_seconds   end of the newest complete backup
              vigil_backup_last_size_bytes                  its size (every file, shared ones too)
              vigil_backup_last_duration_seconds            how long it took
              vigil_backup_last_run_timestamp_seconds       end of the last run, complete or not
              vigil_backup_last_run_success                 1 when that run completed a backup
              vigil_backup_completed                        complete backups kept
restore   (by hand, docs/backup.md) one complete backup rebuilt as a VictoriaMetrics data
          directory that does not exist yet, staged beside it and renamed into place. vmbackup's
          `fs://` layout keeps each file of the data directory as a directory of pieces named
          FILESIZE_OFFSET_SIZE (16 hex digits each); the pieces are checked to cover each file exactly,
          and the files and bytes rebuilt against what `vigil-backup.json` counted when it was made.

Nothing under DST is trusted: the directories are opened one at a time, never through a link; DST
must not be a link, nor writable by anyone but root and this user, and HOST's directory must be
this user's alone. vmbackup writes through the directory this script created and holds open
(/proc/self/fd/N), so a directory swapped for another while it runs is not what gets written, and
the swapped one is never marked complete. Failures are one line on stderr naming the path and the
reason; exit status 0 when done, 1 when vmbackup failed, 2 when refused.
"""

from __future__ import annotations

import argparse
import binascii
import contextlib
import datetime
import json
import math
import os
import pwd
import re
import stat
import subprocess
import sys
import time

MARKER = "vigil-backup.json"
VM_MARKER = "backup_complete.ignore"  # "ok" (1.79) or empty (1.112), written last by vmbackup
VM_DONE = (b"ok", b"")
#: what vmbackup keeps beside the data at the top of a backup (1.112 adds its metadata)
NOT_DATA = (VM_MARKER, "backup_metadata.ignore", "vigil-backup.json")
OUTPUT = "vigil_backup.prom"
NAME = re.compile(r"[0-9]{8}T[0-9]{6}Z")
PIECE = re.compile(r"([0-9A-F]{16})_([0-9A-F]{16})_([0-9A-F]{16})")
MAX_SMALL = 64 << 10  # a marker or a status file
MAX_ENTRIES = 1_000_000  # files and directories in one backup, walked or restored
MAX_DEPTH = 32
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """A path this script will not use, and why: printed as one line."""


# --- small file helpers, every one relative to a directory fd, never through a link -----------------


def open_dir(path: str, dir_fd: int | None = None) -> int:
    try:
        return os.open(path, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (40, 20):  # ELOOP, ENOTDIR: a link or not a directory
            raise Refused(f"{path}: a link or not a directory") from None
        raise Refused(f"{path}: cannot open ({os.strerror(exc.errno or 0)})") from None


def read_small(dir_fd: int, name: str, where: str) -> bytes:
    """A regular file of at most MAX_SMALL bytes, never a link, never blocking on a FIFO."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise Refused(f"{where}: cannot open ({os.strerror(exc.errno or 0)})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{where}: not a regular file")
        data = os.read(fd, MAX_SMALL + 1)
        if len(data) > MAX_SMALL:
            raise Refused(f"{where}: larger than {MAX_SMALL} bytes")
        return data
    finally:
        os.close(fd)


def write_whole(dir_fd: int, name: str, content: bytes, mode: int) -> None:
    """`content` as NAME in DIR_FD: written beside it, synced, then renamed over it."""
    tmp = f".{name}.{os.getpid()}.{binascii.hexlify(os.urandom(6)).decode()}.tmp"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
    )
    try:
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def check_owned(fd: int, path: str, owners: tuple[int, ...]) -> None:
    """Refuse a directory someone else could change: writable by its group or by others, or owned by
    anyone but OWNERS (DST may be root's or the service user's; HOST's directory the user's alone)."""
    st = os.fstat(fd)
    if st.st_uid not in owners:
        names = " or ".join(f"uid {u}" for u in owners)
        raise Refused(f"{path}: owned by uid {st.st_uid}, not {names}")
    if st.st_mode & 0o022:
        raise Refused(f"{path}: writable by its group or by others (mode {stat.S_IMODE(st.st_mode):04o})")


def prepare(args: argparse.Namespace) -> int:
    """(as root, from the deploy) DST/HOST made, or checked, as the service user's alone (0700).

    DST is refused when it is a link, writable by a group or others, or owned by anyone but root and
    the user; HOST's directory when it is a link or not a directory. Nothing is followed, so a link
    planted in DST never gets its target's owner changed."""
    try:
        pw = pwd.getpwnam(args.user)
    except KeyError:
        raise Refused(f"--user {args.user}: no such user") from None
    dst_fd = open_dir(args.dst)
    try:
        check_owned(dst_fd, args.dst, (0, pw.pw_uid))
        changed = False
        try:
            os.mkdir(args.host, 0o700, dir_fd=dst_fd)
            changed = True
        except FileExistsError:
            pass
        host_fd = open_dir(args.host, dst_fd)
        try:
            st = os.fstat(host_fd)
            if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (pw.pw_uid, pw.pw_gid, 0o700):
                os.fchown(host_fd, pw.pw_uid, pw.pw_gid)
                os.fchmod(host_fd, 0o700)
                changed = True
        finally:
            os.close(host_fd)
    finally:
        os.close(dst_fd)
    print(json.dumps({"changed": changed}))
    return 0


# --- the backups under DST/HOST -----------------------------------------------------------------------


def marker(dir_fd: int, name: str) -> dict[str, object] | None:
    """The marker of a complete backup NAME (a real directory with both markers), else None."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    try:
        fd = open_dir(name, dir_fd)
    except Refused:
        return None
    try:
        if read_small(fd, VM_MARKER, name).strip() not in VM_DONE:
            return None
        doc = json.loads(read_small(fd, MARKER, name))
    except (Refused, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(doc, dict) or doc.get("name") != name:
        return None
    for key in ("started", "finished", "bytes", "files"):
        if not _number(doc.get(key)):
            return None
    return doc


def _number(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def backups(dir_fd: int) -> tuple[list[str], list[str]]:
    """(complete backups, everything else named like a backup), each oldest first."""
    names = sorted(n for n in os.listdir(dir_fd) if NAME.fullmatch(n))
    done = [n for n in names if marker(dir_fd, n) is not None]
    return done, [n for n in names if n not in done]


def measure(dir_fd: int, where: str) -> tuple[int, int]:
    """(bytes, files) of the data directory a backup holds: the pieces' bytes, and the directories
    holding pieces (each one file), walked through fds without following a link."""
    total = files = 0
    stack = [(dir_fd, False, 0)]
    seen = 0
    while stack:
        fd, close, depth = stack.pop()
        try:
            holds_pieces = False
            for entry in os.scandir(fd):
                seen += 1
                if seen > MAX_ENTRIES:
                    raise Refused(f"{where}: more than {MAX_ENTRIES} entries")
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if depth >= MAX_DEPTH:
                        raise Refused(f"{where}: deeper than {MAX_DEPTH} directories")
                    stack.append((open_dir(entry.name, fd), True, depth + 1))
                elif stat.S_ISREG(st.st_mode) and PIECE.fullmatch(entry.name):
                    total += st.st_size
                    holds_pieces = True
            files += holds_pieces
        finally:
            if close:
                os.close(fd)
    return total, files


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove NAME in PARENT_FD and all below it, never following a link (a link is unlinked)."""
    st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    fd = open_dir(name, parent_fd)
    try:
        for entry in list(os.scandir(fd)):
            remove_tree(fd, entry.name)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def utc_name(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def run(args: argparse.Namespace) -> int:
    # 1 DST: a real directory that only root or this user can change
    dst_fd = open_dir(args.dst)
    try:
        check_owned(dst_fd, args.dst, (0, os.geteuid()))
        # 2 DST/HOST: this user's alone
        where = os.path.join(args.dst, args.host)
        host_fd = open_dir(args.host, dst_fd)
    finally:
        os.close(dst_fd)
    try:
        check_owned(host_fd, where, (os.geteuid(),))
        return _run_in(args, host_fd, where)
    finally:
        os.close(host_fd)


def _run_in(args: argparse.Namespace, host_fd: int, where: str) -> int:
    started = time.time()
    done, _ = backups(host_fd)
    # 3 a new directory, named by the time, made and held open here
    name = utc_name(started)
    if NAME.fullmatch(name) is None or name in os.listdir(host_fd):
        raise Refused(f"{where}/{name}: already exists (two runs in one second?)")
    os.mkdir(name, 0o700, dir_fd=host_fd)
    new_fd = open_dir(name, host_fd)
    try:
        made = os.fstat(new_fd)
        argv = [
            args.vmbackup,
            "-envflag.enable",
            f"-storageDataPath={args.storage_data_path}",
            f"-dst=fs:///proc/self/fd/{new_fd}",
            "-httpListenAddr=127.0.0.1:0",
            "-loggerLevel=WARN",
            f"-concurrency={args.concurrency}",
        ]
        fds = [new_fd]
        origin_fd = None
        if done:  # 4 unchanged files hard-linked from the newest complete backup
            origin_fd = open_dir(done[-1], host_fd)
            fds.append(origin_fd)
            argv.append(f"-origin=fs:///proc/self/fd/{origin_fd}")
        try:
            code = subprocess.call(argv, pass_fds=fds, timeout=args.timeout)  # noqa: S603 - the unit's own argv
        except subprocess.TimeoutExpired:
            code = -1
        finally:
            if origin_fd is not None:
                os.close(origin_fd)
        now = os.stat(name, dir_fd=host_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino) or not stat.S_ISDIR(now.st_mode):
            raise Refused(f"{where}/{name}: replaced while vmbackup ran; not marked complete")
        ok = code == 0
        if ok:
            try:
                ok = read_small(new_fd, VM_MARKER, f"{where}/{name}").strip() in VM_DONE
            except Refused:
                ok = False
        finished = time.time()
        if ok:
            # 5 the marker, whole, only after vmbackup's own
            size, files = measure(new_fd, f"{where}/{name}")
            doc = {
                "format": 1,
                "name": name,
                "host": args.host,
                "started": round(started, 3),
                "finished": round(finished, 3),
                "bytes": size,
                "files": files,
                "origin": done[-1] if done else None,
            }
            write_whole(new_fd, MARKER, (json.dumps(doc, sort_keys=True) + "\n").encode(), 0o600)
    finally:
        os.close(new_fd)
    # 6 retention, once a newer backup is complete: the oldest beyond --keep, and failed runs' leftovers
    done, rest = backups(host_fd)
    if ok and done:
        for old in done[: max(0, len(done) - args.keep)] + [n for n in rest if n < done[-1]]:
            remove_tree(host_fd, old)
        done, rest = backups(host_fd)
    write_status(args, host_fd, done, finished, ok)
    if not ok:
        print(
            f"vigil-vm-backup: {where}/{name}: vmbackup failed (exit {code}); not marked complete",
            file=sys.stderr,
        )
        return 1
    print(
        f"vigil-vm-backup: {where}/{name}: complete, {files} files, {size} bytes, {finished - started:.1f} s"
    )
    return 0


def write_status(args: argparse.Namespace, host_fd: int, done: list[str], finished: float, ok: bool) -> None:
    last = marker(host_fd, done[-1]) if done else None
    status = {
        "format": 1,
        "last_run": round(finished, 3),
        "last_run_success": ok,
        "completed": len(done),
        "last": None
        if last is None
        else {k: last[k] for k in ("name", "started", "finished", "bytes", "files")},
    }
    state_fd = open_dir(os.path.dirname(args.status) or ".")
    try:
        write_whole(
            state_fd,
            os.path.basename(args.status),
            (json.dumps(status, sort_keys=True) + "\n").encode(),
            0o644,
        )
    finally:
        os.close(state_fd)


# --- textfile: the status as metrics, as root -----------------------------------------------------------


def render(status: dict[str, object] | None) -> bytes:
    """The metrics of a status document; a missing or bad one gives only vigil_backup_status_readable 0."""
    lines = [
        "# HELP vigil_backup_status_readable 1 when the backup's status file was read.",
        "# TYPE vigil_backup_status_readable gauge",
        f"vigil_backup_status_readable {0 if status is None else 1}",
    ]
    if status is None:
        return ("\n".join(lines) + "\n").encode()
    values: list[tuple[str, str, object]] = [
        (
            "last_run_timestamp_seconds",
            "End of the last backup run, complete or not (Unix time).",
            status["last_run"],
        ),
        (
            "last_run_success",
            "1 when the last backup run completed a backup.",
            1 if status["last_run_success"] else 0,
        ),
        ("completed", "Complete backups kept.", status["completed"]),
    ]
    last = status["last"]
    if isinstance(last, dict):
        values += [
            (
                "last_success_timestamp_seconds",
                "End of the newest complete backup (Unix time).",
                last["finished"],
            ),
            ("last_size_bytes", "Size of the newest complete backup, every file.", last["bytes"]),
            (
                "last_duration_seconds",
                "How long the newest complete backup took.",
                round(last["finished"] - last["started"], 3),
            ),
        ]
    for name, text, value in values:
        lines += [
            f"# HELP vigil_backup_{name} {text}",
            f"# TYPE vigil_backup_{name} gauge",
            f"vigil_backup_{name} {value}",
        ]
    return ("\n".join(lines) + "\n").encode()


def read_status(path: str) -> dict[str, object]:
    """The status file as `run` writes it; anything else is refused (its numbers checked one by one)."""
    dir_fd = open_dir(os.path.dirname(path) or ".")
    try:
        raw = read_small(dir_fd, os.path.basename(path), path)
    finally:
        os.close(dir_fd)
    try:
        doc = json.loads(raw)
    except ValueError:
        raise Refused(f"{path}: not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != 1:
        raise Refused(f"{path}: not a status of format 1")
    if not _number(doc.get("last_run")) or not isinstance(doc.get("last_run_success"), bool):
        raise Refused(f"{path}: last_run or last_run_success is not what run writes")
    if not isinstance(doc.get("completed"), int) or not _number(doc.get("completed")):
        raise Refused(f"{path}: completed is not a count")
    last = doc.get("last")
    if last is not None:
        if not isinstance(last, dict) or not all(
            _number(last.get(k)) for k in ("started", "finished", "bytes", "files")
        ):
            raise Refused(f"{path}: last is not what run writes")
        if last["finished"] < last["started"]:
            raise Refused(f"{path}: last finished before it started")
    return doc


def textfile(args: argparse.Namespace) -> int:
    try:
        status: dict[str, object] | None = read_status(args.status)
    except Refused as exc:
        print(f"vigil-vm-backup: {exc}", file=sys.stderr)
        status = None
    dir_fd = open_dir(args.textfile_dir)
    try:
        st = os.fstat(dir_fd)
        if st.st_uid != 0 or st.st_mode & 0o022:
            raise Refused(
                f"{args.textfile_dir}: the textfile directory must be root's and writable by root alone"
            )
        write_whole(dir_fd, OUTPUT, render(status), 0o644)
    finally:
        os.close(dir_fd)
    return 0 if status is not None else 2


# --- restore ---------------------------------------------------------------------------------------------


def pieces(fd: int, where: str) -> list[tuple[int, int, int, str]] | None:
    """The pieces of one file if this directory holds a file's pieces (each named FILESIZE_OFFSET_SIZE),
    None when it holds none (a directory of the data directory). A mix is refused."""
    found, other = [], []
    for entry in os.scandir(fd):
        m = PIECE.fullmatch(entry.name)
        if m and entry.is_file(follow_symlinks=False):
            found.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), entry.name))
        else:
            other.append(entry.name)
    if found and other:
        raise Refused(f"{where}: holds both a file's pieces and {other[0]!r}")
    return sorted(found, key=lambda p: p[1]) if found else None


def restore_file(
    src_fd: int, parts: list[tuple[int, int, int, str]], out_fd: int, name: str, where: str
) -> None:
    size = parts[0][0]
    offset = 0
    for file_size, start, length, _ in parts:
        if file_size != size or start != offset:
            raise Refused(f"{where}: pieces do not cover the file exactly (gap or overlap at byte {offset})")
        offset += length
    if offset != size:
        raise Refused(f"{where}: pieces hold {offset} bytes, the file has {size}")
    fd = os.open(
        name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=out_fd
    )
    try:
        for _, _, length, piece in parts:
            pfd = os.open(piece, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_fd)
            try:
                if not stat.S_ISREG(os.fstat(pfd).st_mode) or os.fstat(pfd).st_size != length:
                    raise Refused(f"{where}/{piece}: not a regular file of {length} bytes")
                left = length
                while left:
                    chunk = os.read(pfd, min(left, 1 << 20))
                    if not chunk:
                        raise Refused(f"{where}/{piece}: ended before {length} bytes")
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                    left -= len(chunk)
            finally:
                os.close(pfd)
        os.fsync(fd)
    finally:
        os.close(fd)


def restore_dir(
    src_fd: int, out_fd: int, where: str, budget: list[int], depth: int, owner: tuple[int, int] | None
) -> None:
    for entry in sorted(os.scandir(src_fd), key=lambda e: e.name):
        budget[0] -= 1
        if budget[0] < 0:
            raise Refused(f"{where}: more than {MAX_ENTRIES} entries")
        name = entry.name
        path = f"{where}/{name}"
        if depth == 0 and name in NOT_DATA:
            continue
        if name in (".", "..") or "/" in name or name.startswith("."):
            raise Refused(f"{path}: a name the backup never has")
        if not entry.is_dir(follow_symlinks=False):
            raise Refused(f"{path}: not a directory (a link, or a file outside vmbackup's layout)")
        if depth >= MAX_DEPTH:
            raise Refused(f"{path}: deeper than {MAX_DEPTH} directories")
        sub = open_dir(name, src_fd)
        try:
            parts = pieces(sub, path)
            if parts is not None:
                restore_file(sub, parts, out_fd, name, path)
                budget[1] += 1
                budget[2] += parts[0][0]
                if owner:
                    os.chown(name, *owner, dir_fd=out_fd, follow_symlinks=False)
                continue
            os.mkdir(name, 0o700, dir_fd=out_fd)
            if owner:
                os.chown(name, *owner, dir_fd=out_fd, follow_symlinks=False)
            out_sub = open_dir(name, out_fd)
            try:
                restore_dir(sub, out_sub, path, budget, depth + 1, owner)
                os.fsync(out_sub)
            finally:
                os.close(out_sub)
        finally:
            os.close(sub)


def marker_of(src_fd: int, where: str) -> dict[str, object]:
    """A backup's own marker, checked: how many files and bytes the restore must give back."""
    path = f"{where}/{MARKER}"
    try:
        doc = json.loads(read_small(src_fd, MARKER, path))
    except ValueError:
        raise Refused(f"{path}: not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != 1:
        raise Refused(f"{path}: not a marker of format 1")
    if not all(isinstance(doc.get(k), int) and _number(doc.get(k)) for k in ("files", "bytes")):
        raise Refused(f"{path}: files or bytes is not a count")
    return doc


def restore(args: argparse.Namespace) -> int:
    target = os.path.abspath(args.to)
    parent, base = os.path.dirname(target), os.path.basename(target)
    owner = None
    if args.owner:
        try:
            pw = pwd.getpwnam(args.owner)
        except KeyError:
            raise Refused(f"--owner {args.owner}: no such user") from None
        owner = (pw.pw_uid, pw.pw_gid)
    # 1 the backup: complete (vmbackup's marker says ok)
    src_fd = open_dir(args.source)
    try:
        if read_small(src_fd, VM_MARKER, f"{args.source}/{VM_MARKER}").strip() not in VM_DONE:
            raise Refused(
                f"{args.source}: vmbackup's marker says neither ok nor nothing (not a complete backup)"
            )
        doc = marker_of(src_fd, args.source)
        # 2 the target: must not exist; staged beside it, in a directory only root (or the caller) can change
        parent_fd = open_dir(parent)
        try:
            check_owned(parent_fd, parent, (0, os.geteuid()))
            try:
                os.stat(base, dir_fd=parent_fd, follow_symlinks=False)
                raise Refused(f"{target}: exists; move it aside first (docs/backup.md)")
            except FileNotFoundError:
                pass
            stage = f".{base}.restore-{binascii.hexlify(os.urandom(6)).decode()}"
            os.mkdir(stage, 0o700, dir_fd=parent_fd)
            try:
                out_fd = open_dir(stage, parent_fd)
                try:
                    # 3 every file rebuilt from its pieces, every piece checked
                    counts = [MAX_ENTRIES, 0, 0]
                    restore_dir(src_fd, out_fd, args.source, counts, 0, owner)
                    if (counts[1], counts[2]) != (doc["files"], doc["bytes"]):
                        raise Refused(
                            f"{args.source}: holds {counts[1]} files of {counts[2]} bytes, its {MARKER} says "
                            f"{doc['files']} of {doc['bytes']} (a damaged backup)"
                        )
                    os.fchmod(out_fd, 0o750)
                    if owner:
                        os.fchown(out_fd, *owner)
                    os.fsync(out_fd)
                finally:
                    os.close(out_fd)
                # 4 into place in one rename
                os.rename(stage, base, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
                os.fsync(parent_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    remove_tree(parent_fd, stage)
                raise
        finally:
            os.close(parent_fd)
    finally:
        os.close(src_fd)
    print(f"vigil-vm-backup: {args.source} restored into {target}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vigil-vm-backup", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="one backup into DST/HOST/<UTC time>, then the retention")
    r.add_argument("--dst", required=True, help="the backup directory (a local disk or an NFS mount)")
    r.add_argument("--host", required=True, help="this host's directory under DST")
    r.add_argument("--keep", type=int, default=7, help="complete backups kept (default 7)")
    r.add_argument("--vmbackup", required=True)
    r.add_argument("--storage-data-path", required=True)
    r.add_argument("--status", required=True, help="where the outcome is written (JSON)")
    r.add_argument("--concurrency", type=int, default=2)
    r.add_argument("--timeout", type=float, default=None, help="seconds vmbackup may take")
    t = sub.add_parser("textfile", help="the status as node_exporter textfile metrics (as root)")
    t.add_argument("--status", required=True)
    t.add_argument("--textfile-dir", required=True)
    p = sub.add_parser("prepare", help="DST/HOST made as the service user's alone (as root)")
    p.add_argument("--dst", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--user", required=True, help="VictoriaMetrics' user, who runs the backups")
    s = sub.add_parser("restore", help="a complete backup rebuilt as a new data directory")
    s.add_argument("--from", dest="source", required=True, help="DST/HOST/<UTC time>")
    s.add_argument("--to", required=True, help="the data directory to make (must not exist)")
    s.add_argument("--owner", help="the user that owns what is restored (VictoriaMetrics' user)")
    args = parser.parse_args(argv)
    if args.command == "run" and args.keep < 1:
        parser.error("--keep must be 1 or more")
    if args.command in ("run", "prepare") and ("/" in args.host or args.host in ("", ".", "..")):
        parser.error("--host must be a plain name")
    try:
        return {"run": run, "textfile": textfile, "restore": restore, "prepare": prepare}[args.command](args)
    except Refused as exc:
        print(f"vigil-vm-backup: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"vigil-vm-backup: {exc.filename or args.command}: {exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
