"""A run's key (installer/deploy/fingerprint.py): what a role's fingerprint on a host is compared
with besides the host itself. It changes with every input a run has on the admin host, and with
nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vigil.installer.deploy.fingerprint import run_key


def _run(tmp: Path) -> dict[str, Any]:
    ansible = tmp / "ansible"
    (ansible / "roles" / "thing" / "tasks").mkdir(parents=True)
    (ansible / "roles" / "thing" / "tasks" / "main.yml").write_text("---\n[]\n")
    (ansible / "playbooks").mkdir()
    (ansible / "playbooks" / "site.yml").write_text("---\n[]\n")
    inv = tmp / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    ca = tmp / "bmc-ca.crt"
    ca.write_text("CA 1\n")
    (inv / "hosts.yml").write_text(
        f"all:\n  hosts:\n    mon01: {{redfish_ca_file: {ca}, secret: !vault '$ANSIBLE_VAULT;1.1;AES256'}}\n"
    )
    (inv / "group_vars" / "all.yml").write_text("retention_months: 13\n")
    home = tmp / "home"
    (home / "secrets" / "pki").mkdir(parents=True)
    (home / "secrets" / "grafana-admin-password-mon01").write_text("pw1\n")
    bundle = home / "bundles" / "1" / "files"
    bundle.mkdir(parents=True)
    (bundle / "big").write_text("bundle file\n")
    extravars = {
        "vigil_run_id": "run-1",
        "vigil_home": str(home),
        "vigil_bundle_dir": str(bundle),
        "vigil_pki_dir": str(home / "secrets" / "pki"),
        "vigil_artifacts": {"bin/thing": {"src": str(bundle / "big")}},
    }
    return {
        "ansible_dir": ansible,
        "inventory": inv,
        "extravars": extravars,
        "ca": ca,
        "home": home,
        "bundle": bundle,
    }


def _key(run: dict[str, Any]) -> str:
    return run_key(ansible_dir=run["ansible_dir"], inventory=run["inventory"], extravars=run["extravars"])


KEY_CHANGES = {
    "a role's file": lambda r: (r["ansible_dir"] / "roles" / "thing" / "tasks" / "main.yml").write_text(
        "---\n[{}]\n"
    ),
    "an inventory variable": lambda r: (r["inventory"] / "group_vars" / "all.yml").write_text(
        "retention_months: 24\n"
    ),
    "a file an inventory variable names": lambda r: r["ca"].write_text("CA 2\n"),
    "a secret the roles read by their own path": lambda r: (
        r["home"] / "secrets" / "grafana-admin-password-mon01"
    ).write_text("pw2\n"),
    "an issued certificate": lambda r: (r["home"] / "secrets" / "pki" / "mon01.crt").write_text("new\n"),
    "an extra var": lambda r: r["extravars"].update(vigil_bundle_version=2),
}


@pytest.mark.parametrize("change", list(KEY_CHANGES))
def test_the_key_changes_with_each_input(tmp_path: Path, change: str) -> None:
    run = _run(tmp_path)
    before = _key(run)
    assert _key(run) == before and len(before) == 64
    KEY_CHANGES[change](run)
    assert _key(run) != before


def test_the_key_ignores_the_run_id_and_the_bundles_files(tmp_path: Path) -> None:
    run = _run(tmp_path)
    before = _key(run)
    run["extravars"]["vigil_run_id"] = "run-2"
    (run["bundle"] / "big").write_text("covered by the manifest's sha256\n")
    assert _key(run) == before
