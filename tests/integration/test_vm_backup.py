"""VictoriaMetrics' backup and restore (roles/victoriametrics/files/vigil_vm_backup.py, docs/backup.md)
proven with the real binaries of each channel we ship (debian: 1.79, debian-next: 1.112): neither
ships vmrestore, so the restore is the script's own, and it must give back exactly what was stored.

A VictoriaMetrics on 127.0.0.1 holds imported samples over two monthly partitions; three backups are
made through its snapshot API as the backup service makes them (the second and third hard-link what
the one before holds, the retention keeps two); the newest is restored into a data directory that did
not exist, and a second VictoriaMetrics started on it answers /api/v1/export and a query_range over
the whole range exactly as the first. A backup missing vmbackup's marker, or one piece of one file,
is refused in one line and leaves no data directory behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.components import fetched_bin, free_port

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "victoriametrics" / "files" / "vigil_vm_backup.py"
#: 2025-09-29 00:00 UTC: four days of one-minute samples cross into October (two partitions)
START = 1759104000
MINUTES = 4 * 1440
SERIES = 6


@pytest.fixture(scope="module", params=["debian", "debian-next"])
def shipped(
    request: pytest.FixtureRequest, vigil_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The victoria-metrics component of a channel's lock, fetched and checked as a build does."""
    _, bin_dir = fetched_bin(request.param, "victoria-metrics", vigil_cache, tmp_path_factory)
    assert (bin_dir / "vmbackup").is_file()
    assert not (bin_dir / "vmrestore").exists()  # what the restore below stands in for
    return bin_dir


def _get(url: str, data: bytes | None = None) -> bytes:
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=60) as resp:  # noqa: S310 - ours
        return bytes(resp.read())


