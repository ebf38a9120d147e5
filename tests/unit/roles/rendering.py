"""Render the roles' templates with Ansible's own templating, without any target host.

A throwaway playbook runs on the controller (`connection: local`) against a sample inventory
(a monitoring host, a Slurm controller, two GPU nodes, a login node) with every role's
defaults and vars loaded, and writes each template into a directory with the `template`
module: the same engine, filters (`comment`, `to_nice_yaml`, …) and `ansible_managed` a deploy
uses. The rendered text comes back keyed by a short name.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = REPO / "roles"
# The folder of the tools these tests run (ansible-playbook, ...): the venv's, beside the running
# python. The Python 3.9 run of the host-side tests (tests/integration/test_host_python39.py) names
# its own: the venv's tools with a `python3` that is 3.9, as a host's may be.
BIN = Path(os.environ.get("VIGIL_TEST_BIN") or Path(sys.executable).parent)
ROLE_NAMES = (
    "_common",
    "common",
    "node_exporter",
    "victoriametrics",
    "vmagent",
    "vmalert",
    "alertmanager",
    "grafana",
)

# Sample of the contract's `vigil_artifacts` (see installer/deploy/artifacts.py): the debian channel.
DEBIAN_ARTIFACTS = {
    "bin/victoria-metrics": ("victoria-metrics", "1.79.5+ds1-2+b5"),
    "bin/vmalert": ("victoria-metrics", "1.79.5+ds1-2+b5"),
    "bin/vmagent": ("victoria-metrics", "1.79.5+ds1-2+b5"),
    "bin/alertmanager": ("prometheus-alertmanager", "0.25.0-1+b4"),
    "bin/amtool": ("prometheus-alertmanager", "0.25.0-1+b4"),
    "bin/node_exporter": ("prometheus-node-exporter", "1.5.0-1+b6"),
}

SAMPLE_INVENTORY: dict[str, Any] = {
    "all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "children": {
            "monitoring": {"hosts": {"mon01": {"ansible_host": "198.18.0.10"}}},
            "slurm_controller": {
                "hosts": {"ctl01": {"ansible_host": "198.18.0.11", "slurm_exporter_enabled": True}}
            },
            "gpu_nodes": {
                "hosts": {"gpu01": {"ansible_host": "198.18.0.21"}, "gpu02": {"ansible_host": "198.18.0.22"}},
                "vars": {"dcgm_exporter_enabled": True},
            },
            "login": {"hosts": {"login01": {"node_exporter_port": 9101}}},
        },
    }
}

# name -> (role, template, vars for the `_common` unit template or {})
TEMPLATES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "scrape.yml": ("victoriametrics", "scrape.yml.j2", {}),
    "alertmanager.yml": ("alertmanager", "alertmanager.yml.j2", {}),
    "grafana.ini": ("grafana", "grafana.ini.j2", {}),
    "datasources.yaml": ("grafana", "datasources.yaml.j2", {}),
    "dashboards.yaml": ("grafana", "dashboards.yaml.j2", {}),
    "vigil-tls-expiry.service": ("node_exporter", "vigil-tls-expiry.service.j2", {}),
    "vigil-tls-expiry.timer": ("node_exporter", "vigil-tls-expiry.timer.j2", {}),
}
# Rendered only when named in `only` (they need the TLS extra vars: see tls_vars()).
ON_REQUEST: dict[str, tuple[str, str, dict[str, Any]]] = {
    "web.yml": ("_common", "web.yml.j2", {}),
    "alertmanager-web.yml": ("_common", "web.yml.j2", {"_common_web_credential": "api"}),
    "cluster-tls.yml": ("alertmanager", "cluster-tls.yml.j2", {}),
    # (they need `victoriametrics_backup_dst`: tests/unit/roles/test_vm_backup_role.py)
    "vigil-vm-backup.service": ("victoriametrics", "vigil-vm-backup.service.j2", {}),
    "vigil-vm-backup.timer": ("victoriametrics", "vigil-vm-backup.timer.j2", {}),
}
UNITS = {
    "victoriametrics": ("_victoriametrics_exec_start", "victoriametrics_data_dir", True),
    "vmalert": ("_vmalert_exec_start", "vmalert_data_dir", True),
    "vmagent": ("_vmagent_exec_start", "vmagent_data_dir", True),
    "alertmanager": ("_alertmanager_exec_start", "alertmanager_data_dir", True),
    "node_exporter": ("_node_exporter_exec_start", "node_exporter_data_dir", False),
    "grafana": ("_grafana_exec_start", "grafana_data_dir", False),
}


#: the sample site with a second monitoring host: the monitoring pair (docs/ha.md)
PAIR_INVENTORY: dict[str, Any] = copy.deepcopy(SAMPLE_INVENTORY)
PAIR_INVENTORY["all"]["children"]["monitoring"]["hosts"]["mon02"] = {"ansible_host": "198.18.0.12"}


def pair_tls_vars(home: Path) -> dict[str, Any]:
    """:func:`tls_vars` for the pair: mon02 has its certificate too."""
    ev = tls_vars(home)
    ev["vigil_tls_hosts"] = sorted({*ev["vigil_tls_hosts"], "mon02"})
    return ev


def exec_argv(unit: str) -> list[str]:
    """The command line of a rendered unit's ExecStart (one argument a line, as _common's
    service.j2 writes it)."""
    lines = unit.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ExecStart="))
    argv = [lines[start].removeprefix("ExecStart=")]
    while argv[-1].endswith(" \\"):
        argv[-1] = argv[-1].removesuffix(" \\")
        start += 1
        argv.append(lines[start].strip())
    return argv


def contract_vars(store: Path, artifacts: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The extra vars `vigil deploy` passes, for a store rooted at ``store`` (VIGIL_HOME)."""
    files = store / "bundles" / "1" / "files"
    arts = artifacts if artifacts is not None else DEBIAN_ARTIFACTS
    return {
        "vigil_bundle_version": 1,
        "vigil_bundle_dir": str(files),
        "vigil_artifacts": {
            key: {
                "src": str(files / "components" / comp / key),
                "component": comp,
                "version": ver,
                "sha256": "0" * 64,
                "mode": "0755",
            }
            for key, (comp, ver) in arts.items()
        },
    }


