"""The upgrade's decisions that need no host: the order of the steps, what a step may skip, the store
rollback refusal, the site history, and how a host's status document is read (hostile ones too)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vigil.installer.deploy.artifacts import DeployError
from vigil.installer.deploy.inventory import Inventory
from vigil.installer.deploy.runner import Failure, Progress, RunResult
from vigil.installer.deploy.site import (
    append_history,
    history_path,
    parse_host_status,
    previous_version,
    read_history,
    read_status_dir,
)
from vigil.installer.deploy.upgrade import (
    Change,
    Step,
    _first_failure,
    _numeric,
    plan_changes,
    plan_lines,
    read_baseline,
    rollout,
    store_downgrade_refusal,
)

INV = Inventory(
    path=Path("inv"),
    hosts=["ctl01", "gpu01", "gpu02", "gpu03", "mon01"],
    groups={"monitoring": ["mon01"], "slurm_controller": ["ctl01"], "gpu_nodes": ["gpu01", "gpu02", "gpu03"]},
)


def _doc(
    host: str,
    comps: dict[str, tuple[str, str, int]],
    *,
    drift: list[Any] | None = None,
    services: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "host": host,
        "facts": {
            "format": 1,
            "host": host,
            "bundle_version": max((c[2] for c in comps.values()), default=1),
            "bundle_channel": "debian",
            "components": {
                name: {
                    "version": v,
                    "role": role,
                    "service": f"vigil-{role}",
                    "bundle_version": bv,
                    "files": {},
                }
                for name, (v, role, bv) in comps.items()
            },
        },
        "drift": drift or [],
        "services": services or {f"vigil-{role}": "active" for (_, role, _) in comps.values()},
    }


MON = {
    "victoria-metrics": ("1.79.5", "victoriametrics", 1),
    "prometheus-alertmanager": ("0.25.0", "alertmanager", 1),
    "prometheus-node-exporter": ("1.5.0", "node_exporter", 1),
}


def test_nodes_first_then_services_then_the_store_last() -> None:
    steps = rollout(INV, 2)
    assert [(s.phase, s.hosts) for s in steps] == [
        ("nodes", ("ctl01", "gpu01")),
        ("nodes", ("gpu02", "gpu03")),
        ("services", ("mon01",)),
        ("store", ("mon01",)),
    ]
    services, store = steps[2], steps[3]
    assert services.skip_tags == "victoriametrics" and services.tags is None
    assert store.tags == "victoriametrics" and store.skip_tags is None
    assert [s.hosts for s in rollout(INV, 1)][:4] == [("ctl01",), ("gpu01",), ("gpu02",), ("gpu03",)]


@pytest.mark.parametrize("serial", [0, -3])
def test_serial_below_one_is_refused(serial: int) -> None:
    with pytest.raises(DeployError, match="--serial: must be at least 1"):
        rollout(INV, serial)


def test_a_step_is_done_only_when_its_roles_are_at_the_target_undrifted_and_running() -> None:
    services, store = Step("services", ("mon01",), skip_tags="victoriametrics"), Step("store", ("mon01",))
    half = dict(
        MON,
        **{
            "prometheus-alertmanager": ("0.28.1", "alertmanager", 2),
            "prometheus-node-exporter": ("1.9.0", "node_exporter", 2),
        },
    )
    st = parse_host_status(_doc("mon01", half), source="t")
    assert services.done(st, 2)  # everything but the store moved: the services step may be skipped
    assert not store.done(st, 2)  # the store did not
    drifted = parse_host_status(
        _doc(
            "mon01", half, drift=[{"component": "prometheus-alertmanager", "path": "/x", "reason": "changed"}]
        ),
        source="t",
    )
    assert not services.done(drifted, 2)
    stopped = parse_host_status(
        _doc("mon01", half, services={"vigil-alertmanager": "failed", "vigil-node_exporter": "active"}),
        source="t",
    )
    assert not services.done(stopped, 2)
    unreadable = parse_host_status(
        _doc(
            "mon01",
            half,
            drift=[{"component": "", "path": "/var/lib/vigil/deployed.json", "reason": "unreadable"}],
        ),
        source="t",
    )
    assert not services.done(unreadable, 2)


def test_a_host_without_facts_is_never_done() -> None:
    st = parse_host_status({"host": "gpu01", "facts": None, "drift": [], "services": {}}, source="t")
    assert not st.deployed
    assert not Step("nodes", ("gpu01",)).done(st, 1)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        "gpu01",
        {"facts": {}},
        {"host": 7},
    ],
)
def test_a_document_that_is_not_a_host_status_is_refused(doc: object) -> None:
    with pytest.raises(DeployError, match="is not a host status document"):
        parse_host_status(doc, source="status/gpu01.json")


def test_hostile_facts_are_read_as_what_they_can_prove() -> None:
    st = parse_host_status(
        {
            "host": "gpu01",
            "facts": {
                "bundle_version": True,  # a bool is not a version
                "components": {
                    "a": "not a mapping",
                    "b": {"version": "1", "role": "r", "bundle_version": "3"},  # a string is not one either
                    "c": {"version": "1", "role": "r", "service": "s", "bundle_version": 3},
                },
            },
            "drift": ["junk", {"component": "c", "path": "/p", "reason": "changed"}],
            "services": {"s": "active"},
        },
        source="t",
    )
    assert st.bundle_version is None and not st.deployed
    assert list(st.components) == ["c"]
    assert [d.path for d in st.drift] == ["/p"]


def test_status_dir_needs_a_document_per_host(tmp_path: Path) -> None:
    (tmp_path / "gpu01.json").write_text(json.dumps(_doc("gpu01", MON)))
    (tmp_path / "gpu02.json").write_text("{not json")
    assert read_status_dir(tmp_path, ["gpu01"])["gpu01"].bundle_version == 1
    with pytest.raises(DeployError, match="unreadable"):
        read_status_dir(tmp_path, ["gpu02"])
    with pytest.raises(DeployError, match="host gpu03: status.yml wrote no gpu03.json"):
        read_status_dir(tmp_path, ["gpu03"])


def test_plan_names_old_and_new_per_host_and_component() -> None:
    st = {"mon01": parse_host_status(_doc("mon01", MON), source="t")}
    target = SimpleNamespace(
        manifest=SimpleNamespace(
            components=[
                SimpleNamespace(name="victoria-metrics", version="1.112.0"),
                SimpleNamespace(name="prometheus-alertmanager", version="0.28.1"),
                SimpleNamespace(name="prometheus-node-exporter", version="1.5.0"),
            ]
        )
    )
    changes = plan_changes(st, target)  # type: ignore[arg-type]
    moved = {(c.component, c.old, c.new) for c in changes if c.changes}
    assert moved == {
        ("victoria-metrics", "1.79.5", "1.112.0"),
        ("prometheus-alertmanager", "0.25.0", "0.28.1"),
    }
    lines = plan_lines(changes, 2)
    assert "  mon01: victoria-metrics 1.79.5 -> 1.112.0" in lines
    # the services whose binary changes restart; node_exporter keeps its version and is not named
    assert "  mon01: restarts vigil-alertmanager, vigil-victoriametrics" in lines
    assert not any("node_exporter" in ln for ln in lines)
    unchanged = plan_lines([c for c in changes if not c.changes], 2)
    assert unchanged[1].startswith("  no component changes version")


def test_debian_versions_compare_by_their_upstream_numbers() -> None:
    assert _numeric("1.112.0+ds1-2") == (1, 112, 0)
    assert _numeric("1.79.5+ds1-2+b5") == (1, 79, 5)
    assert _numeric("1:3.0.9-1") == (3, 0, 9)
    assert _numeric("v1.9.0") == (1, 9, 0)


def test_moving_the_store_to_an_older_release_is_refused_and_upgrading_it_is_not() -> None:
    why = store_downgrade_refusal("1.112.0+ds1-2", "1.79.5+ds1-2+b5")
    assert why is not None and "--keep-store" in why and "1.112.0+ds1-2" in why
    assert store_downgrade_refusal("1.79.5+ds1-2+b5", "1.112.0+ds1-2") is None  # upgrading is fine
    assert store_downgrade_refusal("1.112.0+ds1-2", "1.112.0+ds1-3") is None  # a Debian rebuild
    assert store_downgrade_refusal("1.112.0+ds1-2", "1.112.0+ds1-2") is None


def _result(failures: list[Failure], rc: int = 0) -> RunResult:
    p = Progress()
    p.failures.extend(failures)
    for f in failures:
        p.host(f.host).failed += 1
    return RunResult("r", Path("/runs/r"), "failed" if failures or rc else "successful", rc, p)


def test_a_failure_names_host_component_and_reason() -> None:
    assert _first_failure(_result([])) is None
    assert _first_failure(
        _result([Failure("mon01", "Check rules", "vmalert: group x: lastError boom", "")])
    ) == ("mon01", "vmalert", "group x: lastError boom")
    # a message that does not start with a component: the role names it
    assert _first_failure(
        _result([Failure("mon01", "Probe", "vmalert on mon01 is not healthy: 503", "vmalert")])
    ) == ("mon01", "vmalert", "vmalert on mon01 is not healthy: 503")
    assert _first_failure(_result([], rc=2)) == (
        "all",
        "playbook",
        "ansible status failed (rc 2); see /runs/r",
    )


def test_history_appends_and_finds_the_previous_version(tmp_path: Path) -> None:
    assert read_history(tmp_path) == []
    append_history(tmp_path, {"action": "deploy", "bundle_version": 1, "outcome": "ok"})
    append_history(tmp_path, {"action": "upgrade", "bundle_version": 2, "outcome": "failed"})
    append_history(tmp_path, {"action": "upgrade", "bundle_version": 2, "outcome": "ok"})
    history = read_history(tmp_path)
    assert [h["bundle_version"] for h in history] == [1, 2, 2]
    assert all(h["at"].endswith("Z") for h in history)
    assert previous_version(history, 2) == 1
    assert previous_version(history, 1) == 2
    assert previous_version(history[:1], 1) is None
    assert oct(os.stat(history_path(tmp_path)).st_mode & 0o777) == "0o640"


def test_a_torn_last_line_is_skipped_and_a_torn_middle_line_is_an_error(tmp_path: Path) -> None:
    append_history(tmp_path, {"action": "deploy", "bundle_version": 1, "outcome": "ok"})
    path = history_path(tmp_path)
    with path.open("a") as f:
        f.write('{"action": "upgr')  # the write that died with the power
    assert [h["bundle_version"] for h in read_history(tmp_path)] == [1]
    with path.open("a") as f:
        f.write("\n" + json.dumps({"action": "deploy", "bundle_version": 3, "outcome": "ok"}) + "\n")
    with pytest.raises(DeployError, match="line 2 is not JSON"):
        read_history(tmp_path)


def test_history_is_not_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    history_path(tmp_path).parent.mkdir(parents=True)
    history_path(tmp_path).symlink_to(target)
    with pytest.raises(OSError):
        append_history(tmp_path, {"action": "deploy", "bundle_version": 1, "outcome": "ok"})
    assert target.read_text() == ""


def test_a_stop_asked_for_ends_the_upgrade_before_its_next_step_and_runs_no_playbook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The front end's stop (the TUI's ctrl+b) is honoured between steps: here before the first one,
    after the read-only parts (hosts reached, facts read, baseline taken), which are left to run."""
    import threading

    from tests.factories import craft_bundle, make_key, make_trust
    from vigil.installer.cli import main
    from vigil.installer.deploy import upgrade as upgrade_mod

    key = make_key(tmp_path / "keys", "release")
    trust = tmp_path / "trust.json"
    root = make_trust(trust, [key])
    home = tmp_path / "home"
    bundle = craft_bundle(tmp_path / "out", [key], version=2).path
    assert main(["--home", str(home), "bundle", "import", str(bundle), "--trust", str(trust)]) == 0
    inventory = tmp_path / "site"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text(
        json.dumps({"all": {"children": {"monitoring": {"hosts": {"mon01": {"ansible_host": "127.0.0.1"}}}}}})
    )
    ran: list[str] = []
    status = {"mon01": parse_host_status(_doc("mon01", MON), source="t")}
    monkeypatch.setattr(upgrade_mod, "ping_hosts", lambda **_: {})
    monkeypatch.setattr(upgrade_mod.Rollout, "status", lambda self, inv, bundle, hosts=None: dict(status))
    monkeypatch.setattr(upgrade_mod.Rollout, "_baseline", lambda self, inv, bundle: {"silences": []})
    monkeypatch.setattr(upgrade_mod.Rollout, "_site", lambda self, *a, **k: ran.append("site"))
    monkeypatch.setattr(upgrade_mod.Rollout, "_health", lambda self, *a, **k: ran.append("health"))
    stop = threading.Event()
    stop.set()
    said: list[str] = []
    r = upgrade_mod.Rollout(home, inventory, root, target=2, stop=stop, say=said.append)
    with pytest.raises(DeployError) as err:
        r.run()
    why = f"upgrade {r.run_dir.name}: stopped by the operator before services mon01"
    assert str(err.value).startswith(why), err.value
    assert ran == []  # no playbook changed anything, and no health check was left half-done
    assert said[0] == "plan: bundle 2"


