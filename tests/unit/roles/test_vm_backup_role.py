"""The victoriametrics role's backups (docs/backup.md): the service and timer rendered by Ansible as a
deploy renders them, hardened like the other units, checked by `systemd-analyze verify` and by the
role's own unit checker; the snapshot URL carries the API login only on a site with TLS, and the
preflight names the variable to fix."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.roles import rendering
from tests.unit.roles.rendering import ROLES, render, tls_vars
from tests.unit.roles.test_roles_preflight import fails_with, preflight
from tests.unit.roles.test_roles_templates import HARDENING

BACKUP = {"victoriametrics_backup_enabled": True, "victoriametrics_backup_dst": "/srv/vigil-backup"}
UNITS = ("vigil-vm-backup.service", "vigil-vm-backup.timer")


def _checker(path: Path) -> subprocess.CompletedProcess[str]:
    check = str(
        yaml.safe_load((ROLES / "victoriametrics" / "vars" / "main.yml").read_text())[
            "_victoriametrics_check_unit"
        ]
    )
    return subprocess.run(
        ["/bin/sh", "-c", check.replace("%s", shlex.quote(str(path)))],
        capture_output=True,
        text=True,
        check=False,
    )


def _url(tmp: Path, extra: dict[str, object]) -> str:
    """`_victoriametrics_backup_snapshot_url` as the deploy renders it into the environment file."""
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "url.j2"
    src.write_text("{{ _victoriametrics_backup_snapshot_url }}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(rendering.ON_REQUEST, "url", ("victoriametrics", str(src), {}))
        return render(tmp / "r", extra_vars=extra, only=("url",))["url"].strip()


def test_the_backup_runs_hardened_as_the_service_user_on_a_timer(tmp_path: Path) -> None:
    out = render(tmp_path, extra_vars=BACKUP, only=UNITS)
    unit = out["vigil-vm-backup.service"].splitlines()
    for line in [h for h in HARDENING if h != "Restart=always"] + ["Type=oneshot", "ProtectKernelLogs=yes"]:
        assert line in unit, line
    assert "User=vigil-victoriametrics" in unit and "Group=vigil-victoriametrics" in unit
    assert "ReadWritePaths=/srv/vigil-backup /var/lib/vigil/victoriametrics-backup" in unit
    assert "EnvironmentFile=/etc/vigil/victoriametrics/backup.env" in unit
    assert "TimeoutStartSec=21660" in unit
    assert (
        "ExecStart=/usr/bin/python3 -I /usr/local/libexec/vigil/vigil-vm-backup run --dst /srv/vigil-backup"
        " --host mon01 --keep 7 --vmbackup /opt/vigil/victoria-metrics/current/bin/vmbackup"
        " --storage-data-path /var/lib/vigil/victoriametrics"
        " --status /var/lib/vigil/victoriametrics-backup/status.json --timeout 21600"
    ) in unit
    # root only for the metrics ('+'), whatever the outcome (ExecStopPost)
    assert (
        "ExecStopPost=+/usr/bin/python3 -I /usr/local/libexec/vigil/vigil-vm-backup textfile"
        " --status /var/lib/vigil/victoriametrics-backup/status.json"
        " --textfile-dir /var/lib/vigil/node_exporter/textfile"
    ) in unit
    assert not [line for line in unit if line.startswith("Requires=")]  # a backup never starts the store
    assert not [line for line in unit if "SSL_CERT_FILE" in line]  # no TLS on this site
    timer = out["vigil-vm-backup.timer"].splitlines()
    assert "OnCalendar=daily" in timer and "Persistent=true" in timer and "WantedBy=timers.target" in timer
    analyze = shutil.which("systemd-analyze")
    for name in UNITS:
        path = tmp_path / name
        path.write_text(out[name])
        assert _checker(path).returncode == 0, name
        if analyze:
            res = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, check=False)
            assert res.returncode == 0, res.stderr
        path.write_text(out[name] + "[Unit]\nDescription=twice\n")
        assert _checker(path).returncode != 0, name


def test_with_tls_the_snapshot_is_asked_over_https_with_the_login_and_the_site_ca(tmp_path: Path) -> None:
    assert _url(tmp_path / "plain", BACKUP) == "http://127.0.0.1:8428/snapshot/create"
    ev = tls_vars(tmp_path / "site")
    password = Path(str(ev["vigil_api_password_file"])).read_text().strip()
    url = _url(tmp_path / "tls", {**BACKUP, **ev})
    assert url == f"https://vigil-api:{password}@198.18.0.10:8428/snapshot/create"
    unit = render(tmp_path / "u", extra_vars={**BACKUP, **ev}, only=UNITS)["vigil-vm-backup.service"]
    assert "Environment=SSL_CERT_FILE=/etc/vigil/tls/ca.crt" in unit.splitlines()
    assert "SupplementaryGroups=vigil-tls" in unit.splitlines()
    assert password not in unit  # the login reaches vmbackup through the root-only environment file
    files = yaml.safe_load((ROLES / "victoriametrics" / "tasks" / "configure.yml").read_text())
    (task,) = [t for t in files if "backup script" in t["name"]]
    (env,) = [
        f for f in task["vars"]["_common_files"] if f["path"] == "{{ _victoriametrics_backup_env_file }}"
    ]
    assert env["mode"] == "0600" and "owner" not in env  # root's (vigil_files' default)


@pytest.mark.parametrize(
    "extra",
    [
        {"victoriametrics_backup_dst": ""},
        {"victoriametrics_backup_dst": "relative/path"},
        {"victoriametrics_backup_dst": "/"},
        {"victoriametrics_backup_dst": "/srv/a b"},
        {"victoriametrics_backup_keep": 0},
    ],
)
def test_preflight_names_the_backup_variable_to_fix(tmp_path: Path, extra: dict[str, object]) -> None:
    out = fails_with(
        tmp_path,
        preflight("victoriametrics"),
        **{**BACKUP, "vigil_artifacts": {"bin/vmbackup": {}}, **extra},
    )
    assert "victoriametrics: backups are enabled; set `victoriametrics_backup_dst`" in out