def tls_vars(home: Path) -> dict[str, Any]:
    """The extra vars deploy adds once it has the site CA, the scrape and API credentials and the
    metrics key (made here)."""
    from vigil.installer import pki
    from vigil.installer.deploy.credentials import api_credential, metrics_key, scrape_credential

    pki.init_ca(home)
    scrape, api, key = scrape_credential(home), api_credential(home), metrics_key(home)
    assert scrape is not None and api is not None and key is not None
    hosts = [h for group in SAMPLE_INVENTORY["all"]["children"].values() for h in group["hosts"]]
    return {
        "vigil_pki_dir": str(home / "secrets" / "pki"),
        "vigil_tls_hosts": sorted(hosts),
        **scrape.extravars(),
        **api.extravars(),
        "vigil_metrics_key_file": str(key[0]),
    }


def _vars_files() -> list[str]:
    out = []
    for role in ROLE_NAMES:
        for kind in ("defaults", "vars"):
            p = ROLES / role / kind / "main.yml"
            if p.is_file() and yaml.safe_load(p.read_text()):
                out.append(str(p))
    return out


def ansible_env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }


def render(
    tmp: Path,
    *,
    extra_vars: dict[str, Any] | None = None,
    host: str = "mon01",
    inventory: dict[str, Any] | None = None,
    only: tuple[str, ...] = (),
) -> dict[str, str]:
    """Render every template of the roles (or those named in ``only``); returns {name: text}."""
    out = tmp / "rendered"
    out.mkdir(parents=True, exist_ok=True)
    tasks: list[dict[str, Any]] = []
    for name, (role, src, task_vars) in {**TEMPLATES, **ON_REQUEST}.items():
        if (only and name not in only) or (name in ON_REQUEST and name not in only):
            continue
        tasks.append(
            {
                "name": f"Render {name}",
                "ansible.builtin.template": {
                    "src": str(ROLES / role / "templates" / src),
                    "dest": str(out / name),
                    "mode": "0644",
                },
                **({"vars": task_vars} if task_vars else {}),
            }
        )
    for role, (exec_var, data_var, reload) in UNITS.items():
        if only and f"{role}.service" not in only:
            continue
        tasks.append(
            {
                "name": f"Render the unit of {role}",
                "ansible.builtin.template": {
                    "src": str(ROLES / "_common" / "templates" / "service.j2"),
                    "dest": str(out / f"{role}.service"),
                    "mode": "0644",
                },
                "vars": {
                    "_common_service": f"{{{{ {role}_service_name }}}}",
                    "_common_system_user": f"{{{{ {role}_system_user }}}}",
                    "_common_system_group": f"{{{{ {role}_system_user }}}}",
                    "_common_unit_description": f"vigil {role}",
                    "_common_unit_exec_start": f"{{{{ {exec_var} }}}}",
                    "_common_unit_reload": reload,
                    "_common_unit_read_write_paths": [f"{{{{ {data_var} }}}}"],
                },
            }
        )
    play = [
        {
            "name": "Render the roles' templates",
            "hosts": host,
            "gather_facts": False,
            "vars_files": _vars_files(),
            "tasks": tasks,
        }
    ]
    (tmp / "render.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory or SAMPLE_INVENTORY, sort_keys=False))
    ev = contract_vars(tmp / "home")
    ev.update(extra_vars or {})
    (tmp / "extra.json").write_text(json.dumps(ev))
    res = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(tmp / "inventory.yml"),
            str(tmp / "render.yml"),
            "-e",
            f"@{tmp / 'extra.json'}",
        ],
        capture_output=True,
        text=True,
        env=ansible_env(tmp),
        cwd=str(tmp),
        check=False,
    )
    if res.returncode != 0:
        raise AssertionError(
            f"rendering failed ({res.returncode}):\n{res.stdout[-6000:]}\n{res.stderr[-3000:]}"
        )
    return {p.name: p.read_text() for p in sorted(out.iterdir())}


def run_playbook(
    tmp: Path,
    play: list[dict[str, Any]],
    inventory: dict[str, Any],
    extra_vars: dict[str, Any],
    extra_args: list[str] | tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Write PLAY, INVENTORY and EXTRA_VARS under TMP and run ansible-playbook on the controller
    (with EXTRA_ARGS, for example ``--check``)."""
    (tmp / "tasks.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    (tmp / "extra.json").write_text(json.dumps(extra_vars))
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(tmp / "inventory.yml"),
            str(tmp / "tasks.yml"),
            "-e",
            f"@{tmp / 'extra.json'}",
            *extra_args,
        ],
        capture_output=True,
        text=True,
        env=ansible_env(tmp),
        cwd=str(tmp),
        check=False,
        timeout=600,
    )


def run_tasks(
    tmp: Path, tasks: list[dict[str, Any]], *, extra_vars: dict[str, Any] | None = None, host: str = "mon01"
) -> subprocess.CompletedProcess[str]:
    """Run ``tasks`` on the controller against the sample inventory (for preflight checks)."""
    play = [
        {"name": "Run role tasks on the controller", "hosts": host, "gather_facts": False, "tasks": tasks}
    ]
    return run_playbook(tmp, play, SAMPLE_INVENTORY, {**contract_vars(tmp / "home"), **(extra_vars or {})})
