"""The admin host's vigil installed from a signed bundle: real wheels, a real pip, offline.

The bundles are signed and imported as every bundle is; their wheels are small ones made here (a
`vigil` with a `vigil` console script, and a dependency it requires), so that each install — a new
virtual environment, `pip install --no-index --require-hashes`, `pip check` — takes seconds, not
the minutes the real bundle's ansible-core, cryptography and textual take.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.factories import Member, craft_bundle, make_key, make_trust
from tests.helpers.release import Imported
from vigil.bundle.errors import TamperedFile
from vigil.bundle.store import BundleStore
from vigil.bundle.trust import load_root
from vigil.installer import ops
from vigil.installer.audit.log import AuditLog
from vigil.installer.deploy.admin import AdminRefused, AdminStep, admin_state, read_current
from vigil.installer.deploy.artifacts import DeployError, StoredBundle, open_stored
from vigil.installer.deploy.upgrade import Rollout
from vigil.installer.ops.upgrade import _admin_step

pytestmark = pytest.mark.integration

DEP = "vigil_stub_dep"


def wheel(name: str, version: str, files: dict[str, str], *, requires: str = "", script: str = "") -> bytes:
    """A real wheel (PEP 427): the files, METADATA, WHEEL, entry points and a RECORD of their hashes."""
    info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + (
        f"Requires-Dist: {requires}\n" if requires else ""
    )
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: vigil-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if script:
        members[f"{info}/entry_points.txt"] = f"[console_scripts]\n{script}\n"
    record = []
    for path, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    members[f"{info}/RECORD"] = "\n".join(record) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in members.items():
            z.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return buf.getvalue()


def vigil_wheel(version: str, *, requires: str = "vigil-stub-dep==1.0") -> bytes:
    cli = f"import sys\ndef main():\n    print('vigil {version}: ' + ' '.join(sys.argv[1:]))\n    return 0\n"
    return wheel(
        "vigil",
        version,
        {"vigil_admin_stub.py": cli},
        requires=requires,
        script="vigil = vigil_admin_stub:main",
    )


def dep_wheel() -> bytes:
    return wheel(DEP, "1.0", {f"{DEP}.py": "VALUE = 1\n"})


def admin_members(version: str, *, deps: bool = True, vigil: bytes | None = None) -> list[Member]:
    out = [Member(f"components/vigil/wheels/vigil-{version}-py3-none-any.whl", vigil or vigil_wheel(version))]
    if deps:
        out.append(Member(f"components/vigil-deps/wheels/{DEP}-1.0-py3-none-any.whl", dep_wheel()))
    out.append(Member("ansible/playbooks/site.yml", b"- hosts: all\n  tasks: []\n"))
    return out


def set_vigil_version(declared: str) -> Any:
    def edit(manifest: dict[str, Any]) -> None:
        for f in manifest["files"]:
            if f["path"].startswith("components/vigil/wheels/"):
                f["version"] = declared

    return edit


@pytest.fixture
def site(tmp_path: Path) -> dict[str, Any]:
    """A VIGIL_HOME with bundles 1 and 2 imported (vigil 9.1.0 and 9.2.0), the root for installs."""
    key = make_key(tmp_path, "k")
    make_trust(tmp_path / "trust.json", [key])
    home = tmp_path / "home"
    ops.install_trust(ops.Invocation(home=home), tmp_path / "trust.json")
    for n, version in ((1, "9.1.0"), (2, "9.2.0")):
        b = craft_bundle(
            tmp_path / "out",
            [key],
            version=n,
            members=admin_members(version),
            edit=set_vigil_version(version),
        )
        ops.import_bundle(ops.Invocation(home=home), b.path)
    return {"home": home, "key": key, "tmp": tmp_path, "root": tmp_path / "opt" / "admin"}


def stored(site: dict[str, Any], version: int) -> StoredBundle:
    trust = load_root(ops.installed_trust_path(site["home"]))
    return open_stored(BundleStore(site["home"]), trust, version)


def import_crafted(
    site: dict[str, Any], version: int, members: list[Member], edit: Any = None
) -> StoredBundle:
    b = craft_bundle(site["tmp"] / "out", [site["key"]], version=version, members=members, edit=edit)
    ops.import_bundle(ops.Invocation(home=site["home"]), b.path)
    return stored(site, version)


def install(root: Path, bundle: StoredBundle, lines: list[str] | None = None) -> AdminStep:
    step = AdminStep(root, say=(lines.append if lines is not None else lambda _: None))
    step.acquire()
    try:
        step.prepare(bundle)
        step.switch()
    finally:
        step.release()
    return step


def audit(home: Path, action: str) -> list[dict[str, Any]]:
    return list(AuditLog(home).records(action=action))


def listing(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_installs_offline_beside_the_old_switches_current_and_back(
    site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root: Path = site["root"]
    # the caller's pip settings and home are not pip's: with them it would install elsewhere
    elsewhere, home = site["tmp"] / "pip-target", site["tmp"] / "admin-home"
    elsewhere.mkdir()
    home.mkdir()
    monkeypatch.setenv("PIP_TARGET", str(elsewhere))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("HOME", str(home))
    lines: list[str] = []
    step = install(root, stored(site, 1), lines)
    assert listing(elsewhere) == [] and listing(home) == []
    assert os.readlink(root / "current") == "9.1.0-bundle1"
    assert step.details["installed"] == "new" and step.details["switched"] is True
    out = subprocess.run(
        [str(root / "current" / "bin" / "vigil"), "status"], capture_output=True, text=True, check=True
    )
    assert out.stdout == "vigil 9.1.0: status\n"  # the console script, its interpreter line rewritten
    dep = subprocess.run(
        [str(root / "current" / "bin" / "python"), "-c", f"import {DEP}; print({DEP}.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    # the dependency, from the bundle, in the version directory
    assert Path(dep.stdout.strip()).resolve().is_relative_to(root.resolve() / "9.1.0-bundle1" / "lib")
    record = json.loads((root / "current" / "vigil-install.json").read_text())
    assert record["bundle_version"] == 1 and record["vigil_version"] == "9.1.0"
    assert record["manifest_sha256"] == stored(site, 1).manifest_sha256
    # nothing of the staging directory is left, nor its path in any file of the install
    assert listing(root) == [".lock", "9.1.0-bundle1", "current"]
    for p in (root / "9.1.0-bundle1").rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert b".staging-" not in p.read_bytes(), p

    install(root, stored(site, 2))
    assert os.readlink(root / "current") == "9.2.0-bundle2"
    assert listing(root) == [".lock", "9.1.0-bundle1", "9.2.0-bundle2", "current"]
    state = admin_state(root, "0.1.0")
    assert state.current is not None and state.current.bundle_version == 2
    assert state.to_json()["vigil_version"] == "9.2.0" and state.problem == ""

    # rollback: bundle 1's install is there and is its own: current goes back, nothing installed
    back = install(root, stored(site, 1))
    assert back.details["installed"] == "already there" and back.details["previous"] == "9.2.0-bundle2"
    assert os.readlink(root / "current") == "9.1.0-bundle1"


def test_a_link_planted_at_the_version_directory_is_refused(site: dict[str, Any]) -> None:
    root: Path = site["root"]
    elsewhere = site["tmp"] / "elsewhere"
    elsewhere.mkdir()
    root.mkdir(parents=True)
    (root / "9.1.0-bundle1").symlink_to(elsewhere)
    with pytest.raises(AdminRefused, match=r"9\.1\.0-bundle1: is a link, not an install vigil made"):
        install(root, stored(site, 1))
    assert listing(elsewhere) == [] and not os.path.lexists(root / "current")


def test_a_current_pointing_out_of_the_root_is_refused_and_left(site: dict[str, Any]) -> None:
    root: Path = site["root"]
    root.mkdir(parents=True)
    (root / "current").symlink_to(site["tmp"])
    with pytest.raises(AdminRefused, match=r"current: points to \".*\", not a version directory of"):
        install(root, stored(site, 1))
    assert os.readlink(root / "current") == str(site["tmp"]) and listing(root) == [".lock", "current"]
    assert "not a version directory" in admin_state(root, "0.1.0").problem
    # `current` made a directory instead of a link
    (root / "current").unlink()
    (root / "current").mkdir()
    with pytest.raises(AdminRefused, match=r"current: is not a link"):
        install(root, stored(site, 1))


def test_a_wheel_swapped_in_the_store_after_import_is_refused(site: dict[str, Any]) -> None:
    root: Path = site["root"]
    bundle = stored(site, 1)  # verified here
    wheel_path = bundle.files / "components/vigil-deps/wheels" / f"{DEP}-1.0-py3-none-any.whl"
    wheel_path.write_bytes(wheel(DEP, "1.0", {f"{DEP}.py": "import os; os.system('id')\n"}))
    with pytest.raises(
        TamperedFile, match=f"{DEP}-1.0-py3-none-any.whl: changed in the store since it was imported"
    ):
        install(root, bundle)
    assert listing(root) == [".lock"]


def test_a_failed_install_leaves_the_old_current_and_no_version_directory(
    site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root: Path = site["root"]
    install(root, stored(site, 1))
    kept = [".lock", "9.1.0-bundle1", "current"]

    # 1. a wheel swapped in the staging directory between vigil's hash and pip's install: pip's
    # --require-hashes refuses it
    real = AdminStep._run

    def swap_then_run(self: AdminStep, argv: list[str], env: dict[str, str], what: str) -> str:
        if what == "pip install":
            staged = Path(argv[argv.index("--find-links") + 1]) / f"{DEP}-1.0-py3-none-any.whl"
            staged.write_bytes(wheel(DEP, "1.0", {f"{DEP}.py": "VALUE = 2\n"}))
        return real(self, argv, env, what)

    with monkeypatch.context() as m:
        m.setattr(AdminStep, "_run", swap_then_run)
        with pytest.raises(AdminRefused) as err:
            install(root, stored(site, 2))
    assert str(err.value).startswith(
        f"wheel {DEP}-1.0-py3-none-any.whl: does not match the signed manifest's sha256 as pip installs it"
    ), err.value
    assert os.readlink(root / "current") == "9.1.0-bundle1" and listing(root) == kept

    # 2. bundle 3's vigil needs a dependency the bundle does not carry: pip cannot install it offline
    bundle = import_crafted(site, 3, admin_members("9.3.0", deps=False), edit=set_vigil_version("9.3.0"))
    with pytest.raises(DeployError, match=r"pip install failed \(exit 1\): .*vigil-stub-dep"):
        install(root, bundle)
    assert os.readlink(root / "current") == "9.1.0-bundle1" and listing(root) == kept


@pytest.mark.parametrize("declared", ["../../etc", "9.1/evil", "..", ".hidden"])
def test_a_version_that_could_name_a_path_is_refused(site: dict[str, Any], declared: str) -> None:
    root: Path = site["root"]
    bundle = import_crafted(site, 3, admin_members("9.3.0"), edit=set_vigil_version(declared))
    with pytest.raises(AdminRefused, match="is not a plain version"):
        install(root, bundle)
    assert listing(root) == [".lock"] and listing(site["tmp"]) == sorted(listing(site["tmp"]))
    assert not (site["tmp"] / "etc").exists()


def test_a_bundle_without_vigils_wheel_is_refused_naming_no_admin(site: dict[str, Any]) -> None:
    """As an `upstream` channel bundle is today (bundle/catalog/upstream.yaml ships no vigil wheel)."""
    root: Path = site["root"]
    bundle = import_crafted(site, 3, admin_members("9.3.0")[1:])  # the dependency and the roles only
    with pytest.raises(DeployError) as err:
        install(root, bundle)
    assert str(err.value) == (
        "bundle 3: carries no vigil wheel under components/vigil/wheels/; it cannot install the admin "
        "host (pass --no-admin to upgrade the hosts only)"
    )
    assert listing(root) == [".lock"]


def test_a_wheel_name_that_would_be_an_option_in_pips_requirements_is_refused(site: dict[str, Any]) -> None:
    root: Path = site["root"]
    members = admin_members("9.3.0")
    members[1] = Member(f"components/vigil-deps/wheels/{DEP}-1.0 ;x=1-py3-none-any.whl", dep_wheel())
    bundle = import_crafted(site, 3, members, edit=set_vigil_version("9.3.0"))
    with pytest.raises(
        AdminRefused, match=r"^bundle 3: components/vigil-deps/wheels/.*: not a wheel's file name$"
    ):
        install(root, bundle)
    assert listing(root) == [".lock"]


def test_a_second_install_at_the_same_time_is_refused(site: dict[str, Any]) -> None:
    root: Path = site["root"]
    holder = subprocess.Popen(  # another vigil holding the root's lock, in a process of its own
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from vigil.installer.deploy.admin import AdminStep;"
            f"s = AdminStep(Path({str(root)!r}), holder='upgrade 1'); s.acquire(); print('held', flush=True);"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(
            DeployError, match=rf"admin install root {root}: busy: upgrade 1 \(pid {holder.pid}"
        ):
            install(root, stored(site, 1))
        assert listing(root) == [".lock"]
    finally:
        holder.kill()
        holder.wait()
    step = AdminStep(root)  # the lock went with its holder
    step.acquire()
    step.release()


def test_the_admin_step_is_audited_beside_the_upgrade(site: dict[str, Any]) -> None:
    home, root = site["home"], site["root"]
    inv = ops.Invocation(home=home, argv=["upgrade"], action="upgrade")
    rollout = Rollout(home, site["tmp"] / "inventory", load_root(ops.installed_trust_path(home)), target=2)
    with _admin_step(inv, rollout, "upgrade", root):
        assert rollout.admin is not None
        rollout.admin.prepare(stored(site, 2))
        rollout.admin.switch()
    assert inv.details["admin"]["current"] == "9.2.0-bundle2"  # the upgrade's own record says it too
    bad = import_crafted(site, 3, admin_members("9.3.0"), edit=set_vigil_version("../x"))
    with pytest.raises(AdminRefused), _admin_step(inv, rollout, "upgrade", root):
        assert rollout.admin is not None
        rollout.admin.prepare(bad)
    records = [r for r in AuditLog(home).records(action="upgrade.admin")]
    assert [r["outcome"] for r in records] == ["ok", "refused"]
    ok = records[0]
    assert ok["object"] == str(root) and ok["details"]["current"] == "9.2.0-bundle2"
    assert ok["details"]["switched"] is True and ok["details"]["bundle_version"] == 2
    assert "is not a plain version" in records[1]["reason"]
    cur = read_current(root)
    assert cur is not None and cur.dirname == "9.2.0-bundle2"


def _fake_site(monkeypatch: pytest.MonkeyPatch, site: dict[str, Any], health: list[Any]) -> list[str]:
    """The host side of `vigil upgrade` on one monitoring host, its playbooks answered here (the lab
    runs them for real: tests/lab/test_upgrade.py); ``health`` is what each health check answers in
    turn (None: healthy). Returns the upgrade's command line without --to."""
    from tests.unit.deploy.test_upgrade_plan import MON, _doc
    from vigil.installer.deploy import upgrade as upgrade_mod
    from vigil.installer.deploy.runner import Progress, RunResult
    from vigil.installer.deploy.site import parse_host_status

    status = {"mon01": parse_host_status(_doc("mon01", MON), source="t")}
    monkeypatch.setattr(upgrade_mod, "ping_hosts", lambda **_: {})
    monkeypatch.setattr(upgrade_mod.Rollout, "status", lambda self, inv, bundle, hosts=None: dict(status))
    monkeypatch.setattr(upgrade_mod.Rollout, "_baseline", lambda self, inv, bundle: {"silences": []})
    monkeypatch.setattr(
        upgrade_mod.Rollout, "_health", lambda self, *a, **k: health.pop(0) if health else None
    )

    def play(self: Any, bundle: Any, playbook: str, name: str, **kw: Any) -> RunResult:
        run = self.run_dir / f"{name}-{len(list(self.run_dir.iterdir())):02d}"
        run.mkdir()
        return RunResult(run_id=run.name, run_dir=run, status="successful", rc=0, progress=Progress())

    monkeypatch.setattr(upgrade_mod.Rollout, "_play", play)
    ops_upgrade = importlib.import_module(
        "vigil.installer.ops.upgrade"
    )  # the package's name is the function's
    monkeypatch.setattr(
        ops_upgrade, "site_status", lambda home, inventory, trust, **_: (home / "runs", dict(status))
    )
    inventory = site["tmp"] / "site"
    inventory.mkdir(exist_ok=True)
    (inventory / "hosts.yml").write_text(
        json.dumps(
            {"all": {"children": {"monitoring": {"hosts": {"mon01": {"ansible_host": "198.18.0.10"}}}}}}
        )
    )
    return ["--home", str(site["home"]), "upgrade", "-i", str(inventory)]


