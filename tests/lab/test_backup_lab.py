"""VictoriaMetrics' backups on the lab (docs/backup.md): mon01 deployed again with
`victoriametrics_backup_enabled` and a destination, its backup service started by hand (the timer
would start it at night), the backup marked complete and owned by the service user, the outcome in
the vigil_backup_* metrics VictoriaMetrics scrapes from node_exporter, and `vigil backup status`
showing it. A destination others may write is refused in one line. The restore drill: the backup
restored into a new data directory and a second VictoriaMetrics started on it (127.0.0.1 only)
answers count(up) at the backup's time as the running one does. The module disables the timer and
removes what it made when it ends.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from tests.lab.labhttp import query, wait_for

if TYPE_CHECKING:
    from tests.lab.conftest import DeployedStack

pytestmark = pytest.mark.lab

DST = "/srv/vigil-backup"
SCRIPT = "/usr/local/libexec/vigil/vigil-vm-backup"
RESTORED = "/var/lib/vigil/victoriametrics-restore-drill"
DRILL_PORT = 18428


@pytest.fixture(scope="module")
def backups(
    lab: Any, deployed_stack: DeployedStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """mon01 deployed with backups enabled (an inventory of its own: the lab's, plus two host vars)."""
    inventory = tmp_path_factory.mktemp("backup-inventory") / "inventory"
    shutil.copytree(lab.inventory, inventory)
    (inventory / "host_vars").mkdir(exist_ok=True)
    (inventory / "host_vars" / "mon01.yml").write_text(
        yaml.safe_dump({"victoriametrics_backup_enabled": True, "victoriametrics_backup_dst": DST})
    )
    lab.ssh("mon01", f"install -d -m 0755 -o root -g root {DST}")
    try:
        out = deployed_stack.vigil.json(
            "deploy", "-i", str(inventory), "--limit", "mon01", "--tags", "victoriametrics", "--json"
        )
        assert out["ok"] is True, out
        yield lab
    finally:
        lab.ssh("mon01", "systemctl disable --now vigil-vm-backup.timer", check=False)
        lab.ssh("mon01", f"systemctl stop vigil-vm-restore-drill; rm -rf {DST} {RESTORED}", check=False)
        lab.ssh("mon01", "rm -f /var/lib/vigil/node_exporter/textfile/vigil_backup.prom", check=False)


def _run_backup(lab: Any) -> None:
    res = lab.ssh("mon01", "systemctl start vigil-vm-backup.service", check=False, timeout=600)
    if res.returncode != 0:
        journal = lab.ssh("mon01", "journalctl -u vigil-vm-backup --no-pager -n 50", check=False).stdout
        pytest.fail(f"vigil-vm-backup failed:\n{res.stderr}\n{journal}")


def test_a_backup_completes_as_the_service_user_and_its_metrics_reach_victoriametrics(
    backups: Any, deployed_stack: DeployedStack
) -> None:
    lab = backups
    assert lab.ssh("mon01", "systemctl is-enabled vigil-vm-backup.timer").stdout.strip() == "enabled"
    show = lab.ssh(
        "mon01", "systemctl show vigil-vm-backup.service -p User -p NoNewPrivileges -p ProtectSystem"
    ).stdout.split()
    assert {"User=vigil-victoriametrics", "NoNewPrivileges=yes", "ProtectSystem=strict"} <= set(show)
    _run_backup(lab)
    names = lab.ssh("mon01", f"ls {DST}/mon01").stdout.split()
    assert len(names) == 1, names
    marker = json.loads(lab.ssh("mon01", f"cat {DST}/mon01/{names[0]}/vigil-backup.json").stdout)
    assert marker["host"] == "mon01" and marker["bytes"] > 0 and marker["files"] > 0
    owner = lab.ssh("mon01", f"stat -c '%U %a' {DST}/mon01 {DST}/mon01/{names[0]}").stdout.split()
    assert owner == ["vigil-victoriametrics", "700", "vigil-victoriametrics", "700"]
    wait_for(
        "vigil_backup_last_run_success on mon01",
        lambda: [s for s in query('vigil_backup_last_run_success{instance="mon01"} == 1')],
        timeout=120,
    )
    res = deployed_stack.vigil("backup", "status", "--json")
    (host,) = json.loads(res.stdout)
    assert host["host"] == "mon01" and host["stale"] is False and host["size_bytes"] == marker["bytes"]
    # a second run hard-links what the first holds (its origin)
    time.sleep(1.1)
    _run_backup(lab)
    names = lab.ssh("mon01", f"ls {DST}/mon01").stdout.split()
    second = json.loads(lab.ssh("mon01", f"cat {DST}/mon01/{names[-1]}/vigil-backup.json").stdout)
    assert len(names) == 2 and second["origin"] == names[0]


def test_a_destination_others_may_write_is_refused_in_one_line(backups: Any) -> None:
    lab = backups
    lab.ssh("mon01", f"chmod 0777 {DST}")
    try:
        res = lab.ssh("mon01", "systemctl start vigil-vm-backup.service", check=False, timeout=300)
        assert res.returncode != 0
        journal = lab.ssh("mon01", "journalctl -u vigil-vm-backup --no-pager -n 20 -o cat").stdout
        assert f"vigil-vm-backup: {DST}: writable by its group or by others (mode 0777)" in journal
    finally:
        lab.ssh("mon01", f"chmod 0755 {DST}")


def test_the_restore_drill_answers_as_the_source(backups: Any) -> None:
    lab = backups
    _run_backup(lab)
    newest = lab.ssh("mon01", f"ls {DST}/mon01").stdout.split()[-1]
    marker = json.loads(lab.ssh("mon01", f"cat {DST}/mon01/{newest}/vigil-backup.json").stdout)
    at = int(marker["started"]) - 60
    lab.ssh(
        "mon01",
        f"python3 -I {SCRIPT} restore --from {DST}/mon01/{newest} --to {RESTORED}"
        " --owner vigil-victoriametrics",
    )
    binary = "/opt/vigil/victoria-metrics/current/bin/victoria-metrics"
    lab.ssh(
        "mon01",
        "systemd-run --unit vigil-vm-restore-drill -p User=vigil-victoriametrics "
        f"{binary} -storageDataPath={RESTORED} -httpListenAddr=127.0.0.1:{DRILL_PORT} -retentionPeriod=400d",
    )

    def drill() -> str:
        # the lab's hosts have no curl: the host's python3 asks
        res = lab.ssh(
            "mon01",
            "python3 -I -c 'import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "
            f"'http://127.0.0.1:{DRILL_PORT}/api/v1/query?query=count(up)&time={at}&nocache=1'",
            check=False,
        )
        return res.stdout if res.returncode == 0 and '"result":[{' in res.stdout else ""

    restored = json.loads(wait_for("the restored VictoriaMetrics", drill, timeout=120))
    source = query("count(up)", at=at, nocache=True)
    assert restored["data"]["result"][0]["value"] == source[0]["value"]