def _site_for_upgrade(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list[str]]:
    """A home with bundle 2 imported and a one-host inventory (mon01 at 198.18.0.10): the home, and
    the `vigil upgrade --to 2` command line for it (the import's output is read away)."""
    from tests.factories import craft_bundle, make_key, make_trust
    from vigil.installer.cli import main

    key = make_key(tmp_path / "keys", "release")
    trust = tmp_path / "trust.json"
    make_trust(trust, [key])
    home = tmp_path / "home"
    bundle = craft_bundle(tmp_path / "out", [key], version=2).path
    assert main(["--home", str(home), "bundle", "import", str(bundle), "--trust", str(trust)]) == 0
    inventory = tmp_path / "site"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text(
        json.dumps(
            {"all": {"children": {"monitoring": {"hosts": {"mon01": {"ansible_host": "198.18.0.10"}}}}}}
        )
    )
    capsys.readouterr()
    return home, [
        "--home", str(home), "upgrade", "-i", str(inventory), "--to", "2", "--trust", str(trust), "--no-admin"
    ]  # fmt: skip


def _fake_playbooks(monkeypatch: pytest.MonkeyPatch, plays: list[dict[str, Any]], write: Any = None) -> None:
    """Every playbook an upgrade runs goes through Rollout._play: recorded here, and ``write(run_dir)``
    may leave something in its run directory."""
    from vigil.installer.deploy import upgrade as upgrade_mod

    status = {"mon01": parse_host_status(_doc("mon01", MON), source="t")}
    monkeypatch.setattr(upgrade_mod, "ping_hosts", lambda **_: {})
    monkeypatch.setattr(upgrade_mod.Rollout, "status", lambda self, inv, bundle, hosts=None: dict(status))
    monkeypatch.setattr(upgrade_mod.Rollout, "_baseline", lambda self, inv, bundle: {"silences": []})
    monkeypatch.setattr(upgrade_mod.Rollout, "_health", lambda self, *a, **k: None)

    def play(self: Any, bundle: Any, playbook: str, name: str, **kw: Any) -> RunResult:
        plays.append({"playbook": playbook, "name": name, **kw})
        run = self.run_dir / f"{len(plays):02d}-{name}"
        run.mkdir()
        if write is not None:
            write(run)
        return RunResult(run_id=run.name, run_dir=run, status="successful", rc=0, progress=Progress())

    monkeypatch.setattr(upgrade_mod.Rollout, "_play", play)


