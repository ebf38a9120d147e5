"""`vigil audit` end to end: the installed `vigil` executable in separate processes."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

VIGIL = Path(sys.executable).parent / "vigil"


def _unprotect(root: Path) -> None:
    chattr = shutil.which("chattr")
    files = [str(p) for p in root.rglob("*.jsonl")] if root.exists() else []
    if chattr and files:
        subprocess.run([chattr, "-a", *files], stderr=subprocess.DEVNULL, check=False)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    h = tmp_path / "vigil"
    yield h
    _unprotect(tmp_path)


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def vigil(home: Path) -> Run:
    def run(*argv: str, vigil_home: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIGIL_HOME", "VIGIL_OPERATOR")}
        env["VIGIL_HOME"] = str(vigil_home or home)
        return subprocess.run([str(VIGIL), *argv], env=env, capture_output=True, text=True, timeout=60)

    return run


def _records(home: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (home / "audit" / "log.jsonl").read_text().splitlines()]


def _checkpoints(home: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (home / "audit" / "checkpoints.jsonl").read_text().splitlines()]


def _append_only_supported(tmp_path: Path) -> bool:
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    probe = tmp_path / "probe"
    probe.write_text("")
    if subprocess.run([chattr, "+a", str(probe)], capture_output=True).returncode != 0:
        return False
    subprocess.run([chattr, "-a", str(probe)], check=True)
    return True


def test_fresh_home_verifies_then_records(vigil: Run, home: Path) -> None:
    first = vigil("audit", "verify")
    assert (first.returncode, first.stdout) == (0, "OK: audit: 0 records, 0 checkpoints, head 000000000000\n")
    second = vigil("audit", "verify")
    head = _records(home)[0]["hash"]
    assert second.returncode == 0
    assert second.stdout == f"OK: audit: 1 records, 1 checkpoints, head {head[:12]}\n"


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--bogus"], "vigil: the following arguments are required: COMMAND"),
        (["--bogus-option", "audit", "show"], "vigil: unrecognized arguments: --bogus-option"),
        (["audit", "export"], "vigil audit export: the following arguments are required: --out"),
    ],
)
def test_usage_error_appends_refused_record(vigil: Run, home: Path, argv: list[str], reason: str) -> None:
    result = vigil(*argv)
    assert result.returncode != 0
    assert result.stderr.splitlines()[0] == f"FAIL: {reason}"
    (record,) = _records(home)
    assert (record["outcome"], record["reason"], record["details"]["argv"]) == ("refused", reason, argv)
    (cp,) = _checkpoints(home)
    assert (cp["count"], cp["head"]) == (1, record["hash"])


def test_every_command_leaves_a_record_and_a_checkpoint(vigil: Run, home: Path) -> None:
    for argv in (["audit", "checkpoint"], ["audit", "show"], ["--operator", "carol", "audit", "verify"]):
        assert vigil(*argv).returncode == 0
    records = _records(home)
    assert [r["action"] for r in records] == ["audit.checkpoint", "audit.show", "audit.verify"]
    assert records[2]["actor"]["operator"] == "carol"
    assert records[2]["details"]["records"] == 2  # verify ran before its own record
    assert _checkpoints(home)[-1]["count"] == 3


def test_show_json_and_csv(vigil: Run, home: Path) -> None:
    vigil("audit", "checkpoint")
    vigil("--nope")
    shown = json.loads(vigil("audit", "show", "--json").stdout)
    assert [r["seq"] for r in shown] == [1, 2]
    assert shown[1]["outcome"] == "refused"
    refused = json.loads(vigil("audit", "show", "--json", "--action", "vigil.usage").stdout)
    assert [r["seq"] for r in refused] == [2]
    rows = list(csv.DictReader(io.StringIO(vigil("audit", "show", "--csv", "--since", "2000-01-01").stdout)))
    assert [r["action"] for r in rows] == ["audit.checkpoint", "vigil.usage", "audit.show", "audit.show"]
    assert json.loads(rows[1]["details"])["argv"] == ["--nope"]
    later = vigil("audit", "show", "--since", "2999-01-01T00:00:00Z")
    assert (later.returncode, later.stdout) == (0, "")


def test_modes_and_append_only(vigil: Run, home: Path, tmp_path: Path) -> None:
    assert vigil("audit", "checkpoint").returncode == 0
    audit = home / "audit"
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(audit) == 0o750
    assert mode(audit / "log.jsonl") == 0o640
    assert mode(audit / "checkpoints.jsonl") == 0o640
    assert mode(audit / "audit.key") == 0o600
    assert (audit / "audit.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    if _append_only_supported(tmp_path):
        attrs = subprocess.run(["lsattr", str(audit / "log.jsonl")], capture_output=True, text=True).stdout
        assert "a" in attrs.split()[0]
        with pytest.raises(PermissionError):
            (audit / "log.jsonl").write_text("")  # not even root rewrites it without chattr -a
    assert vigil("audit", "verify").returncode == 0  # appending still works
    assert len(_records(home)) == 2


def test_export_then_verify_copy_with_only_public_key(vigil: Run, home: Path, tmp_path: Path) -> None:
    for argv in (["audit", "checkpoint"], ["--bad"], ["audit", "show"]):
        vigil(*argv)
    # 4 checkpoints: `audit checkpoint` on the empty log signed the genesis head, then one per command
    out = tmp_path / "media" / "audit-2026-11"
    out.parent.mkdir()
    result = vigil("audit", "export", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"OK: audit: exported 3 records, 4 checkpoints to {out}\n"
    assert sorted(p.name for p in out.iterdir()) == [
        "audit-key-id",
        "audit.pub",
        "checkpoints.jsonl",
        "log.jsonl",
    ]
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert stat.S_IMODE((out / "log.jsonl").stat().st_mode) == 0o640
    assert not list(out.parent.glob(".*"))  # the staging directory is gone

    # the auditor's machine: another place, a vigil home of its own, only the public key
    copy = tmp_path / "auditor" / "copy"
    shutil.copytree(out, copy)
    elsewhere = tmp_path / "auditor" / "home"
    args = [
        "audit",
        "verify",
        "--log",
        str(copy / "log.jsonl"),
        "--checkpoints",
        str(copy / "checkpoints.jsonl"),
        "--checkpoint-key",
        str(copy / "audit.pub"),
    ]
    ok = vigil(*args, vigil_home=elsewhere)
    head = [json.loads(x) for x in (copy / "log.jsonl").read_text().splitlines()][-1]["hash"]
    assert (ok.returncode, ok.stdout) == (0, f"OK: audit: 3 records, 4 checkpoints, head {head[:12]}\n")

    # the copy is as tamper-evident as the original
    lines = (copy / "log.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"refused"', '"ok"')
    (copy / "log.jsonl").write_text("".join(lines))
    bad = vigil(*args, vigil_home=elsewhere)
    assert bad.returncode == 1
    assert bad.stderr.splitlines()[0] == "FAIL: audit: record 2: hash mismatch (record edited)"

    # the host's log went on: the export itself is recorded after the copy was taken
    assert [r["action"] for r in _records(home)][-1] == "audit.export"


def test_export_refuses_an_existing_directory(vigil: Run, home: Path, tmp_path: Path) -> None:
    out = tmp_path / "exists"
    out.mkdir()
    result = vigil("audit", "export", "--out", str(out))
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == f"FAIL: audit: export {out}: already exists"
    assert list(out.iterdir()) == []
    assert _records(home)[-1]["outcome"] == "failed"


def test_concurrent_vigil_processes(vigil: Run, home: Path) -> None:
    env = {**os.environ, "VIGIL_HOME": str(home)}
    loop = f'for i in 1 2 3; do "{VIGIL}" audit checkpoint >/dev/null || exit 1; done'
    procs = [subprocess.Popen(["sh", "-c", loop], env=env) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    result = vigil("audit", "verify")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK: audit: 9 records, ")
    assert [r["seq"] for r in _records(home)] == list(range(1, 11))


def test_unwritable_audit_dir_fails_the_command(vigil: Run, home: Path) -> None:
    home.mkdir()
    (home / "audit").write_text("a file where the directory should be")
    result = vigil("audit", "show")
    assert result.returncode == 1
    assert f"FAIL: audit: {home / 'audit'}: cannot write (not a directory)" in result.stderr.splitlines()
