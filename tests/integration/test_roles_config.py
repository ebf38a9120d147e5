"""The roles' configuration is accepted by the real binaries of the debian bundle — and broken
configuration is refused with the tool's own message.

The binaries come from the session's debian-channel bundle, built and imported once with the vigil
CLI (tests/conftest.py), or from an imported bundle's `files/` directory named by VIGIL_BUNDLE_FILES.
Each check runs the role's own `validate` command, read from its task file, so the test and the
deploy agree.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.unit.roles.rendering import ROLES, render
from tests.unit.rules import rulekit

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BINARIES = {
    "_victoriametrics_binary": "victoria-metrics/bin/victoria-metrics",
    "_vmalert_binary": "victoria-metrics/bin/vmalert",
    "_alertmanager_amtool": "prometheus-alertmanager/bin/amtool",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("rendered")
    render(tmp)
    return tmp / "rendered"


def role_check(role: str, task_prefix: str, components: Path, path: Path) -> subprocess.CompletedProcess[str]:
    """Run the `validate` command of the role's task named ``task_prefix…`` on ``path``."""
    tasks = yaml.safe_load((ROLES / role / "tasks" / "configure.yml").read_text())
    (task,) = [t for t in tasks if t["name"].startswith(task_prefix)]
    args = task.get("ansible.builtin.template") or task.get("ansible.builtin.copy")
    if args is None:  # the `_common` entry point `files`: the checker its entries name
        files = task["vars"]["_common_files"]
        if isinstance(files, str):  # built in Jinja: the checker is a variable of the role
            (command,) = {"{{ " + v + " }}" for v in re.findall(r"'validate': (_\w+)", files)}
        else:
            (command,) = {f["validate"] for f in files}
    else:
        command = args["validate"]
    ref = re.fullmatch(r"\{\{ (_\w+) \}\}", command)
    if ref:  # a checker kept in the role's vars
        command = yaml.safe_load((ROLES / role / "vars" / "main.yml").read_text())[ref.group(1)]
    for var, rel in BINARIES.items():
        command = command.replace("{{ " + var + " }}", str(components / rel))
    assert "{{" not in command, command
    argv = [a.replace("%s", str(path)) for a in shlex.split(command)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_scrape_config_passes_the_dry_run(components: Path, rendered: Path) -> None:
    res = role_check("victoriametrics", "Write the scrape configuration", components, rendered / "scrape.yml")
    assert res.returncode == 0, res.stderr


def test_broken_scrape_config_is_refused(components: Path, rendered: Path, tmp_path: Path) -> None:
    bad = tmp_path / "scrape.yml"
    bad.write_text(rendered.joinpath("scrape.yml").read_text().replace("scrape_timeout:", "scrape_timeuot:"))
    res = role_check("victoriametrics", "Write the scrape configuration", components, bad)
    assert res.returncode != 0
    assert "field scrape_timeuot not found" in res.stderr


@pytest.mark.parametrize(
    "rules", sorted((ROLES / "vmalert" / "files" / "rules").glob("*.yml")), ids=lambda p: p.name
)
def test_shipped_rules_pass_vmalert_dry_run(components: Path, rules: Path) -> None:
    res = role_check("vmalert", "Install the rule files", components, rules)
    assert res.returncode == 0, res.stderr


def lab_vars(prefix: str) -> dict[str, object]:
    """The lab inventory's settings of one role (installer/lab/inventory.py)."""
    from vigil.installer.lab.inventory import inventory_data
    from vigil.installer.lab.paths import LabPaths

    monitoring = inventory_data(LabPaths.from_env())["all"]["children"]["monitoring"]["vars"]
    return {k: v for k, v in monitoring.items() if k.startswith(prefix)}


@pytest.mark.parametrize("name", [p.name for p in rulekit.shipped()])
def test_rules_with_the_lab_timings_pass_vmalert_dry_run(components: Path, tmp_path: Path, name: str) -> None:
    """As the lab deploys them: groups every 10 s (the accounting ones kept), `for:` capped at 20 s."""
    path = tmp_path / name
    path.write_text(rulekit.role_rule_files(**lab_vars("vmalert_"))[name])
    res = role_check("vmalert", "Install the rule files", components, path)
    assert res.returncode == 0, res.stderr


def test_broken_rule_is_refused(components: Path, tmp_path: Path) -> None:
    shipped = (ROLES / "vmalert" / "files" / "rules" / "vigil-targets.yml").read_text()
    bad = tmp_path / "bad.yml"
    bad.write_text(shipped.replace("expr: sum by (job) (up)\n", "expr: sum by (job) (up\n", 1))
    res = role_check("vmalert", "Install the rule files", components, bad)
    assert res.returncode != 0
    assert 'invalid expression for rule "vigil_targets"."job:up:sum"' in res.stderr


def test_alertmanager_config_passes_amtool(components: Path, rendered: Path) -> None:
    res = role_check(
        "alertmanager", "Write the Alertmanager configuration", components, rendered / "alertmanager.yml"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_alertmanager_config_with_the_lab_timings_passes_amtool(components: Path, tmp_path: Path) -> None:
    lab = lab_vars("alertmanager_")
    assert set(lab) == {"alertmanager_group_wait", "alertmanager_group_interval"}
    out = render(tmp_path, extra_vars=lab, only=("alertmanager.yml",))["alertmanager.yml"]
    route = yaml.safe_load(out)["route"]
    assert (route["group_wait"], route["group_interval"]) == (
        lab["alertmanager_group_wait"],
        lab["alertmanager_group_interval"],
    )
    res = role_check(
        "alertmanager",
        "Write the Alertmanager configuration",
        components,
        tmp_path / "rendered" / "alertmanager.yml",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_alertmanager_config_with_an_unknown_receiver_is_refused(
    components: Path, rendered: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "alertmanager.yml"
    bad.write_text(
        rendered.joinpath("alertmanager.yml")
        .read_text()
        .replace("receiver: vigil-default", "receiver: pager")
    )
    res = role_check("alertmanager", "Write the Alertmanager configuration", components, bad)
    assert res.returncode != 0
    assert 'undefined receiver "pager" used in route' in res.stdout + res.stderr


@pytest.mark.parametrize("name", ["default.tmpl", "email.tmpl"])
def test_debian_notification_templates_parse(components: Path, name: str) -> None:
    res = role_check(
        "alertmanager",
        "Install the default notification templates",
        components,
        ROLES / "alertmanager" / "files" / name,
    )
    assert res.returncode == 0, res.stderr


def test_broken_notification_template_is_refused(components: Path, tmp_path: Path) -> None:
    bad = tmp_path / "default.tmpl"
    bad.write_text('{{ define "__subject" }}{{ .Status \n')
    res = role_check("alertmanager", "Install the default notification templates", components, bad)
    assert res.returncode != 0
    assert re.search(r"unclosed action|unexpected", res.stderr), res.stderr


def test_notification_templates_render_the_default_subject(components: Path) -> None:
    """The names Alertmanager's receivers look up exist and render with amtool's sample data."""
    amtool = components / "prometheus-alertmanager" / "bin" / "amtool"
    files = ROLES / "alertmanager" / "files"
    for name in (
        "email.default.subject",
        "email.default.html",
        "slack.default.title",
        "pagerduty.default.description",
    ):
        res = subprocess.run(
            [
                str(amtool),
                "template",
                "render",
                f"--template.glob={files}/*.tmpl",
                '--template.text={{ template "' + name + '" . }}',
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, f"{name}: {res.stderr}"
        assert res.stdout.strip(), name


def test_bundle_exporters_wheel_serves_every_collectors_csv_field(components: Path, tmp_path: Path) -> None:
    """The bundle's exporters wheel, unpacked by the roles' own script, runs the simulator with the
    `dcgm_exporter` role's command line and serves every field of the production collectors CSV,
    with the CSV's types: the lab's series are the ones the alert rules will see from dcgm-exporter."""
    import csv
    import hashlib
    import socket
    import time
    import urllib.request

    (wheel,) = (components / "vigil-exporters" / "wheels").glob("vigil_exporters-*.whl")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    version = wheel.name.split("-")[1]
    script = (ROLES / "_common" / "files" / "unpack_wheel.py").read_text()
    res = subprocess.run(
        [sys.executable, "-", str(wheel), str(tmp_path), version, sha, "2"],
        input=script,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (res.returncode, res.stdout) == (0, "unpacked\n"), res.stderr
    args = yaml.safe_load((ROLES / "dcgm_exporter" / "vars" / "main.yml").read_text())[
        "_dcgm_exporter_simulator_exec_start"
    ]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    values = {
        "_dcgm_exporter_address": f"127.0.0.1:{port}",
        "dcgm_exporter_jobmap_dir": str(tmp_path / "jobmap"),
        "dcgm_exporter_simulator_faults_file": str(tmp_path / "faults.json"),
        "dcgm_exporter_simulator_gpus": "4",
        "dcgm_exporter_simulator_model": "NVIDIA H100 80GB HBM3",
        "dcgm_exporter_simulator_busy_power": "350",
        "dcgm_exporter_simulator_idle_power": "60",
        "dcgm_exporter_simulator_power_noise": "0",
        "inventory_hostname": "gpu01",
    }
    argv = [re.sub(r"\{\{ (\w+) \}\}", lambda m: values[m.group(1)], a).replace('"', "") for a in args]
    proc = subprocess.Popen(
        [sys.executable, *argv[1:]],
        cwd="/",
        env={
            "PYTHONPATH": str(tmp_path / "current" if (tmp_path / "current").exists() else tmp_path / version)
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(10)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    rows = [
        [c.strip() for c in r]
        for r in csv.reader(
            (ROLES / "dcgm_exporter" / "files" / "vigil-counters.csv").read_text().splitlines()
        )
        if r and not r[0].startswith("#")
    ]
    for name, kind, _ in rows:
        if kind == "label":
            assert f'{name}="' in text, name
        else:
            assert types.get(name) == kind, (name, types.get(name))
    assert 'Hostname="gpu01"' in text and 'modelName="NVIDIA H100 80GB HBM3"' in text
