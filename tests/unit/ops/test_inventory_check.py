"""`vigil inventory check`: the deploy's inventory check and the roles' argument specs, offline, with
one audit record, against the repository's roles (--ansible-dir) or none when no bundle is imported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli import REPO
from vigil.installer.cli import main

EXAMPLE = REPO / "inventories" / "example"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    return home


def records(home: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (home / "audit" / "log.jsonl").read_text().splitlines()]


def test_the_example_passes_and_the_check_is_recorded(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "check", "-i", str(EXAMPLE), "--ansible-dir", str(REPO), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["groups"]["monitoring"] == ["mon01", "mon02"] and len(out["selected"]) == 19
    assert out["specs_checked"] and out["checked"] > 80 and out["findings"] == []
    last = records(home)[-1]
    assert (last["action"], last["outcome"], last["object"]) == ("inventory.check", "ok", str(EXAMPLE))
    assert last["details"]["refused"] == 0  # type: ignore[index]


def test_a_refused_variable_is_listed_then_failed_in_one_line(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    (inv / "host_vars" / "gpu003.yml").write_text("dcgm_exporter_mode: emulated\n")
    assert main(["inventory", "check", "-i", str(inv), "--ansible-dir", str(REPO)]) == 1
    cap = capsys.readouterr()
    assert "  role dcgm_exporter: " in cap.out and cap.out.rstrip().endswith("(host gpu003)")
    (fail,) = [ln for ln in cap.err.splitlines() if ln.startswith("FAIL: ")]
    assert fail.startswith(f"FAIL: {inv}: role dcgm_exporter: ") and fail.endswith("; nothing was changed")
    last = records(home)[-1]
    assert last["action"] == "inventory.check" and last["outcome"] != "ok"
    assert "dcgm_exporter_mode" in str(last["reason"])


def test_without_a_bundle_the_specs_are_said_to_be_unchecked(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inventory", "check", "-i", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "roles' argument specs: not checked (no bundle imported" in out
    assert out.splitlines()[-1] == f"OK: {EXAMPLE}: 19 hosts checked; nothing contacted"


def test_a_broken_inventory_fails_as_deploy_fails(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    (inv / "hosts.yml").write_text((EXAMPLE / "hosts.yml").read_text().replace("monitoring:", "monitor:"))
    assert main(["inventory", "check", "-i", str(inv), "--ansible-dir", str(REPO)]) == 1
    err = capsys.readouterr().err
    assert f"FAIL: {inv}: group 'monitor' is not one vigil knows" in err


# --- `vigil inventory edit`: the shared variables replaced only when the inventory still passes ---


def _site(tmp_path: Path) -> tuple[Path, Path]:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    all_yml = inv / "group_vars" / "all.yml"
    all_yml.chmod(0o640)
    return inv, all_yml


def _edit(inv: Path, text: str, tmp_path: Path, *extra: str) -> int:
    new = tmp_path / "new.yml"
    new.write_text(text)
    return main(["inventory", "edit", "-i", str(inv), "--vars", str(new), "--ansible-dir", str(REPO), *extra])


def test_an_edit_that_passes_is_written_in_place_and_recorded(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib

    inv, all_yml = _site(tmp_path)
    before = hashlib.sha256(all_yml.read_bytes()).hexdigest()
    text = all_yml.read_text().replace("node_exporter_port: 9100", "node_exporter_port: 9101")
    assert _edit(inv, text, tmp_path, "--expect-sha256", before) == 0
    assert all_yml.read_text() == text
    assert all_yml.stat().st_mode & 0o777 == 0o640  # the file's mode is kept
    assert capsys.readouterr().out.startswith(f"OK: {all_yml}: written (sha256 ")
    last = records(home)[-1]
    assert (last["action"], last["outcome"], last["object"]) == ("inventory.edit", "ok", str(all_yml))
    details = last["details"]
    assert details["sha256_before"] == before  # type: ignore[index]
    assert details["sha256_after"] == hashlib.sha256(text.encode()).hexdigest()  # type: ignore[index]
    assert sorted(p.name for p in inv.parent.iterdir()) == ["home", "inv", "new.yml"]  # no staging left


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "node_exporter_port: nine\n",
            "with these variables: role node_exporter: argument 'node_exporter_port'",
        ),
        ("- a\n- list\n", "must be a mapping of variable names, not a list"),
        ("a: [unclosed\n", "not valid YAML: "),
        ("'not a name': 1\n", "'not a name' is not a variable name"),
    ],
    ids=["refused-by-a-role", "not-a-mapping", "bad-yaml", "bad-name"],
)
def test_a_bad_edit_writes_nothing_and_says_why(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, why: str
) -> None:
    inv, all_yml = _site(tmp_path)
    original = all_yml.read_bytes()
    assert _edit(inv, text, tmp_path) == 1
    (fail,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("FAIL: ")]
    assert fail.startswith(f"FAIL: {all_yml}: ") and why in fail, fail
    assert fail.endswith("nothing was written")
    assert all_yml.read_bytes() == original
    assert records(home)[-1]["outcome"] != "ok"


def test_a_file_changed_since_it_was_read_is_not_overwritten(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv, all_yml = _site(tmp_path)
    original = all_yml.read_bytes()
    assert _edit(inv, "node_exporter_port: 9101\n", tmp_path, "--expect-sha256", "0" * 64) == 1
    assert "changed on disk since it was read" in capsys.readouterr().err
    assert all_yml.read_bytes() == original


def test_a_link_in_place_of_the_file_is_refused_and_its_target_untouched(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv, all_yml = _site(tmp_path)
    target = tmp_path / "elsewhere.yml"
    target.write_text("precious: true\n")
    all_yml.unlink()
    all_yml.symlink_to(target)
    assert _edit(inv, "node_exporter_port: 9101\n", tmp_path) == 1
    assert "is not a regular file (a link or a directory); refusing to edit it" in capsys.readouterr().err
    assert target.read_text() == "precious: true\n" and all_yml.is_symlink()


def test_an_inventory_file_has_no_shared_variables_to_edit(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _edit(EXAMPLE / "hosts.yml", "a: 1\n", tmp_path) == 1
    assert (
        "is a file; shared variables live in an inventory directory's group_vars/" in capsys.readouterr().err
    )