def test_an_upgrade_issues_the_certificates_first_and_hands_them_to_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vigil.installer.cli import main
    from vigil.installer.pki import PkiPaths

    home, argv = _site_for_upgrade(tmp_path, capsys)
    plays: list[dict[str, Any]] = []
    _fake_playbooks(monkeypatch, plays)
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tls"] == {
        "ca_made": True,
        "issued": {"mon01": "missing"},
        "clients_issued": {"mon01": "missing"},
        "hosts": 1,
        "credentials_made": [
            "scrape.password",
            "scrape.password.bcrypt",
            "scrape.password.sha256",
            "api.password",
            "api.password.bcrypt",
            "api.password.sha256",
            "metrics.key",
            "grafana-admin-password-mon01",
            "victoriametrics-delete-auth-key-mon01",
        ],
    }, out["tls"]
    paths = PkiPaths.of(home)
    assert (paths.issued("mon01") / "server.crt").is_file()
    assert (paths.issued("mon01") / "client.crt").is_file()
    sites = [p for p in plays if p["playbook"] == "playbooks/site.yml"]
    assert [p["name"] for p in sites] == ["services-v2", "store-v2"]
    for p in sites:
        assert p["extra"] == {
            "vigil_pki_dir": str(paths.root),
            "vigil_tls_hosts": ["mon01"],
            "vigil_scrape_user": "vigil-scrape",
            "vigil_scrape_password_file": str(home / "secrets" / "scrape.password"),
            "vigil_scrape_bcrypt_file": str(home / "secrets" / "scrape.password.bcrypt"),
            "vigil_scrape_sha256_file": str(home / "secrets" / "scrape.password.sha256"),
            "vigil_api_user": "vigil-api",
            "vigil_api_password_file": str(home / "secrets" / "api.password"),
            "vigil_api_bcrypt_file": str(home / "secrets" / "api.password.bcrypt"),
            "vigil_api_sha256_file": str(home / "secrets" / "api.password.sha256"),
            "vigil_metrics_key_file": str(home / "secrets" / "metrics.key"),
        }, p
    # a second upgrade keeps the certificate (the CA's 30-day rule) and still hands it over
    plays.clear()
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tls"] == {
        "ca_made": False,
        "issued": {},
        "clients_issued": {},
        "hosts": 1,
        "credentials_made": [],
    }
    assert all(
        p["extra"]["vigil_tls_hosts"] == ["mon01"] for p in plays if p["playbook"].endswith("site.yml")
    )


