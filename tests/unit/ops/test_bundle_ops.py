"""Bundle operations as a second front end (the TUI) calls them: results, events and audit details."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import craft_bundle, make_key, make_trust
from vigil.bundle.errors import SignatureError, TrustError
from vigil.installer import ops
from vigil.installer.deploy import DeployError


@pytest.fixture
def signed(tmp_path: Path) -> dict[str, Path]:
    key = make_key(tmp_path, "k")
    make_trust(tmp_path / "trust.json", [key])
    bundle = craft_bundle(tmp_path / "out", [key], version=4)
    return {"bundle": bundle.path, "trust": tmp_path / "trust.json", "home": tmp_path / "home"}


def test_verify_streams_byte_progress_and_fills_the_record(signed: dict[str, Path]) -> None:
    events: list[ops.Event] = []
    inv = ops.Invocation(home=signed["home"], on_event=events.append)
    head = ops.verify_bundle(inv, signed["bundle"], signed["trust"])
    assert head.manifest.version == 4
    progress = [e for e in events if isinstance(e, ops.Bytes)]
    assert progress and {e.label for e in progress} == {f"verify {signed['bundle'].name}"}
    assert [e.done for e in progress] == sorted(e.done for e in progress)
    assert inv.object == str(signed["bundle"])
    assert inv.details["version"] == 4 and inv.details["trust"] == str(signed["trust"])
    assert inv.details["manifest_sha256"] == head.manifest_sha256


def test_without_a_trust_root_nothing_is_verified(signed: dict[str, Path]) -> None:
    inv = ops.Invocation(home=signed["home"])
    with pytest.raises(
        TrustError, match="no trust root installed; pass --trust or run `vigil trust install`"
    ):
        ops.import_bundle(inv, signed["bundle"])
    assert not (signed["home"] / "bundles").exists()


def test_install_then_import_uses_the_installed_root(signed: dict[str, Path], tmp_path: Path) -> None:
    inv = ops.Invocation(home=signed["home"])
    dest, root = ops.install_trust(inv, signed["trust"])
    assert dest == ops.installed_trust_path(signed["home"]) and inv.details["rotation"] is False
    result = ops.import_bundle(ops.Invocation(home=signed["home"]), signed["bundle"])
    assert result.version == 4 and (result.path / "manifest.json").is_file()
    # a bundle signed by a key outside the installed root is refused, and the store keeps what it had
    other = make_key(tmp_path, "other")
    foreign = craft_bundle(tmp_path / "foreign", [other], version=5)
    before = sorted(p.name for p in (signed["home"] / "bundles").iterdir())
    with pytest.raises(SignatureError):
        ops.import_bundle(ops.Invocation(home=signed["home"]), foreign.path)
    assert sorted(p.name for p in (signed["home"] / "bundles").iterdir()) == before
    assert "5" not in before


def test_deploy_refuses_an_older_trust_root_as_import_does(tmp_path: Path) -> None:
    """A deploy re-verifies the stored bundle: with --trust naming a root older than the installed
    one (which may still trust a revoked key) it is refused before anything else is read."""
    from vigil.bundle.trust import load_root, write_root

    a, b = make_key(tmp_path, "a"), make_key(tmp_path, "b")
    make_trust(tmp_path / "v1.json", [a])
    make_trust(tmp_path / "v2.json", [a, b], version=2)
    v2 = load_root(tmp_path / "v2.json")
    v2.sign(a.key)
    v2.sign(b.key)
    write_root(v2, tmp_path / "v2.json")
    home = tmp_path / "home"
    ops.install_trust(ops.Invocation(home=home), tmp_path / "v1.json")
    ops.install_trust(ops.Invocation(home=home), tmp_path / "v2.json")
    inv = ops.Invocation(home=home)
    with pytest.raises(TrustError, match="older than the installed trust root"):
        ops.plan_deploy(inv, inventory=tmp_path / "no-inventory", trust=tmp_path / "v1.json")
    assert inv.details["trust"] == str(tmp_path / "v1.json")
    # the installed root is used when none is named (and then the missing inventory is what fails)
    with pytest.raises(DeployError, match="no-inventory"):
        ops.plan_deploy(ops.Invocation(home=home), inventory=tmp_path / "no-inventory")
