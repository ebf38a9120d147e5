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
    assert out["groups"]["monitoring"] == ["mon01"] and len(out["selected"]) == 18
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
    assert out.splitlines()[-1] == f"OK: {EXAMPLE}: 18 hosts checked; nothing contacted"


def test_a_broken_inventory_fails_as_deploy_fails(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    (inv / "hosts.yml").write_text((EXAMPLE / "hosts.yml").read_text().replace("monitoring:", "monitor:"))
    assert main(["inventory", "check", "-i", str(inv), "--ansible-dir", str(REPO)]) == 1
    err = capsys.readouterr().err
    assert f"FAIL: {inv}: group 'monitor' is not one vigil knows" in err
