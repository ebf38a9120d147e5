"""Store, signature and verification: canonical bytes, stock minisign, edits, links, atomicity."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from vigil.basics.canonical import canonical_json
from vigil.installer.reports import (
    ReportError,
    ReportStore,
    ReportVerifyError,
    Usage,
    export_report,
    load_pub,
    parse_period,
    usage_document,
    verify_file,
)

MINISIGN = shutil.which("minisign")


def sample_doc(hours: float = 8.0) -> dict[str, Any]:
    usage = Usage(parse_period("2025-10"))
    usage.gpu_hours[("physics", "alice")] = hours
    usage.joules[("physics", "alice")] = hours * 350 * 3600
    usage.jobs[("physics", "alice")] = {"101"}
    usage.gpu_hours[("chemistry", "carol")] = 13.0000000001
    usage.joules[("chemistry", "carol")] = 13 * 350 * 3600
    usage.jobs[("chemistry", "carol")] = {"100", "201"}
    usage.raw_hours = 744
    return usage_document(usage, vm_url="http://127.0.0.1:8428")


def store_files(store: ReportStore) -> dict[str, bytes]:
    return {
        str(p.relative_to(store.dir)): p.read_bytes()
        for p in sorted(store.dir.rglob("*"))
        if p.is_file() and "key" not in p.parts
    }


def test_the_same_document_gives_the_same_bytes_digest_and_signature(tmp_path: Path) -> None:
    doc = sample_doc()
    shuffled = json.loads(json.dumps(doc, sort_keys=False))
    shuffled = dict(reversed(list(shuffled.items())))
    assert canonical_json(doc) == canonical_json(shuffled)
    store = ReportStore(tmp_path / "home")
    a = store.add(doc, generated_at="2026-01-01T00:00:00Z")
    sig = (a.dir / "report.json.minisig").read_bytes()
    b = store.add(sample_doc(), generated_at="2026-01-02T00:00:00Z")
    assert (a.sha256, a.new, b.new) == (b.sha256, True, False)
    assert (b.dir / "report.json.minisig").read_bytes() == sig
    assert [e["generated"] for e in store.entries()] == ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
    assert [e["seq"] for e in store.entries()] == [1, 2]


def test_numbers_are_rounded_to_fixed_decimals(tmp_path: Path) -> None:
    doc = sample_doc()
    chem = doc["accounts"][0]
    assert chem["account"] == "chemistry" and chem["gpu_hours"] == 13.0 and chem["gpu_energy_kwh"] == 4.55
    assert b'"gpu_hours":13.0,' in canonical_json(doc)
    assert doc["totals"] == {"gpu_hours": 21.0, "active_gpu_hours": 0.0, "gpu_energy_kwh": 7.35, "jobs": 3}


def test_no_generation_time_inside_the_signed_json(tmp_path: Path) -> None:
    text = canonical_json(sample_doc()).decode()
    assert "generated" not in text and "2026-" not in text


def test_the_key_is_made_once_0600_in_its_own_0700_dir(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    store.add(sample_doc(), generated_at="x")
    key = store.dir / "key" / "report.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((store.dir / "key").stat().st_mode) == 0o700
    assert stat.S_IMODE(store.dir.stat().st_mode) == 0o700
    before = key.read_bytes()
    store.add(sample_doc(9.0), generated_at="y")
    assert key.read_bytes() == before


@pytest.mark.skipif(MINISIGN is None, reason="minisign is not installed")
def test_stock_minisign_verifies_a_stored_report_and_rejects_a_one_character_edit(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    stored = store.add(sample_doc(), generated_at="x")
    pub = store.public_key_path
    run = [
        str(MINISIGN),
        "-V",
        "-m",
        str(stored.json_path),
        "-x",
        f"{stored.json_path}.minisig",
        "-p",
        str(pub),
    ]
    res = subprocess.run(run, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert f"sha256:{stored.sha256}" in res.stdout
    csv = stored.csv_path
    res = subprocess.run(
        [str(MINISIGN), "-V", "-m", str(csv), "-x", f"{csv}.minisig", "-p", str(pub)],
        capture_output=True,
        check=False,
    )
    assert res.returncode == 0
    edited = tmp_path / "edited.json"
    edited.write_bytes(stored.json_path.read_bytes().replace(b'"gpu_hours":8.0', b'"gpu_hours":9.0', 1))
    assert edited.read_bytes() != stored.json_path.read_bytes()
    shutil.copy(f"{stored.json_path}.minisig", f"{edited}.minisig")
    res = subprocess.run(
        [str(MINISIGN), "-V", "-m", str(edited), "-x", f"{edited}.minisig", "-p", str(pub)],
        capture_output=True,
        check=False,
    )
    assert res.returncode != 0
    with pytest.raises(ReportVerifyError, match="does not match"):
        verify_file(edited, load_pub(pub))


def test_verify_checks_canonical_form_and_the_named_digest(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    stored = store.add(sample_doc(), generated_at="x")
    pub = load_pub(store.public_key_path)
    ok = verify_file(stored.json_path, pub)
    assert (ok.kind, ok.label, ok.sha256) == ("usage", "2025-10", stored.sha256)
    # a signed file that is not canonical JSON, signed by the same key: refused
    from vigil.installer.reports.keys import report_key

    key = report_key(store.dir, create=False)
    pretty = tmp_path / "pretty.json"
    data = json.dumps(sample_doc(), indent=1).encode()
    pretty.write_bytes(data)
    Path(f"{pretty}.minisig").write_text(key.sign_minisig(data, trusted_comment="x").to_text())
    with pytest.raises(ReportVerifyError, match="not canonical"):
        verify_file(pretty, pub)
    # canonical and signed, but the trusted comment names another report
    other = tmp_path / "other.json"
    other.write_bytes(canonical_json(sample_doc()))
    Path(f"{other}.minisig").write_text(
        key.sign_minisig(other.read_bytes(), trusted_comment="vigil usage report 2025-10 sha256:00").to_text()
    )
    with pytest.raises(ReportVerifyError, match="does not name this report"):
        verify_file(other, pub)
    # no signature file
    lone = tmp_path / "lone.json"
    lone.write_bytes(canonical_json(sample_doc()))
    with pytest.raises(ReportVerifyError, match="signature"):
        verify_file(lone, pub)


def test_another_key_is_refused(tmp_path: Path) -> None:
    a = ReportStore(tmp_path / "a")
    b = ReportStore(tmp_path / "b")
    stored = a.add(sample_doc(), generated_at="x")
    b.add(sample_doc(), generated_at="x")
    with pytest.raises(ReportVerifyError, match="signature is by key"):
        verify_file(stored.json_path, load_pub(b.public_key_path))


@pytest.mark.parametrize("what", ["reports", "objects", "index", "key"])
def test_symlinked_store_parts_are_refused_and_nothing_is_written(tmp_path: Path, what: str) -> None:
    home = tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    store = ReportStore(home)
    home.mkdir()
    if what == "reports":
        store.dir.symlink_to(elsewhere)
    else:
        store.dir.mkdir(mode=0o700)
        target = {"objects": store.objects, "index": store.index, "key": store.dir / "key"}[what]
        if what == "index":
            store.objects.mkdir(mode=0o700)
            (elsewhere / "index.jsonl").write_text("")
            target.symlink_to(elsewhere / "index.jsonl")
        else:
            if what == "key":
                store.objects.mkdir(mode=0o700)
            target.symlink_to(elsewhere)
    with pytest.raises(ReportError, match="symbolic link"):
        store.add(sample_doc(), generated_at="x")
    assert list(elsewhere.rglob("*")) in ([], [elsewhere / "index.jsonl"])
    assert (elsewhere / "index.jsonl").read_text() == "" if what == "index" else True


def test_a_store_others_may_write_is_refused(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    store.add(sample_doc(), generated_at="x")
    os.chmod(store.dir, 0o777)
    with pytest.raises(ReportError, match="writable by others"):
        store.add(sample_doc(9.0), generated_at="x")
    assert len(store.index.read_text().splitlines()) == 1


def test_a_failed_write_leaves_no_stage_and_no_index_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ReportStore(tmp_path / "home")
    store.add(sample_doc(), generated_at="x")
    before = store_files(store)

    def boom(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError, match="No space"):
        store.add(sample_doc(9.0), generated_at="y")
    monkeypatch.undo()
    assert store_files(store) == before
    assert not [p for p in store.objects.iterdir() if p.name.startswith(".stage-")]


def test_a_tampered_stored_report_is_noticed_on_regeneration(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    stored = store.add(sample_doc(), generated_at="x")
    os.chmod(stored.json_path, 0o644)
    stored.json_path.write_bytes(stored.json_path.read_bytes().replace(b"8.0", b"9.0", 1))
    with pytest.raises(ReportError, match="differs from the report named by its digest"):
        store.add(sample_doc(), generated_at="y")
    assert len(store.entries()) == 1


def test_find_by_prefix_and_refusals(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    a = store.add(sample_doc(), generated_at="x")
    assert store.find(a.sha256[:8]).sha256 == a.sha256
    assert store.find("sha256:" + a.sha256.upper()).sha256 == a.sha256
    with pytest.raises(ReportError, match="not a report id"):
        store.find("../../etc")
    with pytest.raises(ReportError, match="not in"):
        store.find("0" * 12)
    store.index.write_text(store.index.read_text() + "garbage\n")
    with pytest.raises(ReportError, match="line 2 is not an index entry"):
        store.entries()


def test_export_has_everything_to_verify_without_vigil(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    stored = store.add(sample_doc(), generated_at="x")
    out = export_report(stored, store.public_key_path, "ID", tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == [
        "README.txt",
        "report.csv",
        "report.csv.minisig",
        "report.json",
        "report.json.minisig",
        "report.pdf",
        "report.pdf.minisig",
        "report.pub",
    ]
    readme = (out / "README.txt").read_text()
    assert "minisign -V -m report.json -x report.json.minisig -p report.pub" in readme
    assert "minisign -V -m report.pdf -x report.pdf.minisig -p report.pub" in readme
    verify_file(out / "report.json", load_pub(out / "report.pub"))
    with pytest.raises(ReportError, match="already exists"):
        export_report(stored, store.public_key_path, "ID", out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
