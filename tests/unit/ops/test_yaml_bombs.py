"""YAML alias bombs ("billion laughs") handed to the real CLI where it reads an operator's YAML: an
inventory's group_vars (`inventory check`, `inventory edit`), a site file (`report energy --site`)
and an allocations file (`report usage --allocations`). Each once ran for minutes and grew past
hundreds of MB (the inventory) or 4 GB (the reports, in repr() of the loaded value). Each must now end
in seconds, within 1 GiB of address space, with one line naming the file and the reason."""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from pathlib import Path

from tests.helpers.cli import REPO, VIGIL, vigil_env

EXAMPLE = REPO / "inventories" / "example"
#: the address space the command gets: far above what it needs (~500 MB with Ansible loaded), far
#: below what a bomb takes
LIMIT = 1 << 30
#: a bounded refusal takes 2 s or so here (most of it Python and Ansible starting)
SECONDS = 20
REFUSED = "its aliases (YAML anchors and *references) expand it by more than 10000 values; refused"


def bomb(levels: int = 9) -> str:
    """Nine anchors, each a list of nine aliases of the one before, the last given to a role's list
    option (the check templates it): 9**9 values if walked."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nnode_exporter_collectors_enabled: *l{levels - 1}\n"


def nested_bomb(levels: int = 9) -> str:
    """The same as one flow list, to be the value of a key a file must have (the reports refuse an
    unknown key before they look at a value): its last item holds 9**(LEVELS-1) values."""
    items = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    items += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def vigil_bounded(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`vigil ARGS` in 1 GiB of address space, killed after SECONDS; and how long it took."""
    start = time.monotonic()
    res = subprocess.run(
        [*VIGIL, *args],
        capture_output=True,
        text=True,
        env=vigil_env(home),
        cwd=REPO,
        timeout=SECONDS,
        preexec_fn=_limit,  # only setrlimit, before exec
        check=False,
    )
    return res, time.monotonic() - start


def one_fail_line(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr, res.stderr[-2000:]
    (fail,) = [ln for ln in res.stderr.splitlines() if ln.startswith("FAIL: ")]
    return fail


def test_a_bomb_in_group_vars_is_refused_by_inventory_check(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    target = inv / "group_vars" / "gpu_nodes.yml"
    target.write_text(bomb())
    assert target.stat().st_size < 1500
    res, took = vigil_bounded(
        tmp_path / "home", "inventory", "check", "-i", str(inv), "--ansible-dir", str(REPO)
    )
    assert one_fail_line(res) == f"FAIL: {target}: {REFUSED}"
    assert took < SECONDS


def test_a_bomb_given_to_inventory_edit_is_refused_and_nothing_written(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(EXAMPLE, inv)
    all_yml = inv / "group_vars" / "all.yml"
    original = all_yml.read_bytes()
    new = tmp_path / "new.yml"
    new.write_text(bomb())
    res, _ = vigil_bounded(
        tmp_path / "home", "inventory", "edit", "-i", str(inv), "--vars", str(new), "--ansible-dir", str(REPO)
    )
    assert one_fail_line(res) == f"FAIL: {all_yml}: {REFUSED}; nothing was written"
    assert all_yml.read_bytes() == original


def test_a_bomb_in_the_site_file_is_refused_by_report_energy(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(f"installed_it_power_kw: {nested_bomb()}\n")  # a number is wanted: it is shown
    assert site.stat().st_size < 500
    res, took = vigil_bounded(tmp_path / "home", "report", "energy", "--year", "2025", "--site", str(site))
    assert one_fail_line(res) == f"FAIL: {site}: {REFUSED}"
    assert took < SECONDS


def test_a_bomb_in_the_allocations_file_is_refused_by_report_usage(tmp_path: Path) -> None:
    alloc = tmp_path / "alloc.yaml"
    alloc.write_text(f"accounts:\n  physics: {nested_bomb()}\n")  # GPU-hours are wanted: it is shown
    res, took = vigil_bounded(
        tmp_path / "home", "report", "usage", "--period", "2025-10", "--allocations", str(alloc)
    )
    assert one_fail_line(res) == f"FAIL: {alloc}: {REFUSED}"
    assert took < SECONDS


def test_a_bomb_in_the_billing_file_is_refused_by_report_usage(tmp_path: Path) -> None:
    billing = tmp_path / "billing.yaml"
    billing.write_text(f"partitions:\n  gpu: {nested_bomb()}\n")  # a weight is wanted: it is shown
    res, took = vigil_bounded(
        tmp_path / "home", "report", "usage", "--period", "2025-10", "--billing", str(billing)
    )
    assert one_fail_line(res) == f"FAIL: {billing}: {REFUSED}"
    assert took < SECONDS
