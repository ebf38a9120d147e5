"""The dcgm_exporter and slurm_exporter roles, as far as they can be checked without a GPU or a lab host.

- the collectors CSV lists exactly the fields the GPU simulator emits (DCGM's names and types, as
  dcgm-exporter emits them), covers what the rules and reports read, and the role's own `validate`
  command accepts it and refuses each kind of broken line;
- the units rendered by Ansible from the roles' vars and `_common`'s template: command lines,
  hardening, and `systemd-analyze verify` where this machine has it;
- preflight refusals name the variable to fix (production without NVIDIA's packages, no wheel,
  no Slurm commands);
- the lab inventory turns the exporters on.
"""

from __future__ import annotations

import ast
import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.roles.rendering import BIN, REPO, ROLES, ansible_env, contract_vars, run_tasks
from vigil.exporters.gpusim.fields import DRIVER_LABEL, FIELDS
from vigil.installer.lab import LabPaths
from vigil.installer.lab.inventory import inventory_data

WHEEL_KEY = "wheels/vigil_exporters-0.1.0-py3-none-any.whl"
WITH_WHEEL = {
    **contract_vars(Path("/x"))["vigil_artifacts"],
    WHEEL_KEY: {
        "src": "/x/w.whl",
        "component": "vigil-exporters",
        "version": "0.1.0",
        "sha256": "0" * 64,
        "mode": "0644",
    },
}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def csv_rows() -> list[list[str]]:
    text = (ROLES / "dcgm_exporter" / "files" / "vigil-counters.csv").read_text()
    return [[c.strip() for c in r] for r in csv.reader(text.splitlines()) if r and not r[0].startswith("#")]


def csv_check_command() -> str:
    return str(load(ROLES / "dcgm_exporter" / "vars" / "main.yml")["_dcgm_exporter_csv_check"])


def csv_check(path: Path) -> subprocess.CompletedProcess[str]:
    """The copy task's `validate`, split and expanded the way Ansible's run_command does it."""
    argv = [os.path.expandvars(os.path.expanduser(a)) for a in shlex.split(csv_check_command() % path)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


# --- the collectors CSV ---------------------------------------------------------------------------

GOOD = "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
GOOD_2 = "DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).\n"


def test_collectors_csv_is_the_simulators_field_list() -> None:
    rows = csv_rows()
    assert {(r[0], r[1]) for r in rows} == {(f.name, f.type) for f in FIELDS} | {(DRIVER_LABEL, "label")}
    assert len(rows) == len(FIELDS) + 1 and all(len(r) == 3 and r[2] for r in rows)


@pytest.mark.parametrize(
    "field",
    [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_TOTAL",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    ],
)
def test_collectors_csv_has_what_the_rules_and_reports_read(field: str) -> None:
    assert field in {r[0] for r in csv_rows()}


def test_collectors_csv_passes_the_roles_validate_command() -> None:
    res = csv_check(ROLES / "dcgm_exporter" / "files" / "vigil-counters.csv")
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("DCGM_FI_DEV_GPU_TEMP, gauge\n", "bad collector lines"),
        ("DCGM_FI_DEV_GPU_TEMP, histogram, x\n", "bad collector lines"),
        ("gpu_temp, gauge, x\n", "bad collector lines"),
        (
            "DCGM_FI_DEV_GPU_TEMP, gauge, x\nDCGM_FI_DEV_GPU_TEMP, gauge, y\n",
            "duplicate fields: ['DCGM_FI_DEV_GPU_TEMP']",
        ),
        ("# nothing\n", "no fields"),
        ("", "no fields"),
        # dcgm-exporter reads the CSV with Go's encoding/csv (Comment '#', no LazyQuotes, no
        # TrimLeadingSpace, FieldsPerRecord 0): what that reader refuses, the check refuses
        (
            f"{GOOD}  # an indented comment is a record\n{GOOD_2}",
            "record on line 2: wrong number of fields (line 2 is an indented comment",
        ),
        (
            f"\t# indented, before the first record\n{GOOD}",
            "record on line 2: wrong number of fields (line 1 is an indented comment",
        ),
        (
            f'{GOOD}DCGM_FI_DEV_FB_USED, gauge, the "used" memory\n',
            'parse error on line 2, column 33: bare " in non-quoted-field',
        ),
        # the field starts with the blank after the comma, so its quote is a bare one
        ('DCGM_FI_DEV_FB_USED, gauge, "used memory"\n', 'column 29: bare " in non-quoted-field'),
        ('DCGM_FI_DEV_FB_USED, gauge,"used" memory\n', 'column 33: extraneous or missing " in quoted-field'),
        ('DCGM_FI_DEV_FB_USED, gauge,"used memory\n', 'extraneous or missing " in quoted-field'),
        (f"{GOOD}DCGM_FI_DEV_FB_USED, gauge, used, memory\n", "record on line 2: wrong number of fields"),
        (f"{GOOD}   \n{GOOD_2}", "record on line 2: wrong number of fields"),  # blanks are not empty
        ("DCGM_FI_DEV_GPU_TEMP,\tgauge, x\n", "bad collector lines"),  # dcgm-exporter trims only ' '
    ],
)
def test_broken_collectors_csv_is_refused(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "c.csv").write_text(text)
    res = csv_check(tmp_path / "c.csv")
    assert res.returncode == 1 and says in res.stderr, res.stderr


