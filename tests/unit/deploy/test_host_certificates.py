"""Deploy issues each host's TLS server certificate from the site CA before the playbook runs
(installer/deploy/tls.py): once, with the host's names and address, again only on the CA's rule;
a `--check` run issues nothing; an encrypted CA key stops the deploy in one line saying what to run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from vigil.installer import pki
from vigil.installer.deploy.credentials import CredentialError
from vigil.installer.deploy.inventory import Inventory, load_inventory
from vigil.installer.deploy.tls import host_certificates, names_of

ADDRESSES = {"mon01": "198.18.0.10", "gpu01": "gpu01.lab.internal", "gpu02": "{{ templated }}"}


def inventory(addresses: dict[str, str] = ADDRESSES, selected: list[str] | None = None) -> Inventory:
    hosts = sorted(addresses)
    return Inventory(path=Path("inv"), hosts=hosts, selected=selected or hosts, addresses=addresses)


def san(home: Path, host: str) -> tuple[list[str], list[str]]:
    cert = x509.load_pem_x509_certificate((pki.PkiPaths.of(home).issued(host) / "server.crt").read_bytes())
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return sorted(ext.get_values_for_type(x509.DNSName)), sorted(
        str(a) for a in ext.get_values_for_type(x509.IPAddress)
    )


def test_names_of_an_address_a_dns_name_and_neither() -> None:
    assert names_of("198.18.0.10") == ([], ["198.18.0.10"])
    assert names_of("fd00::1") == ([], ["fd00::1"])
    assert names_of("gpu01.lab.internal") == (["gpu01.lab.internal"], [])
    assert names_of("{{ templated }}") == ([], [])
    assert names_of("") == ([], [])


def test_the_first_deploy_makes_the_ca_and_every_certificate_the_next_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = host_certificates(home, inventory(), check=False)
    assert first.ca_made is True
    assert first.issued == {"gpu01": "missing", "gpu02": "missing", "mon01": "missing"}
    assert first.hosts == ["gpu01", "gpu02", "mon01"]
    assert san(home, "mon01") == (["mon01"], ["198.18.0.10"])
    assert san(home, "gpu01") == (["gpu01", "gpu01.lab.internal"], [])
    assert san(home, "gpu02") == (["gpu02"], [])
    key = pki.PkiPaths.of(home).issued("mon01") / "server.key"
    assert key.stat().st_mode & 0o777 == 0o600
    # and a client certificate each (the audit trail's forwarding), by its inventory name only
    assert first.clients == first.issued
    issued = pki.PkiPaths.of(home).issued("gpu01")
    client = x509.load_pem_x509_certificate((issued / "client.crt").read_bytes())
    eku = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
    assert client.subject.rfc4514_string() == "CN=gpu01"
    assert (issued / "client.key").stat().st_mode & 0o777 == 0o600
    ev = first.extravars(home)
    assert ev == {
        "vigil_pki_dir": str(home / "secrets" / "pki"),
        "vigil_tls_hosts": ["gpu01", "gpu02", "mon01"],
        "vigil_scrape_user": "vigil-scrape",
        "vigil_scrape_password_file": str(home / "secrets" / "scrape.password"),
        "vigil_scrape_bcrypt_file": str(home / "secrets" / "scrape.password.bcrypt"),
        "vigil_scrape_sha256_file": str(home / "secrets" / "scrape.password.sha256"),
        "vigil_api_user": "vigil-api",
        "vigil_api_password_file": str(home / "secrets" / "api.password"),
        "vigil_api_bcrypt_file": str(home / "secrets" / "api.password.bcrypt"),
        "vigil_api_sha256_file": str(home / "secrets" / "api.password.sha256"),
        "vigil_metrics_key_file": str(home / "secrets" / "metrics.key"),
    }
    assert first.summary()["credentials_made"] == [
        "scrape.password",
        "scrape.password.bcrypt",
        "scrape.password.sha256",
        "api.password",
        "api.password.bcrypt",
        "api.password.sha256",
        "metrics.key",
    ]
    assert (home / "secrets" / "metrics.key").stat().st_mode & 0o777 == 0o600
    # two credentials, two different passwords
    assert (home / "secrets" / "api.password").read_text() != (
        home / "secrets" / "scrape.password"
    ).read_text()

    before = {h: (pki.PkiPaths.of(home).issued(h) / "server.crt").read_bytes() for h in first.hosts}
    again = host_certificates(home, inventory(), check=False)
    assert (again.ca_made, again.issued, again.clients, again.hosts) == (False, {}, {}, first.hosts)
    assert again.summary()["credentials_made"] == [] and again.extravars(home) == ev
    assert {h: (pki.PkiPaths.of(home).issued(h) / "server.crt").read_bytes() for h in first.hosts} == before

    moved = host_certificates(home, inventory({**ADDRESSES, "mon01": "198.18.0.99"}), check=False)
    assert moved.issued == {"mon01": "issued for other names"} and moved.clients == {}
    assert san(home, "mon01") == (["mon01"], ["198.18.0.99"])


def test_a_check_run_issues_nothing_and_copies_only_what_the_store_holds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    nothing = host_certificates(home, inventory(), check=True)
    assert (nothing.ca_made, nothing.issued, nothing.hosts) == (False, {}, [])
    assert not (home / "secrets").exists()
    host_certificates(home, inventory(selected=["mon01"]), check=False)
    looked = host_certificates(home, inventory(), check=True)
    assert looked.hosts == ["mon01"]
    assert looked.extravars(home)["vigil_scrape_user"] == "vigil-scrape"
    assert not pki.PkiPaths.of(home).issued("gpu01").exists()


def test_an_encrypted_ca_stops_the_deploy_with_the_command_to_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pki.init_ca(home, passphrase=b"correct horse")
    with pytest.raises(pki.PkiError) as err:
        host_certificates(home, inventory(selected=["mon01"]), check=False)
    line = str(err.value)
    assert "\n" not in line
    assert "mon01's server certificate" in line and "it is missing" in line
    assert "`vigil pki issue --name mon01 --usage server --ip 198.18.0.10 --passphrase-file F`" in line
    assert not (pki.PkiPaths.of(home).issued("mon01") / "server.crt").exists()
    # issued by hand with the passphrase, the deploy then asks for the client certificate
    pki.issue(home, "mon01", dns=[], ips=["198.18.0.10"], passphrase=b"correct horse")
    with pytest.raises(pki.PkiError) as err:
        host_certificates(home, inventory(selected=["mon01"]), check=False)
    assert "`vigil pki issue --name mon01 --usage client --passphrase-file F`" in str(err.value)
    pki.issue(home, "mon01", usage="client", passphrase=b"correct horse")
    done = host_certificates(home, inventory(selected=["mon01"]), check=False)
    assert (done.issued, done.hosts) == ({}, ["mon01"])


def test_the_inventory_gives_each_host_its_address(tmp_path: Path) -> None:
    inv_dir = tmp_path / "inv"
    inv_dir.mkdir()
    (inv_dir / "hosts.yml").write_text(
        "all:\n  children:\n    monitoring:\n      hosts:\n        mon01: {ansible_host: 198.18.0.10}\n"
        "    gpu_nodes:\n      vars: {ansible_host: gpu.lab.internal}\n      hosts:\n        gpu01:\n"
    )
    assert load_inventory(inv_dir).addresses == {"mon01": "198.18.0.10", "gpu01": "gpu.lab.internal"}


def test_each_monitoring_host_gets_its_keys_before_the_run_once_and_again_when_deleted(
    tmp_path: Path,
) -> None:
    """Grafana's admin password and VictoriaMetrics' series-deletion key, which the roles read with
    Ansible's `password` lookup, are made by the deploy before the run (so that the run's inputs are
    whole when its key is computed, installer/deploy/fingerprint.py): one per monitoring host, in the
    lookup's form, 0600; kept by the next deploy; made anew when deleted; never written through a link."""
    home = tmp_path / "home"
    inv = inventory()
    inv.groups["monitoring"] = ["mon01"]
    first = host_certificates(home, inv, check=False)
    assert first.summary()["credentials_made"][-2:] == [
        "grafana-admin-password-mon01",
        "victoriametrics-delete-auth-key-mon01",
    ]
    grafana = home / "secrets" / "grafana-admin-password-mon01"
    delete = home / "secrets" / "victoriametrics-delete-auth-key-mon01"
    assert grafana.stat().st_mode & 0o777 == 0o600 and delete.stat().st_mode & 0o777 == 0o600
    assert len(grafana.read_text()) == 33 and grafana.read_text().rstrip("\n").isalnum()
    assert len(delete.read_text()) == 41 and grafana.read_text().endswith("\n")
    assert not (home / "secrets" / "grafana-admin-password-gpu01").exists()
    kept = grafana.read_text()
    assert host_certificates(home, inv, check=False).summary()["credentials_made"] == []
    assert grafana.read_text() == kept
    grafana.unlink()
    assert host_certificates(home, inv, check=False).summary()["credentials_made"] == [
        "grafana-admin-password-mon01"
    ]
    assert grafana.read_text() != kept
    assert host_certificates(home, inv, check=True).summary()["credentials_made"] == []
    delete.unlink()
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    delete.symlink_to(victim)
    with pytest.raises(CredentialError, match="a link"):
        host_certificates(home, inv, check=False)
    assert victim.read_text() == "keep\n"