def test_an_upgrade_whose_run_printed_a_secret_fails_naming_it_and_never_prints_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vigil.installer.cli import main
    from vigil.installer.pki import PkiPaths

    home, argv = _site_for_upgrade(tmp_path, capsys)
    plays: list[dict[str, Any]] = []

    def printed_the_host_key(run: Path) -> None:
        if run.name.endswith("-store-v2"):
            key = (PkiPaths.of(home).issued("mon01") / "server.key").read_text()
            (run / "stdout").write_text(f"ok: [mon01] => {json.dumps({'msg': key})}\n")

    _fake_playbooks(monkeypatch, plays, printed_the_host_key)
    assert main(argv) == 1
    err = capsys.readouterr().err
    fail = [line for line in err.splitlines() if line.startswith("FAIL: ")]
    assert len(fail) == 1 and fail[0].startswith("FAIL: upgrade "), err
    assert "mon01/server.key" in fail[0] and "store-v2/stdout" in fail[0] and "no_log" in fail[0], fail
    assert "PRIVATE KEY" not in err
    assert read_history(home)[-1]["outcome"] == "failed"
    assert main(["--home", str(home), "audit", "verify"]) == 0


def test_check_names_the_files_a_check_run_of_the_target_would_change_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vigil.installer.cli import main
    from vigil.installer.deploy import upgrade as upgrade_mod
    from vigil.installer.deploy.runner import Changed

    home, argv = _site_for_upgrade(tmp_path, capsys)
    plays: list[dict[str, Any]] = []
    _fake_playbooks(monkeypatch, plays)
    real_play = upgrade_mod.Rollout._play
    rules = "/etc/vigil/vmalert/rules/vigil-nodes.yml"

    def play(self: Any, bundle: Any, playbook: str, name: str, **kw: Any) -> RunResult:
        result = real_play(self, bundle, playbook, name, **kw)
        if kw.get("check"):
            result.progress.changes += [
                Changed(
                    "mon01", "Unpack", "vmalert", ("/opt/vigil/vmalert/1.112.0", "/opt/vigil/vmalert/current")
                ),
                Changed("mon01", "Install the shipped rule files", "vmalert", (rules,)),
                Changed("mon01", "Install the shipped rule files again", "vmalert", (rules,)),
                Changed("mon01", "Write the unit", "vmalert", ("/etc/systemd/system/vigil-vmalert.service",)),
            ]
        return result

    monkeypatch.setattr(upgrade_mod.Rollout, "_play", play)
    assert main([*argv, "--check", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == {"mon01": [rules, "/etc/systemd/system/vigil-vmalert.service"]}, out
    assert out["files_unknown"] == ""
    # one check-mode run of the target's site.yml on the hosts not at it, with the certificates it
    # would hand over, and nothing else: no step, no health check, no certificate issued
    assert [(p["playbook"], p["name"], p.get("check")) for p in plays] == [
        ("playbooks/site.yml", "plan", True)
    ]
    assert plays[0]["limit"] == ["mon01"]
    assert list(home.rglob("server.crt")) == [] and list(home.rglob("ca.key")) == []
    assert main([*argv, "--check"]) == 0
    text = capsys.readouterr().out
    assert f"  mon01: changes {rules}, /etc/systemd/system/vigil-vmalert.service" in text, text


def test_a_check_run_that_fails_is_said_in_the_plan_and_the_plan_still_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vigil.installer.cli import main
    from vigil.installer.deploy import upgrade as upgrade_mod

    home, argv = _site_for_upgrade(tmp_path, capsys)
    _fake_playbooks(monkeypatch, [])
    real_play = upgrade_mod.Rollout._play

    def play(self: Any, bundle: Any, playbook: str, name: str, **kw: Any) -> RunResult:
        result = real_play(self, bundle, playbook, name, **kw)
        result.progress.failures.append(Failure("mon01", "Render", "vmalert: template error", "vmalert"))
        return result

    monkeypatch.setattr(upgrade_mod.Rollout, "_play", play)
    assert main([*argv, "--check"]) == 0
    text = capsys.readouterr().out
    assert (
        "  files that change: not known, the check run failed on host mon01: vmalert: template error" in text
    )
    assert "  mon01: victoria-metrics 1.79.5 -> " in text, text


def test_plan_lines_name_each_hosts_files() -> None:
    changes = [Change("gpu01", "prometheus-node-exporter", "1.5.0", "1.9.0", 1, "vigil-node-exporter")]
    lines = plan_lines(changes, 2, {"gpu01": ["/etc/a", "/etc/b"]})
    assert lines == [
        "plan: bundle 2",
        "  gpu01: prometheus-node-exporter 1.5.0 -> 1.9.0",
        "  gpu01: restarts vigil-node-exporter",
        "  gpu01: changes /etc/a, /etc/b",
    ]


#: a silence id as Alertmanager makes one, and one that is a template: a command run on the admin host
#: if Ansible ever rendered it (the silence store belongs to Alertmanager's user on the monitoring host)
SILENCE = "0b5c4f0e-3d7a-4d8e-9a51-6f1e2c3b4a01"
HOSTILE_SILENCE = "{{ lookup('ansible.builtin.pipe', 'touch /tmp/vigil-silence-ran') }}"


def _baseline_error(path: Path, bad: object) -> str:
    shown = json.dumps(bad)
    return (
        f"silence id {shown[:80]}{'...' if len(shown) > 80 else ''}: in {path} (read from Alertmanager "
        "before the upgrade) is not a UUID, the only form Alertmanager makes; refused, nothing was changed"
    )


@pytest.mark.parametrize(
    "bad",
    [
        HOSTILE_SILENCE,
        SILENCE.upper(),
        SILENCE + "\n",
        " " + SILENCE,
        SILENCE + "{{ 1 }}",
        "",
        42,
        None,
        {"id": SILENCE},
        [SILENCE],
    ],
    ids=["template", "upper-case", "newline", "space", "suffix", "empty", "int", "null", "object", "list"],
)
def test_the_baseline_takes_silence_ids_that_are_uuids_and_nothing_else(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"silences": [SILENCE, bad], "rule_groups": []}))
    with pytest.raises(DeployError) as err:
        read_baseline(path)
    assert str(err.value) == _baseline_error(path, bad)