@pytest.mark.parametrize(
    "text",
    [
        f"# a comment in column 1\n\n{GOOD}\n#another\n{GOOD_2}",
        f'{GOOD}DCGM_FI_DEV_FB_USED, gauge,"used, in ""MiB"""\n',  # quoted right after the comma
        f'{GOOD}DCGM_FI_DEV_FB_USED, gauge,"used\n# on two lines"\n',  # a quoted field may span lines
        f"{GOOD}\n{GOOD_2}".replace("\n", "\r\n")[:-1],  # CR LF, an empty line, a CR at the very end
    ],
)
def test_collectors_csv_that_go_reads_is_accepted(tmp_path: Path, text: str) -> None:
    (tmp_path / "c.csv").write_bytes(text.encode())
    res = csv_check(tmp_path / "c.csv")
    assert res.returncode == 0, res.stderr


def test_collectors_csv_check_survives_ansible_and_runs_on_python_3_9() -> None:
    """The program sits in a double-quoted argument that goes through `validate % path`, shlex and
    os.path.expandvars on its way to the host's python3 (3.9 or later)."""
    command = csv_check_command()
    program = shlex.split(command)[2]
    assert shlex.split(command)[:2] == ["python3", "-c"] and shlex.split(command)[3:] == ["%s"]
    assert command.count("%") == 1 and not set('\\"$') & set(program), "characters the trip changes"
    assert not re.search(r"\{[{%#]", command), "Jinja would template it"
    ast.parse(program, feature_version=(3, 9))


# --- the units ------------------------------------------------------------------------------------


def render_unit(tmp: Path, role: str, extra: dict[str, Any], unit_vars: dict[str, Any]) -> str:
    files = [str(ROLES / "_common" / "defaults" / "main.yml")] + [
        str(ROLES / role / kind / "main.yml") for kind in ("defaults", "vars")
    ]
    task = {
        "name": "Render",
        "ansible.builtin.template": {
            "src": str(ROLES / "_common" / "templates" / "service.j2"),
            "dest": str(tmp / "unit.service"),
            "mode": "0644",
        },
        "vars": unit_vars,
    }
    play = [{"name": "r", "hosts": "gpu01", "gather_facts": False, "vars_files": files, "tasks": [task]}]
    (tmp / "p.yml").write_text(yaml.safe_dump(play))
    (tmp / "i.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "gpu01": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                    }
                }
            }
        )
    )
    ev = {**contract_vars(tmp / "home"), "vigil_artifacts": WITH_WHEEL, **extra}
    (tmp / "e.yml").write_text(yaml.safe_dump(ev))
    res = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(tmp / "i.yml"),
            str(tmp / "p.yml"),
            "-e",
            f"@{tmp / 'e.yml'}",
        ],
        capture_output=True,
        text=True,
        env=ansible_env(tmp),
        cwd=str(tmp),
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    return (tmp / "unit.service").read_text()


def configure_unit_vars(role: str) -> dict[str, Any]:
    """The `_common` unit vars exactly as the role's configure.yml passes them."""
    tasks = load(ROLES / role / "tasks" / "configure.yml")
    (task,) = [t for t in tasks if t.get("ansible.builtin.import_role", {}).get("tasks_from") == "unit"]
    return dict(task["vars"])


def verify(tmp: Path, text: str, name: str) -> str:
    if not shutil.which("systemd-analyze"):
        return ""
    (tmp / f"{name}.service").write_text(text)
    res = subprocess.run(
        ["systemd-analyze", "verify", str(tmp / f"{name}.service")],
        capture_output=True,
        text=True,
        check=False,
    )
    return res.stdout + res.stderr


HARDENING = [
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "CapabilityBoundingSet=",
    "LockPersonality=yes",
    "RestrictSUIDSGID=yes",
    "Restart=always",
    "ReadWritePaths=",
]