def test_vigil_upgrade_installs_the_admin_host_after_the_hosts_and_status_shows_it(
    site: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vigil.installer.cli import main

    root: Path = site["root"]
    health: list[Any] = []
    argv = _fake_site(monkeypatch, site, health)
    monkeypatch.setenv("VIGIL_ADMIN_ROOT", str(root))

    # --no-admin: the hosts only; nothing under the root, and the record says why
    assert main([*argv, "--to", "2", "--no-admin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["admin"] == {} and not root.exists()
    last = audit(site["home"], "upgrade")[-1]
    assert last["action"] == "upgrade" and last["details"]["admin"] == "skipped (--no-admin)"

    # --check: the plan's line, and nothing installed
    assert main([*argv, "--to", "2", "--check"]) == 0
    assert f"  admin host: vigil not installed -> 9.2.0 (bundle 2) under {root}\n" in capsys.readouterr().out
    assert not root.exists()

    assert main([*argv, "--to", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["admin"]["current"] == "9.2.0-bundle2" and out["admin"]["switched"] is True
    assert os.readlink(root / "current") == "9.2.0-bundle2"
    records = audit(site["home"], "upgrade")
    assert [r["action"] for r in records[-2:]] == ["upgrade.admin", "upgrade"]
    assert records[-2]["outcome"] == "ok" and records[-2]["details"]["installed"] == "new"

    # a bundle whose upgrade fails its health check: its vigil was installed beside, not switched to
    import_crafted(site, 3, admin_members("9.3.0"), edit=set_vigil_version("9.3.0"))
    health.append(("mon01", "vmalert", "rule group not loaded"))
    assert main([*argv, "--to", "3"]) == 1
    assert "FAIL: host mon01: vmalert: rule group not loaded" in capsys.readouterr().err
    assert os.readlink(root / "current") == "9.2.0-bundle2"
    assert listing(root) == [".lock", "9.2.0-bundle2", "9.3.0-bundle3", "current"]
    admin_record = audit(site["home"], "upgrade.admin")[-1]
    assert admin_record["outcome"] == "failed" and admin_record["details"]["switched"] is False

    # status: the admin host's line beside the hosts'
    status = [*argv[:2], "status", "-i", argv[4], "--admin-root", str(root)]
    main(status)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(
        f"admin host: vigil 9.2.0 (bundle 2) {root / 'current'} -> 9.2.0-bundle2; this vigil "
    )
    main([*status, "--json"])
    admin = json.loads(capsys.readouterr().out)["admin"]
    assert (
        admin["vigil_version"] == "9.2.0"
        and admin["bundle_version"] == 2
        and admin["running_current"] is False
    )

    # rollback to bundle 1 (the admin host never ran it): installed, and current switched; the
    # version never switched to (bundle 3's) removed, the one before kept
    assert main([*argv[:2], "rollback", *argv[3:], "--to", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["admin"]
    assert out["current"] == "9.1.0-bundle1" and out["removed"] == ["9.3.0-bundle3"], out
    assert os.readlink(root / "current") == "9.1.0-bundle1"
    assert listing(root) == [".lock", "9.1.0-bundle1", "9.2.0-bundle2", "current"]
    assert audit(site["home"], "rollback.admin")[-1]["outcome"] == "ok"


def test_the_real_bundles_wheels_install_offline_and_the_installed_vigil_verifies_it(
    imported_release: Imported, tmp_path: Path, measured: Any
) -> None:
    """The debian bundle the session built (vigil and its dependencies as wheels: ansible-core,
    cryptography, textual, ...), installed by the admin step and then run from `current`."""
    home = imported_release.home
    bundle = open_stored(
        BundleStore(home), load_root(ops.installed_trust_path(home)), imported_release.release.version
    )
    root = tmp_path / "admin"
    t0 = time.monotonic()
    step = install(root, bundle)
    measured(
        "admin host: the debian bundle's vigil installed (new environment, pip, byte code)",
        time.monotonic() - t0,
    )
    assert step.details["installed"] == "new" and step.details["wheels"] > 20, step.details
    vigil = root / "current" / "bin" / "vigil"
    env = {"PATH": "/usr/bin:/bin", "VIGIL_HOME": str(tmp_path / "home"), "VIGIL_AUDIT_SYSLOG": ""}
    release = imported_release.release
    res = subprocess.run(
        [str(vigil), "bundle", "verify", str(release.bundle), "--trust", str(release.trust)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"OK: {release.bundle.name}: version 1, "), res.stdout
    # the installed vigil answers from its own version directory, not from this checkout
    res = subprocess.run(
        [
            str(root / "current" / "bin" / "python"),
            "-I",
            "-c",
            "import vigil.installer; print(vigil.installer.__file__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(res.stdout.strip()).resolve().is_relative_to((root / step.details["target"]).resolve())