def test_a_baseline_not_shaped_as_health_yml_writes_it_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    for doc, reason in [
        ("[]", "holds no list of silences; nothing was changed"),
        ('{"silences": "' + SILENCE + '"}', "holds no list of silences; nothing was changed"),
        ("{", "unreadable: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ]:
        path.write_text(doc)
        with pytest.raises(DeployError) as err:
            read_baseline(path)
        assert str(err.value) == f"{path}: {reason}"
    path.write_text(json.dumps({"silences": [SILENCE], "rule_groups": ["vigil-nodes"]}))
    assert read_baseline(path) == [SILENCE]


def _recorded_runs(monkeypatch: pytest.MonkeyPatch, silences: list[Any]) -> list[dict[str, Any]]:
    """Every playbook run of an upgrade as ansible-runner would be asked for it (its extra vars
    whole); the baseline run leaves ``silences`` in baseline.json, as health.yml does."""
    from vigil.installer.deploy import upgrade as upgrade_mod

    status = {"mon01": parse_host_status(_doc("mon01", MON), source="t")}
    monkeypatch.setattr(upgrade_mod, "ping_hosts", lambda **_: {})
    monkeypatch.setattr(upgrade_mod.Rollout, "status", lambda self, inv, bundle, hosts=None: dict(status))
    runs: list[dict[str, Any]] = []

    def start(**kw: Any) -> Any:
        runs.append(kw)
        ev = kw["extravars"]
        if kw["playbook"] == "playbooks/health.yml" and ev["vigil_health_mode"] == "baseline":
            doc = {"silences": silences, "rule_groups": []}
            (Path(ev["vigil_status_dir"]) / "baseline.json").write_text(json.dumps(doc))
        run = kw["runs_dir"] / kw["run_id"]
        run.mkdir()
        result = RunResult(run_id=run.name, run_dir=run, status="successful", rc=0, progress=Progress())
        return SimpleNamespace(wait=lambda: result)

    monkeypatch.setattr(upgrade_mod, "start_playbook", start)
    return runs


def test_a_silence_id_that_is_a_template_stops_the_upgrade_before_any_step_and_reaches_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Extra vars are templates to ansible-core: a silence id among them would run its lookup as the
    admin (tests/unit/roles/test_templating_trust.py shows it does)."""
    from vigil.installer.cli import main

    home, argv = _site_for_upgrade(tmp_path, capsys)
    runs = _recorded_runs(monkeypatch, [SILENCE, HOSTILE_SILENCE])
    assert main(argv) == 1
    err = capsys.readouterr().err
    fail = [line for line in err.splitlines() if line.startswith("FAIL: ")]
    (baseline,) = home.glob("runs/*-upgrade/baseline/baseline.json")
    assert fail == [f"FAIL: {_baseline_error(baseline, HOSTILE_SILENCE)}"], err
    # the baseline run only: no step changed a host, no health check ran
    assert [(r["playbook"], r["extravars"].get("vigil_health_mode")) for r in runs] == [
        ("playbooks/health.yml", "baseline")
    ]
    assert not any("lookup(" in json.dumps(r["extravars"]) for r in runs)
    record = json.loads((home / "audit" / "log.jsonl").read_text().splitlines()[-1])
    assert (record["action"], record["outcome"]) == ("upgrade", "refused"), record


def test_the_silences_to_keep_reach_the_health_checks_in_their_file_never_in_extra_vars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vigil.installer.cli import main

    home, argv = _site_for_upgrade(tmp_path, capsys)
    runs = _recorded_runs(monkeypatch, [SILENCE])
    assert main(argv) == 0, capsys.readouterr().err
    checks = [r for r in runs if r["extravars"].get("vigil_health_mode") == "check"]
    assert len(checks) == 3  # after the services, after the store, and the last one
    for r in checks:
        kept = json.loads((Path(r["extravars"]["vigil_status_dir"]) / "baseline.json").read_text())
        assert kept["silences"] == [SILENCE]
    assert [r for r in runs if SILENCE in json.dumps(r["extravars"])] == []