class VM:
    def __init__(self, bin_dir: Path, data: Path) -> None:
        self.data = data
        self.url = f"http://127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [
                str(bin_dir / "victoria-metrics"),
                f"-storageDataPath={data}",
                f"-httpListenAddr={self.url[len('http://') :]}",
                "-retentionPeriod=100y",
                "-search.disableCache",
                "-loggerLevel=ERROR",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                _get(f"{self.url}/health")
                return
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, (
                    "VictoriaMetrics did not start"
                )
                time.sleep(0.1)

    def export(self) -> list[str]:
        q = urllib.parse.urlencode(
            {"match[]": '{__name__=~".+"}', "start": START - 60, "end": START + MINUTES * 60}
        )
        return sorted(_get(f"{self.url}/api/v1/export?{q}").decode().splitlines())

    def query_range(self) -> object:
        q = urllib.parse.urlencode(
            {
                "query": "sum by (s) (t_metric)",
                "start": START,
                "end": START + MINUTES * 60,
                "step": "300s",
                "nocache": 1,
            }
        )
        return json.loads(_get(f"{self.url}/api/v1/query_range?{q}"))["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _lines() -> bytes:
    out = []
    for s in range(SERIES):
        values = [float((i * 7 + s * 13) % 1000) / 8 for i in range(MINUTES)]
        stamps = [(START + i * 60) * 1000 for i in range(MINUTES)]
        out.append(
            json.dumps(
                {"metric": {"__name__": "t_metric", "s": str(s)}, "values": values, "timestamps": stamps}
            )
        )
    return "\n".join(out).encode()


def _on_disk(data: Path) -> bool:
    """The imported samples are in parts on disk (what a snapshot holds), in both partitions."""
    months = {p.parent.parent.name for p in (data / "data").glob("*/*/*/values.bin")}
    return {"2025_09", "2025_10"} <= months


@pytest.fixture
def source(shipped: Path, tmp_path: Path) -> Iterator[VM]:
    vm = VM(shipped, tmp_path / "data")
    try:
        _get(f"{vm.url}/api/v1/import", _lines())
        _get(f"{vm.url}/internal/force_flush")
        deadline = time.monotonic() + 60
        while not _on_disk(vm.data):
            assert time.monotonic() < deadline, "the imported samples never reached the disk"
            time.sleep(0.5)
        yield vm
    finally:
        vm.stop()


def backup(shipped: Path, vm: VM, dst: Path, status: Path, keep: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "snapshot_createURL": f"{vm.url}/snapshot/create"}
    argv = [
        sys.executable,
        "-I",
        str(SCRIPT),
        "run",
        "--dst",
        str(dst),
        "--host",
        "mon01",
        "--keep",
        str(keep),
    ]
    argv += [
        "--vmbackup",
        str(shipped / "vmbackup"),
        "--storage-data-path",
        str(vm.data),
        "--status",
        str(status),
    ]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    time.sleep(1.1)  # the next backup's name is the next second
    return res


def restore(src: Path, to: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-I", str(SCRIPT), "restore", "--from", str(src), "--to", str(to)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def test_a_backup_restored_without_vmrestore_answers_as_the_source(
    shipped: Path, source: VM, tmp_path: Path
) -> None:
    dst, status = tmp_path / "dst", tmp_path / "status.json"
    (dst / "mon01").mkdir(parents=True, mode=0o700)
    dst.chmod(0o755)
    want_export, want_range = source.export(), source.query_range()
    assert len(want_export) == SERIES and len(want_range) == SERIES

    for _ in range(3):
        res = backup(shipped, source, dst, status, keep=2)
        assert res.returncode == 0, res.stderr
    kept = sorted(p.name for p in (dst / "mon01").iterdir())
    assert len(kept) == 2, kept  # the oldest removed once the third completed
    older, newest = (dst / "mon01" / n for n in kept)
    doc = json.loads((newest / "vigil-backup.json").read_text())
    assert doc["origin"] == older.name and doc["bytes"] > 0
    # -origin on fs:// hard-links the files the newest complete backup holds (both channels)
    piece = next(p for p in newest.rglob("*") if p.is_file() and "values.bin" in p.parts)
    twin = older / piece.relative_to(newest)
    assert piece.stat().st_ino == twin.stat().st_ino
    st = json.loads(status.read_text())
    assert st["last_run_success"] is True and st["completed"] == 2 and st["last"]["name"] == newest.name

    to = tmp_path / "restored"
    res = restore(newest, to)
    assert res.returncode == 0, res.stderr
    copy = VM(shipped, to)
    try:
        assert copy.export() == want_export
        assert copy.query_range() == want_range
    finally:
        copy.stop()


def test_an_incomplete_or_damaged_backup_is_refused_and_nothing_is_made(
    shipped: Path, source: VM, tmp_path: Path
) -> None:
    dst, status = tmp_path / "dst", tmp_path / "status.json"
    (dst / "mon01").mkdir(parents=True, mode=0o700)
    res = backup(shipped, source, dst, status, keep=7)
    assert res.returncode == 0, res.stderr
    (made,) = (dst / "mon01").iterdir()

    no_marker = tmp_path / "no-marker"
    shutil.copytree(made, no_marker)
    (no_marker / "backup_complete.ignore").unlink()
    res = restore(no_marker, tmp_path / "r1")
    assert res.returncode == 2 and not (tmp_path / "r1").exists()
    assert res.stderr.strip().splitlines() == [
        f"vigil-vm-backup: {no_marker}/backup_complete.ignore: cannot open (No such file or directory)"
    ]

    torn = tmp_path / "torn"
    shutil.copytree(made, torn)
    values = next(p for p in torn.rglob("*") if p.is_file() and "values.bin" in p.parts)
    values.unlink()
    res = restore(torn, tmp_path / "r2")
    assert res.returncode == 2 and not (tmp_path / "r2").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".r2")] == []  # the staging removed too
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"vigil-vm-backup: {torn}: holds ") and line.endswith("(a damaged backup)")


# --- vigil backup status, from a real VictoriaMetrics holding the backup metrics -------------------------


