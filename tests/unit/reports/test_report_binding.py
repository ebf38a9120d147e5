"""Each rendering (CSV, PDF) is bound to its report's JSON: the CSV and PDF of another report of the
same period, signed by the same key, pass ``minisign -V`` but not ``report verify`` or ``report export``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.reports.test_report_store import sample_doc
from vigil.installer.cli import main
from vigil.installer.reports import (
    ReportStore,
    ReportVerifyError,
    Stored,
    load_pub,
    report_key,
    verify_report,
)

MINISIGN = shutil.which("minisign")


def two_reports_of_one_period(home: Path) -> tuple[ReportStore, Stored, Stored]:
    store = ReportStore(home)
    a = store.add(sample_doc(8.0), generated_at="2026-01-01T00:00:00Z")
    b = store.add(sample_doc(9.0), generated_at="2026-01-01T00:00:00Z")
    assert (a.kind, a.label) == (b.kind, b.label) and a.sha256 != b.sha256
    return store, a, b


def swap_in(name: str, src: Path, dst: Path) -> None:
    """``name`` and its signature in directory ``dst`` replaced by those of directory ``src``."""
    for n in (name, f"{name}.minisig"):
        os.chmod(dst, 0o700)
        (dst / n).unlink()
        shutil.copyfile(src / n, dst / n)


def cli(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["--home", str(home), "report", *argv])
    out, err = capsys.readouterr()
    return rc, out.strip(), err.strip()


def minisign_ok(path: Path, pub: Path) -> bool:
    assert MINISIGN is not None
    run = [MINISIGN, "-V", "-m", str(path), "-x", f"{path}.minisig", "-p", str(pub)]
    return subprocess.run(run, capture_output=True, check=False).returncode == 0


@pytest.mark.parametrize("name", ["report.csv", "report.pdf"])
def test_a_rendering_of_another_report_of_the_same_period_fails_verify_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    home = tmp_path / "home"
    store, a, b = two_reports_of_one_period(home)
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    assert cli(capsys, home, "export", a.id, "--out", str(out_a))[0] == 0
    assert cli(capsys, home, "export", b.id, "--out", str(out_b))[0] == 0
    swap_in(name, out_b, out_a)
    if MINISIGN is not None:  # the attack's premise: the stock tool alone takes the swapped file
        assert minisign_ok(out_a / name, out_a / "report.pub")

    rc, out, err = cli(capsys, home, "verify", str(out_a / "report.json"), "--pub", str(out_a / "report.pub"))
    assert (rc, out) == (1, "")
    assert err.splitlines() == [
        f"FAIL: {out_a / name}: not a rendering of report.json (sha256:{a.sha256}): signed as the "
        f"{name[-3:]} of another report, sha256:{b.sha256}"
    ]
    # the untouched report still verifies, renderings and all
    rc, out, err = cli(capsys, home, "verify", str(out_b / "report.json"), "--pub", str(out_b / "report.pub"))
    assert rc == 0, err
    assert out == (
        f"OK: {out_b / 'report.json'}: usage report 2025-10, sha256 {b.sha256}, signed by key "
        f"{report_key(store.dir, create=False).id_hex}; report.csv, report.pdf bound to it"
    )


@pytest.mark.parametrize("name", ["report.csv", "report.pdf"])
def test_export_refuses_a_stored_rendering_of_another_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    home = tmp_path / "home"
    store, a, b = two_reports_of_one_period(home)
    swap_in(name, b.dir, a.dir)
    rc, _, err = cli(capsys, home, "export", a.id, "--out", str(tmp_path / "out"))
    assert rc == 1
    assert err.splitlines() == [
        f"FAIL: {a.dir / name}: not a rendering of report.json (sha256:{a.sha256}): signed as the "
        f"{name[-3:]} of another report, sha256:{b.sha256}"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # no export, no stage left
    rc, _, err = cli(capsys, home, "export", b.id, "--out", str(tmp_path / "b"))
    assert rc == 0, err
    assert verify_report(tmp_path / "b" / "report.json", load_pub(store.public_key_path)).renderings == (
        tmp_path / "b" / "report.csv",
        tmp_path / "b" / "report.pdf",
    )


def test_a_rendering_signed_with_another_comment_or_unsigned_is_refused(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    a = store.add(sample_doc(), generated_at="x")
    key = report_key(store.dir, create=False)
    pub = load_pub(store.public_key_path)
    out = tmp_path / "out"
    shutil.copytree(a.dir, out)
    os.chmod(out, 0o700)
    # signed by the report key, but its comment is the JSON's own, not the CSV's
    sig = out / "report.csv.minisig"
    sig.unlink()
    sig.write_text(
        key.sign_minisig(
            (out / "report.csv").read_bytes(), trusted_comment=f"vigil usage report 2025-10 sha256:{a.sha256}"
        ).to_text()
    )
    with pytest.raises(ReportVerifyError) as exc:
        verify_report(out / "report.json", pub)
    assert exc.value.obj == str(out / "report.csv")
    assert exc.value.reason.endswith(
        "its signature's trusted comment does not name it the csv of this report"
    )
    # a rendering without its signature
    sig.unlink()
    with pytest.raises(ReportVerifyError) as exc:
        verify_report(out / "report.json", pub)
    assert exc.value.obj == str(out / "report.csv") and "signature" in exc.value.reason
    # no rendering beside it: the JSON alone verifies, and the line says so
    for n in ("report.csv", "report.pdf", "report.pdf.minisig"):
        (out / n).unlink()
    verified = verify_report(out / "report.json", pub)
    assert (verified.sha256, verified.renderings) == (a.sha256, ())
    assert verified.renderings_note == "no rendering beside it"


def test_verifying_a_rendering_on_its_own_points_at_its_json(tmp_path: Path) -> None:
    store = ReportStore(tmp_path / "home")
    a = store.add(sample_doc(), generated_at="x")
    with pytest.raises(ReportVerifyError) as exc:
        verify_report(a.pdf_path, load_pub(store.public_key_path))
    assert exc.value.reason == (
        f"a rendering (pdf) of the report sha256:{a.sha256}, not a report: verify its report.json, "
        "which checks the renderings beside it"
    )