def test_simulated_unit_runs_the_simulator_from_the_wheel(tmp_path: Path) -> None:
    unit = render_unit(
        tmp_path, "dcgm_exporter", {"dcgm_exporter_mode": "simulated"}, configure_unit_vars("dcgm_exporter")
    )
    lines = unit.splitlines()
    assert "User=vigil-gpusim" in lines and "SyslogIdentifier=vigil-gpusim" in lines
    assert "Environment=PYTHONPATH=/opt/vigil/exporters/current" in lines
    for flag in (
        "vigil.exporters.gpusim",
        "--address=gpu01:9400",  # the management address (here the inventory name), not every interface
        "--hpc-job-mapping-dir=/run/vigil/jobmap",
        "--faults-file=/var/lib/vigil/gpusim/faults.json",
        '--model="NVIDIA H100 80GB HBM3"',
        "--busy-power=350",
        "--power-noise=10",
        "--hostname=gpu01",
    ):
        assert flag in unit, flag
    for line in HARDENING:
        assert line in lines, line
    out = verify(tmp_path, unit, "vigil-gpusim")
    assert "vigil-gpusim.service" not in out, out  # systemd-analyze found nothing to say about it


def test_production_unit_runs_dcgm_exporter_against_the_hostengine(tmp_path: Path) -> None:
    unit = render_unit(tmp_path, "dcgm_exporter", {}, configure_unit_vars("dcgm_exporter"))
    lines = unit.splitlines()
    assert "ExecStart=/usr/bin/dcgm-exporter \\" in lines and "User=vigil-dcgm-exporter" in lines
    for flag in (
        "--address=gpu01:9400",
        "--collectors=/etc/vigil/dcgm_exporter/vigil-counters.csv",
        "--hpc-job-mapping-dir=/run/vigil/jobmap",
        "--remote-hostengine-info=localhost:5555",
        "--collect-interval=10000",
    ):
        assert f"    {flag} \\" in lines or f"    {flag}" in lines, flag
    for line in HARDENING:
        assert line in lines, line
    assert not any(line.startswith("Environment=") for line in lines)
    out = verify(tmp_path, unit, "vigil-dcgm-exporter")
    # the only complaint allowed here: dcgm-exporter is not installed on this machine
    rest = [
        x
        for x in out.splitlines()
        if "vigil-dcgm-exporter.service" in x and "/usr/bin/dcgm-exporter" not in x
    ]
    assert rest == [], out


def test_slurm_exporter_unit(tmp_path: Path) -> None:
    unit = render_unit(tmp_path, "slurm_exporter", {}, configure_unit_vars("slurm_exporter"))
    lines = unit.splitlines()
    assert "User=vigil-slurm-exporter" in lines and "SyslogIdentifier=vigil-slurm-exporter" in lines
    assert "Environment=PATH=/usr/local/bin:/usr/bin:/bin" in lines
    assert "    --listen-address=gpu01:9341 \\" in lines and "    --command-timeout=10" in lines
    for line in HARDENING:
        assert line in lines, line
    out = verify(tmp_path, unit, "vigil-slurm-exporter")
    assert "vigil-slurm-exporter.service" not in out, out


# --- preflight ------------------------------------------------------------------------------------


def preflight(role: str) -> list[dict[str, Any]]:
    return [{"name": role, "ansible.builtin.import_role": {"name": role, "tasks_from": "preflight"}}]


def outcome(tmp: Path, role: str, **extra: Any) -> tuple[int, str]:
    res = run_tasks(tmp, preflight(role), extra_vars=extra, host="gpu01")
    return res.returncode, " ".join((res.stdout + res.stderr).split())


def test_production_mode_without_nvidia_packages_is_refused(tmp_path: Path) -> None:
    rc, out = outcome(tmp_path, "dcgm_exporter", dcgm_exporter_port=1)
    assert rc != 0
    assert (
        "dcgm_exporter: the bundle has no `debs/datacenter-gpu-manager-4-core_<version>_<arch>.deb` "
        "(from `dcgm_exporter_packages`)"
    ) in out
    assert "only the `upstream` channel ships" in out and "`dcgm_exporter_mode: simulated`" in out


def test_production_mode_with_the_packages_passes(tmp_path: Path) -> None:
    arts = dict(contract_vars(tmp_path)["vigil_artifacts"])
    for key, comp in (
        ("debs/datacenter-gpu-manager-4-core_4.6.0-1_amd64.deb", "dcgm"),
        ("debs/datacenter-gpu-manager-exporter_4.8.2-1_amd64.deb", "dcgm-exporter"),
    ):
        arts[key] = {"src": "/x", "component": comp, "version": "1", "sha256": "0" * 64, "mode": "0644"}
    rc, out = outcome(tmp_path, "dcgm_exporter", dcgm_exporter_port=1, vigil_artifacts=arts)
    assert rc == 0, out[-2000:]