def _vigil(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIGIL_HOME": str(home), "VIGIL_AUDIT_SYSLOG": ""}
    env.pop("VIGIL_VM_URL", None)
    exe = Path(sys.executable).with_name("vigil")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def _metrics(vm: VM, now: int, hosts: dict[str, dict[str, float]]) -> None:
    lines = []
    for host, values in hosts.items():
        for name, value in values.items():
            lines.append(f'vigil_backup_{name}{{instance="{host}",job="node_exporter"}} {value} {now * 1000}')
    _get(f"{vm.url}/api/v1/import/prometheus", "\n".join(lines).encode())
    _get(f"{vm.url}/internal/force_flush")


def test_backup_status_shows_each_host_and_fails_on_a_stale_one(shipped: Path, tmp_path: Path) -> None:
    vm = VM(shipped, tmp_path / "data")
    try:
        now = int(time.time())
        _metrics(
            vm,
            now,
            {
                "mon01": {
                    "last_success_timestamp_seconds": now - 3 * 3600,
                    "last_size_bytes": 3 * 1024**3,
                    "last_duration_seconds": 412.5,
                    "last_run_timestamp_seconds": now - 3 * 3600,
                    "last_run_success": 1,
                    "completed": 7,
                },
                "mon02": {
                    "last_success_timestamp_seconds": now - 3 * 86400,
                    "last_size_bytes": 1000,
                    "last_run_timestamp_seconds": now - 3600,
                    "last_run_success": 0,
                    "completed": 2,
                },
            },
        )
        home = tmp_path / "home"
        deadline = time.monotonic() + 30
        while True:  # the samples answer queries once VictoriaMetrics has indexed them
            res = _vigil(home, "backup", "status", "--vm", vm.url, "--json")
            if res.stdout.count('"host"') == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert res.returncode == 1, res.stderr
        got = {h["host"]: h for h in json.loads(res.stdout)}
        assert got["mon01"]["stale"] is False and got["mon01"]["size_bytes"] == 3 * 1024**3
        assert got["mon01"]["completed"] == 7 and got["mon01"]["last_run_ok"] is True
        assert got["mon02"]["stale"] is True and got["mon02"]["last_run_ok"] is False
        assert res.stderr.strip().splitlines() == [
            "FAIL: mon02: the newest complete backup is over 2 days old; see docs/runbooks/BackupStale.md"
        ]
        text = _vigil(home, "backup", "status", "--vm", vm.url)
        lines = text.stdout.splitlines()
        assert lines[0].split() == [
            "HOST",
            "LAST",
            "COMPLETE",
            "(UTC)",
            "AGE",
            "SIZE",
            "LAST",
            "RUN",
            "KEPT",
            "STATE",
        ]
        assert lines[1].startswith("mon01 ") and "3.0 h" in lines[1]
        assert "3.0 GiB" in lines[1] and lines[1].endswith("ok")
        assert "3.0 d" in lines[2] and "failed" in lines[2] and lines[2].endswith("STALE")
        # each status leaves an audit record, the stale host named
        show = _vigil(home, "audit", "show", "--json")
        records = [r for r in json.loads(show.stdout) if r.get("action") == "backup.status"]
        assert len(records) == 2 and records[-1]["object"] == vm.url
        assert records[-1]["details"]["stale"] == ["mon02"] and records[-1]["outcome"] == "failed"
    finally:
        vm.stop()


def test_backup_status_without_any_backup_metrics_says_how_to_enable_them(
    shipped: Path, tmp_path: Path
) -> None:
    vm = VM(shipped, tmp_path / "data")
    try:
        res = _vigil(tmp_path / "home", "backup", "status", "--vm", vm.url)
        assert res.returncode == 1 and res.stdout == ""
        assert res.stderr.strip().splitlines() == [
            f"FAIL: VictoriaMetrics {vm.url}: no host has backup metrics (vigil_backup_*): set "
            "victoriametrics_backup_enabled and victoriametrics_backup_dst, deploy, and wait for the first "
            "run (docs/backup.md)"
        ]
    finally:
        vm.stop()
