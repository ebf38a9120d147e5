"""Each host's TLS server certificate from the site CA, issued by deploy before the playbook runs.

For every host a deploy goes to, the site CA (``vigil pki``; made here, without a passphrase, when
the site has none yet) issues a server certificate named after the host, with its inventory name
as DNS name and its ``ansible_host`` as address (or as a second DNS name when it is one). A
certificate is issued again only on the CA's own rule (missing, not the CA's, other names, within
30 days of its end), so a rerun reissues nothing. The ``common`` role copies the CA certificate and
the host's certificate and key to ``/etc/vigil/tls/``, where node_exporter's expiry scan reads them.

Each host also gets a client certificate (``client.crt``, its inventory name only), on the same
rule: the audit role's log forwarding presents it to the receiver, which presents the host's server
certificate; both sides check the other against the site CA and by name.

The same step makes the site's scrape credential (``deploy/credentials.py``) that the exporters,
now served over TLS, ask VictoriaMetrics for, and the API credential the monitoring services'
APIs and UIs ask everyone for.

A ``--check`` run issues nothing: it copies what the store already holds, so a host whose
certificate is still to be issued shows no drift for it until the real run.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from vigil.installer import pki
from vigil.installer.deploy.credentials import (
    Credential,
    api_credential,
    metrics_key,
    monitoring_host_keys,
    scrape_credential,
)
from vigil.installer.deploy.inventory import Inventory


def names_of(address: str) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) a host's certificate carries besides its inventory name (which the
    CA adds as a DNS name when it is one): its ``ansible_host``, as an address or as a DNS name."""
    try:
        return [], [str(ipaddress.ip_address(address))]
    except ValueError:
        return ([address] if pki.is_dns_name(address) else []), []


@dataclass
class HostCertificates:
    """What deploy did with the site CA: whether it made the CA, and each host's certificate."""

    ca_made: bool = False
    #: host -> why its certificate was (re)issued, for those that were
    issued: dict[str, str] = field(default_factory=dict)
    #: host -> why its client certificate was (re)issued, for those that were
    clients: dict[str, str] = field(default_factory=dict)
    #: hosts whose certificate the store holds, to be copied to them
    hosts: list[str] = field(default_factory=list)
    #: the scrape and API credentials (None in a check run of a site that has none yet)
    scrape: Credential | None = None
    api: Credential | None = None
    #: the monitoring services' /metrics key, and whether it was made now
    metrics_key: tuple[Path, bool] | None = None
    #: the monitoring hosts' keys made now (Grafana's admin password, the series-deletion key)
    host_keys: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        """For the audit record and --json: what was made and issued."""
        made = [m for c in (self.scrape, self.api) if c is not None for m in c.made]
        if self.metrics_key is not None and self.metrics_key[1]:
            made.append(self.metrics_key[0].name)
        made.extend(self.host_keys)
        return {
            "ca_made": self.ca_made,
            "issued": self.issued,
            "clients_issued": self.clients,
            "hosts": len(self.hosts),
            "credentials_made": made,
        }

    def extravars(self, home: Path) -> dict[str, object]:
        out: dict[str, object] = {
            "vigil_pki_dir": str(pki.PkiPaths.of(home).root),
            "vigil_tls_hosts": sorted(self.hosts),
        }
        for cred in (self.scrape, self.api):
            if cred is not None:
                out.update(cred.extravars())
        if self.metrics_key is not None:
            out["vigil_metrics_key_file"] = str(self.metrics_key[0])
        return out


def host_certificates(home: Path, inventory: Inventory, *, check: bool) -> HostCertificates:
    """Issue (or keep) the certificate of every selected host; with ``check``, only look."""
    out = HostCertificates()
    paths = pki.PkiPaths.of(home)
    hosts = inventory.selected or inventory.hosts
    if check:
        if paths.ca_cert.is_file():
            out.hosts = [h for h in hosts if (paths.issued(h) / "server.crt").is_file()]
        out.scrape = scrape_credential(home, create=False)
        out.api = api_credential(home, create=False)
        out.metrics_key = metrics_key(home, create=False)
        return out
    # made once, unencrypted, for a site that has none; an existing CA is checked by each issue,
    # which needs its key only to issue
    exists = paths.ca_cert.exists() or paths.ca_cert.is_symlink() or paths.ca_key.exists()
    out.ca_made = False if exists else pki.init_ca(home)
    out.scrape = scrape_credential(home)
    out.api = api_credential(home)
    out.metrics_key = metrics_key(home)
    monitoring = set(inventory.groups.get("monitoring", []))
    out.host_keys = monitoring_host_keys(home, [h for h in hosts if h in monitoring])
    for host in hosts:
        dns, ips = names_of(inventory.addresses.get(host, ""))
        got = _issue(home, host, "server", dns, ips)
        if got.changed:
            out.issued[host] = got.reason
        client = _issue(home, host, "client", [], [])
        if client.changed:
            out.clients[host] = client.reason
        out.hosts.append(host)
    return out


def _issue(home: Path, host: str, usage: str, dns: list[str], ips: list[str]) -> pki.Issued:
    try:
        return pki.issue(home, host, usage=usage, dns=dns, ips=ips)
    except pki.PkiError as exc:
        if "is encrypted" not in str(exc):
            raise
        argv = ["vigil pki issue", f"--name {host}", f"--usage {usage}"]
        argv += [f"--dns {d}" for d in dns] + [f"--ip {a}" for a in ips] + ["--passphrase-file F"]
        raise pki.PkiError(
            f"{host}'s {usage} certificate",
            f"is to be issued ({_why(home, host, usage)}) but the site CA's key is encrypted: run "
            f"`{' '.join(argv)}`, then deploy again",
        ) from None


def _why(home: Path, host: str, usage: str) -> str:
    cert = pki.PkiPaths.of(home).issued(host) / f"{usage}.crt"
    return "it is missing" if not cert.exists() else "it is due for renewal"
