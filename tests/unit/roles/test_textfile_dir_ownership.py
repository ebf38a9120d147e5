"""The textfile dir the root prolog writes into, and the dir above it: root's, no one else may write.

Issue 11, finding 1: it was root:vigil-textfile 2775 inside a dir the node_exporter user owned, so a
member of the group (or that user) could plant links the root prolog followed, or swap the dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _data_dirs() -> dict[str, dict[str, str]]:
    """node_exporter's _common_data_dirs, each path with the role defaults filled in."""
    defaults = _load(ROLES / "node_exporter" / "defaults" / "main.yml")
    tasks = _load(ROLES / "node_exporter" / "tasks" / "install.yml")
    (install,) = [t for t in tasks if t.get("ansible.builtin.import_role", {}).get("name") == "_common"]
    dirs = {}
    for item in install["vars"]["_common_data_dirs"]:
        path = item["path"]
        for name, value in defaults.items():
            path = path.replace("{{ " + name + " }}", str(value))
        dirs[path] = item
    return dirs


def test_textfile_dir_and_the_dir_above_it_are_root_only() -> None:
    defaults = _load(ROLES / "node_exporter" / "defaults" / "main.yml")
    textfile, data = defaults["node_exporter_textfile_dir"], defaults["node_exporter_data_dir"]
    assert str(Path(textfile).parent) == data  # the dir above it is the data dir, made by the same task
    dirs = _data_dirs()
    for path in (textfile, data):
        item = dirs[path]
        assert (item.get("owner"), item.get("group")) == ("root", "root"), path
        mode = int(item["mode"], 8)
        # no group or other write, no setgid
        assert mode == 0o755 and not mode & 0o7022, f"{path}: {item['mode']}"


def test_no_role_gives_a_group_write_access_to_the_textfile_dir() -> None:
    defaults = _load(ROLES / "node_exporter" / "defaults" / "main.yml")
    spec = _load(ROLES / "node_exporter" / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert "node_exporter_textfile_group" not in defaults and "node_exporter_textfile_group" not in spec
    for path in ROLES.rglob("*.yml"):
        text = path.read_text()
        assert "vigil-textfile" not in text and "textfile_group" not in text, path


def test_slurm_jobmap_dir_is_root_only_at_boot() -> None:
    defaults = _load(ROLES / "slurm_jobmap" / "defaults" / "main.yml")
    tmpfiles = (ROLES / "slurm_jobmap" / "templates" / "tmpfiles.conf.j2").read_text()
    assert "d {{ slurm_jobmap_dir }} 0755 root root -" in tmpfiles.splitlines()
    assert (
        defaults["slurm_jobmap_textfile_dir"]
        == _load(ROLES / "node_exporter" / "defaults" / "main.yml")["node_exporter_textfile_dir"]
    )