def test_simulated_mode_without_the_wheel_is_refused(tmp_path: Path) -> None:
    rc, out = outcome(tmp_path, "dcgm_exporter", dcgm_exporter_mode="simulated", dcgm_exporter_port=1)
    assert rc != 0 and "dcgm_exporter: the bundle has 0 exporters wheels (none)" in out
    assert "`dcgm_exporter_wheel_artifact`" in out


def test_simulated_mode_with_the_wheel_passes(tmp_path: Path) -> None:
    rc, out = outcome(
        tmp_path,
        "dcgm_exporter",
        dcgm_exporter_mode="simulated",
        dcgm_exporter_port=1,
        vigil_artifacts=WITH_WHEEL,
    )
    assert rc == 0, out[-2000:]


def test_bad_mode_is_refused_by_the_argument_spec(tmp_path: Path) -> None:
    tasks = [{"name": "d", "ansible.builtin.import_role": {"name": "dcgm_exporter"}}]
    res = run_tasks(
        tmp_path,
        tasks,
        extra_vars={"dcgm_exporter_enabled": True, "dcgm_exporter_mode": "fake"},
        host="gpu01",
    )
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode != 0 and "dcgm_exporter_mode" in out and "production, simulated" in out


def test_slurm_exporter_without_slurm_commands_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    rc, out = outcome(
        tmp_path,
        "slurm_exporter",
        slurm_exporter_port=1,
        vigil_artifacts=WITH_WHEEL,
        slurm_exporter_path=str(tmp_path / "bin"),
    )
    assert (
        rc != 0 and "slurm_exporter: squeue, sinfo, sdiag not found on gpu01 in `slurm_exporter_path`" in out
    )


def test_slurm_exporter_preflight_passes_where_the_commands_are(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    for cmd in ("squeue", "sinfo", "sdiag"):
        (tmp_path / "bin" / cmd).write_text("#!/bin/sh\n")
        (tmp_path / "bin" / cmd).chmod(0o755)
    rc, out = outcome(
        tmp_path,
        "slurm_exporter",
        slurm_exporter_port=1,
        vigil_artifacts=WITH_WHEEL,
        slurm_exporter_path=f"{tmp_path / 'bin'}:/usr/bin:/bin",
    )
    assert rc == 0, out[-2000:]


# --- the lab --------------------------------------------------------------------------------------


def test_lab_inventory_runs_the_exporters_and_scrapes_often(tmp_path: Path) -> None:
    children = inventory_data(LabPaths.from_env())["all"]["children"]
    assert children["gpu_nodes"]["vars"] == {
        "dcgm_exporter_enabled": True,
        "dcgm_exporter_mode": "simulated",
        "dcgm_exporter_simulator_power_noise": 0,
    }
    assert children["slurm_controller"]["vars"] == {"slurm_exporter_enabled": True}
    assert re.fullmatch(r"\d+s", children["monitoring"]["vars"]["victoriametrics_scrape_interval"])


def test_lab_node_down_stops_the_units_the_roles_install() -> None:
    """`vigil lab fault node-down` stops exactly the exporter units the roles name (the lab test of
    the node-down alert found it stopping units of other names, so nothing stopped)."""
    from vigil.installer.lab.faults import EXPORTER_UNITS

    names = {
        f"{load(ROLES / role / 'defaults' / 'main.yml')[var]}.service"
        for role, var in (
            ("node_exporter", "node_exporter_service_name"),
            ("dcgm_exporter", "dcgm_exporter_service_name"),
            ("dcgm_exporter", "dcgm_exporter_simulator_service_name"),
        )
    }
    assert set(EXPORTER_UNITS) == names


def test_lab_inventory_caps_alert_durations_for_quick_faults() -> None:
    assert (
        inventory_data(LabPaths.from_env())["all"]["children"]["monitoring"]["vars"][
            "vmalert_alert_duration_cap"
        ]
        == "20s"
    )


def test_site_playbook_runs_the_exporter_roles_on_their_groups() -> None:
    plays = load(REPO / "playbooks" / "site.yml")
    where = {r["role"]: p["hosts"] for p in plays for r in p.get("roles", [])}
    assert where["dcgm_exporter"] == "gpu_nodes" and where["slurm_exporter"] == "slurm_controller"
