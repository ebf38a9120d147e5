"""The backup script's defences (roles/victoriametrics/files/vigil_vm_backup.py), each with the hostile
input it is for. Runs as root here, as `prepare`, `textfile` and `restore` do on a host.

Attackers: whoever may write the backup destination (an NFS export shared with other hosts), and a
compromised VictoriaMetrics user (who owns its backups and its status file, and must not reach
anything root writes). The real vmbackup and VictoriaMetrics are in
tests/integration/test_vm_backup.py; here a stand-in for vmbackup plays the attacker that swaps the
backup directory while it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.roles.rendering import ROLES

SCRIPT = ROLES / "victoriametrics" / "files" / "vigil_vm_backup.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="prepare and textfile run as root")


def script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


# --- prepare (root, from the deploy) -------------------------------------------------------------------


@pytest.fixture
def dst(tmp_path: Path) -> Path:
    d = tmp_path / "backup"
    d.mkdir(mode=0o755)
    return d


def prepare(dst: Path) -> subprocess.CompletedProcess[str]:
    return script("prepare", "--dst", str(dst), "--host", "mon01", "--user", "nobody")


def test_prepare_makes_the_host_directory_the_users_alone_and_twice_changes_nothing(dst: Path) -> None:
    res = prepare(dst)
    assert res.returncode == 0 and json.loads(res.stdout) == {"changed": True}, res.stderr
    st = (dst / "mon01").stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (65534, 0o700)
    assert json.loads(prepare(dst).stdout) == {"changed": False}


def test_prepare_refuses_a_destination_that_is_a_link(tmp_path: Path, dst: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(dst)
    res = prepare(link)
    assert res.returncode == 2 and one_line(res) == f"vigil-vm-backup: {link}: a link or not a directory"
    assert not (dst / "mon01").exists()


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_prepare_refuses_a_destination_others_may_write(dst: Path, mode: int) -> None:
    dst.chmod(mode)
    res = prepare(dst)
    assert res.returncode == 2
    assert one_line(res) == f"vigil-vm-backup: {dst}: writable by its group or by others (mode {mode:04o})"
    assert not (dst / "mon01").exists()


def test_prepare_never_follows_a_link_planted_as_the_host_directory(tmp_path: Path, dst: Path) -> None:
    victim = tmp_path / "etc"
    victim.mkdir(mode=0o755)
    (dst / "mon01").symlink_to(victim)
    res = prepare(dst)
    assert res.returncode == 2 and one_line(res) == "vigil-vm-backup: mon01: a link or not a directory"
    st = victim.stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)  # never given to the service user


# --- run: the destination checked, a swapped directory never marked complete ----------------------------


FAKE_VMBACKUP = """#!/usr/bin/python3
import os, sys
dst = [a for a in sys.argv if a.startswith("-dst=fs://")][0][len("-dst=fs://"):]
# a backup written where vmbackup was told (the directory the script holds open) ...
open(os.path.join(dst, "backup_complete.ignore"), "w").write("ok")
# ... while the attacker swaps the path for a link to a directory of their own
host = os.environ["HOST_DIR"]
name = [n for n in os.listdir(host) if n.endswith("Z")][0]
os.rename(os.path.join(host, name), os.path.join(host, "moved"))
os.mkdir(os.path.join(host, "elsewhere"))
os.symlink("elsewhere", os.path.join(host, name))
"""


def test_a_backup_directory_swapped_while_vmbackup_runs_is_never_marked_complete(
    tmp_path: Path, dst: Path
) -> None:
    host = dst / "mon01"
    host.mkdir(mode=0o700)
    fake = tmp_path / "vmbackup"
    fake.write_text(FAKE_VMBACKUP)
    fake.chmod(0o755)
    status = tmp_path / "status.json"
    res = script(
        "run", "--dst", str(dst), "--host", "mon01", "--vmbackup", str(fake),
        "--storage-data-path", str(tmp_path), "--status", str(status),
        env={**os.environ, "HOST_DIR": str(host)},
    )  # fmt: skip
    line = one_line(res)
    assert res.returncode == 2 and line.endswith(": replaced while vmbackup ran; not marked complete"), line
    assert not list(host.rglob("vigil-backup.json"))
    assert (host / "moved" / "backup_complete.ignore").is_file()  # written through the held directory
    assert not (host / "elsewhere" / "backup_complete.ignore").exists()


@pytest.mark.parametrize("mode", [0o770, 0o707])
def test_run_refuses_a_host_directory_others_may_write(tmp_path: Path, dst: Path, mode: int) -> None:
    (dst / "mon01").mkdir()
    (dst / "mon01").chmod(mode)
    res = script(
        "run", "--dst", str(dst), "--host", "mon01", "--vmbackup", "/bin/false",
        "--storage-data-path", str(tmp_path), "--status", str(tmp_path / "s.json"),
    )  # fmt: skip
    assert res.returncode == 2
    assert (
        one_line(res) == f"vigil-vm-backup: {dst}/mon01: writable by its group or by others (mode {mode:04o})"
    )
    assert os.listdir(dst / "mon01") == []


# --- textfile (root): the status read as data ------------------------------------------------------------


@pytest.fixture
def textfile(tmp_path: Path) -> Path:
    d = tmp_path / "textfile"
    d.mkdir(mode=0o755)
    return d


GOOD = {
    "format": 1,
    "last_run": 1796444660.9,
    "last_run_success": True,
    "completed": 2,
    "last": {
        "name": "20261205T042420Z",
        "started": 1796444600.5,
        "finished": 1796444660.9,
        "bytes": 953,
        "files": 14,
    },
}


def test_textfile_writes_the_metrics_promtool_accepts(tmp_path: Path, textfile: Path) -> None:
    status = tmp_path / "status.json"
    status.write_text(json.dumps(GOOD))
    res = script("textfile", "--status", str(status), "--textfile-dir", str(textfile))
    assert res.returncode == 0, res.stderr
    text = (textfile / "vigil_backup.prom").read_text()
    assert "vigil_backup_last_success_timestamp_seconds 1796444660.9\n" in text
    assert (
        "vigil_backup_last_duration_seconds 60.4\n" in text and "vigil_backup_last_size_bytes 953\n" in text
    )
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("link", "cannot open (Too many levels of symbolic links)"),
        ("fifo", "not a regular file"),
        ("x" * 70000, "larger than 65536 bytes"),
        ('{"format": 1, "last_run": NaN, "last_run_success": true, "completed": 0, "last": null}',
         "last_run or"),
        ('{"format": 1, "last_run": 1, "last_run_success": true, "completed": 0, "last": {"started": 5, '
         '"finished": 1, "bytes": 1, "files": 1}}', "last finished before it started"),
        ('{"format": 1, "last_run": 1, "last_run_success": "yes", "completed": 0, "last": null}',
         "last_run or"),
        ("[1, 2]", "not a status of format 1"),
    ],
)  # fmt: skip
def test_a_hostile_status_gives_one_line_and_only_the_unreadable_metric(
    tmp_path: Path, textfile: Path, content: str, reason: str
) -> None:
    status = tmp_path / "status.json"
    if content == "link":
        (tmp_path / "secret").write_text("root's\n")
        status.symlink_to(tmp_path / "secret")
    elif content == "fifo":
        os.mkfifo(status)
    else:
        status.write_text(content)
    res = script("textfile", "--status", str(status), "--textfile-dir", str(textfile))
    assert res.returncode == 2
    line = one_line(res)
    assert line.startswith(f"vigil-vm-backup: {status}: ") and reason in line, line
    text = (textfile / "vigil_backup.prom").read_text()
    assert "vigil_backup_status_readable 0\n" in text and "last_success" not in text and "root's" not in text


def test_textfile_refuses_a_directory_others_may_write(tmp_path: Path, textfile: Path) -> None:
    textfile.chmod(0o777)
    status = tmp_path / "status.json"
    status.write_text(json.dumps(GOOD))
    res = script("textfile", "--status", str(status), "--textfile-dir", str(textfile))
    assert res.returncode == 2
    assert one_line(res).endswith("the textfile directory must be root's and writable by root alone")
    assert os.listdir(textfile) == []


# --- restore (root, by hand): the backup read as data ----------------------------------------------------


def piece(d: Path, data: bytes, offset: int = 0, size: int | None = None, total: int | None = None) -> None:
    d.mkdir(parents=True, exist_ok=True)
    size = len(data) if size is None else size
    total = len(data) if total is None else total
    (d / f"{total:016X}_{offset:016X}_{size:016X}").write_bytes(data)


def backup_of(root: Path, files: dict[str, bytes]) -> Path:
    """A backup in vmbackup's fs:// layout, with both markers, holding FILES (path: content)."""
    root.mkdir()
    for path, data in files.items():
        piece(root / path, data)
    (root / "backup_complete.ignore").write_text("ok")
    doc = {"format": 1, "name": root.name, "files": len(files), "bytes": sum(map(len, files.values()))}
    (root / "vigil-backup.json").write_text(json.dumps(doc))
    return root


