"""The Ansible inventory of the lab: `hosts.yml`, written by every `lab up`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vigil.installer.lab import _files, bmc
from vigil.installer.lab.hosts import ADMIN_IP, GROUPS, HOSTS, SUBNET, Host
from vigil.installer.lab.paths import LabPaths

#: Group variables of the lab: the exporters the lab can run (the GPU simulator stands in for
#: dcgm-exporter, with no power noise so per-job energy is exact), scraped every 10 s; the rule
#: groups evaluated as often (all but the accounting groups, which the role keeps at 1m and 5m for
#: the reports) and every alert's `for:` capped at 20 s, so an injected fault reaches Alertmanager
#: within two minutes (docs/lab.md, "Fault to alert"). `vmalert_evaluation_interval` only reaches
#: groups without an `interval:` (every shipped group sets one). Alertmanager sends a new group's first
#: notification after 5 s (half an evaluation: what one evaluation sends goes out together; the
#: default and P1 routes, as P0 keeps the role's fixed 30 s and P2 its digest) and a changed group's
#: after 30 s; the repeat intervals stay the role's. The lab tests read Alertmanager's alerts, not
#: its notifications: these two delay nothing they wait for. VictoriaMetrics answers a query about
#: "now" as of 10 s before (`-search.latencyOffset`, 30 s by default): in the lab it scrapes every
#: target itself, with a 5 s timeout, and vmalert writes its recorded series within 5 s
#: (-remoteWrite.flushInterval), so every sample of 10 s ago has arrived; that takes 20 s off each
#: step of an alert's path (the accounting groups ask with nocache=1 anyway).
GROUP_VARS: dict[str, dict[str, Any]] = {
    "monitoring": {
        "victoriametrics_scrape_interval": "10s",
        "victoriametrics_scrape_timeout": "5s",
        "victoriametrics_extra_flags": ["-search.latencyOffset=10s"],
        "vmalert_group_interval_cap": "10s",
        "vmalert_evaluation_interval": "10s",
        "vmalert_alert_duration_cap": "20s",
        "alertmanager_group_wait": "5s",
        "alertmanager_group_interval": "30s",
    },
    "slurm_controller": {"slurm_exporter_enabled": True},
    "gpu_nodes": {
        "dcgm_exporter_enabled": True,
        "dcgm_exporter_mode": "simulated",
        "dcgm_exporter_simulator_power_noise": 0,
    },
}

#: where the monitoring pair's Alertmanagers send their notifications in the lab: a webhook receiver
#: on the admin host's lab address, which counts them (installer/lab/webhook.py; the pair's drills
#: run it, a person can too: docs/lab.md). Nothing listens there unless one runs it; Alertmanager
#: then logs its failed notifications, as with the role's default receiver.
WEBHOOK_PORT = 9095
PAIR_VARS: dict[str, Any] = {
    "alertmanager_webhook_url": f"http://{ADMIN_IP}:{WEBHOOK_PORT}/",
    "alertmanager_site_hosts": [ADMIN_IP],
}

HEADER = "# Written by `vigil lab up`; rewritten on every run, removed by `vigil lab down`. Do not edit.\n"


def inventory_data(
    paths: LabPaths, hosts: tuple[Host, ...] = HOSTS, bmcs: bmc.BmcMaterial | None = None
) -> dict[str, Any]:
    """The inventory; with BMCS (what `lab up` made for the simulated BMCs, installer/lab/bmc.py),
    also the BMC simulators' host variables and the Redfish exporter's targets on the monitoring host."""
    common = f"-o UserKnownHostsFile={paths.known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
    lab_bmcs = bmc.lab_bmcs(hosts)
    simulators = bmc.host_vars(bmcs, lab_bmcs) if bmcs is not None else {}
    extra = _firewall_extra_sources(hosts, bmcs is not None)
    children: dict[str, Any] = {}
    for group in GROUPS:
        children[group] = {
            "hosts": {
                h.name: {"ansible_host": h.ip, **simulators.get(h.name, {}), **extra.get(h.name, {})}
                for h in hosts
                if group in h.groups
            }
        }
        if GROUP_VARS.get(group):
            children[group]["vars"] = dict(GROUP_VARS[group])
        if group == "monitoring" and bmcs is not None:
            children[group]["vars"].update(bmc.exporter_vars(bmcs, lab_bmcs))
        if group == "monitoring" and len(children[group]["hosts"]) > 1:
            children[group]["vars"].update(PAIR_VARS)
    return {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(paths.ssh_key),
                "ansible_ssh_common_args": common,
                "ansible_python_interpreter": "/usr/bin/python3",
                "vigil_lab": True,
                # the kernel refuses audit inside nspawn containers (docs/audit.md): the audit
                # role writes and checks its rules, keeps auditd masked and says so
                "audit_require_kernel_audit": False,
                # the host firewall: the admin host reaches the APIs, and (the lab only) the
                # exporters too, whose every listener the lab's tests attack from outside
                "firewall_admin_networks": [f"{ADMIN_IP}/32"],
                "firewall_exporter_extra_sources": [f"{ADMIN_IP}/32"],
                # the audit receiver takes the lab's network, the admin host included, whose
                # audit test sends it lines with and without a certificate of the site CA
                "firewall_cluster_networks": [SUBNET],
            },
            "children": children,
        }
    }


def _firewall_extra_sources(hosts: tuple[Host, ...], with_bmcs: bool) -> dict[str, dict[str, Any]]:
    """Host variables letting a simulated BMC or PDU read the GPU feeds of other hosts (the PDU
    simulator on ctl01 reads the power of every GPU node) through their firewall."""
    if not with_bmcs:
        return {}
    ips = {h.name: h.ip for h in hosts}
    readers: dict[str, list[str]] = {}
    for b in bmc.lab_bmcs(hosts):
        for node in b.feeds:
            if node != b.host and node in ips and b.host in ips:
                readers.setdefault(node, [f"{ADMIN_IP}/32"]).append(f"{ips[b.host]}/32")
    return {node: {"firewall_exporter_extra_sources": sorted(set(v))} for node, v in readers.items()}


def write_inventory(
    paths: LabPaths,
    directory: Path,
    bmcs: bmc.BmcMaterial | None = None,
    hosts: tuple[Host, ...] = HOSTS,
) -> Path:
    """Write DIRECTORY/hosts.yml, 0600: with BMCS it holds the simulated BMCs' lab-only passwords."""
    path = directory / "hosts.yml"
    text = HEADER + yaml.safe_dump(
        inventory_data(paths, hosts, bmcs=bmcs), sort_keys=False, default_flow_style=False
    )
    _files.write(path, text, mode=0o600)
    return path


def remove_inventory(path: Path) -> bool:
    """Remove PATH if it is one the lab wrote (starts with its header)."""
    try:
        if path.read_text().startswith(HEADER):
            path.unlink()
            return True
    except OSError:
        pass
    return False