def restore(src: Path, to: Path) -> subprocess.CompletedProcess[str]:
    return script("restore", "--from", str(src), "--to", str(to))


def test_restore_rebuilds_each_file_from_its_pieces(tmp_path: Path) -> None:
    src = backup_of(tmp_path / "b", {"data/small/2025_10/p1/values.bin": b"v" * 10, "metadata/x": b"m"})
    big = src / "indexdb" / "big.bin"  # one file in three pieces, out of order on disk
    piece(big, b"CC", 4, 2, 6)
    piece(big, b"AA", 0, 2, 6)
    piece(big, b"BB", 2, 2, 6)
    doc = json.loads((src / "vigil-backup.json").read_text())
    (src / "vigil-backup.json").write_text(json.dumps({**doc, "files": 3, "bytes": 17}))
    res = restore(src, tmp_path / "data")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "data"
    assert (out / "data/small/2025_10/p1/values.bin").read_bytes() == b"v" * 10
    assert (out / "indexdb/big.bin").read_bytes() == b"AABBCC"
    assert sorted(p.name for p in out.iterdir()) == ["data", "indexdb", "metadata"]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("gap", "pieces do not cover the file exactly (gap or overlap at byte 2)"),
        ("short", "not a regular file of 4 bytes"),
        ("link", "not a directory (a link, or a file outside vmbackup's layout)"),
        ("mixed", "holds both a file's pieces and 'extra'"),
        ("stray", "not a directory (a link, or a file outside vmbackup's layout)"),
        ("counts", "(a damaged backup)"),
        ("marker", "backup_complete.ignore: cannot open (No such file or directory)"),
    ],
)
def test_restore_refuses_a_damaged_or_hostile_backup_and_makes_nothing(
    tmp_path: Path, damage: str, reason: str
) -> None:
    src = backup_of(tmp_path / "b", {"data/a": b"12345678"})
    f = src / "data" / "a"
    if damage == "gap":
        for p in f.iterdir():
            p.unlink()
        piece(f, b"12", 0, 2, 8)
        piece(f, b"5678", 4, 4, 8)
    elif damage == "short":
        for p in f.iterdir():
            p.unlink()
        piece(f, b"1234", 0, 4, 8)
        (f / f"{8:016X}_{4:016X}_{4:016X}").write_bytes(b"56")
    elif damage == "link":
        (tmp_path / "secret").mkdir()
        (src / "data" / "shadow").symlink_to(tmp_path / "secret")
    elif damage == "mixed":
        (f / "extra").write_text("x")
    elif damage == "stray":
        (src / "data" / "stray").write_text("x")
    elif damage == "counts":
        (src / "vigil-backup.json").write_text(json.dumps({"format": 1, "files": 2, "bytes": 8}))
    else:
        (src / "backup_complete.ignore").unlink()
    res = restore(src, tmp_path / "data")
    assert res.returncode == 2
    line = one_line(res)
    assert reason in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", *(["secret"] if damage == "link" else [])]


def test_restore_never_writes_over_an_existing_data_directory(tmp_path: Path) -> None:
    src = backup_of(tmp_path / "b", {"data/a": b"1"})
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep").write_text("old")
    res = restore(src, tmp_path / "data")
    assert res.returncode == 2
    assert (
        one_line(res) == f"vigil-vm-backup: {tmp_path / 'data'}: exists; move it aside first (docs/backup.md)"
    )
    assert os.listdir(tmp_path / "data") == ["keep"]
