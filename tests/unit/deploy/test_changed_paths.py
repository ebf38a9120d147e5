"""What a deploy (or `deploy --check`) says changed on each host: the task, and the paths its module
reported. The results are shaped as ansible-core 2.19 reports them (taken from a lab deploy's events)."""

from __future__ import annotations

from typing import Any

from vigil.installer.deploy.runner import PATHS_MAX, Progress, changed_paths


def ok(host: str, task: str, res: dict[str, Any], role: str = "") -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "role": role, "res": res}}


UNIT = "/etc/systemd/system/vigil-node-exporter.service"


def test_the_paths_of_a_template_a_link_a_loop_and_a_diff() -> None:
    template = {"changed": True, "dest": UNIT, "diff": [{"before_header": UNIT, "after_header": UNIT}]}
    assert changed_paths(template) == (UNIT,)
    link = {"changed": True, "dest": "/opt/vigil/prometheus-node-exporter/current", "state": "link"}
    assert changed_paths(link) == ("/opt/vigil/prometheus-node-exporter/current",)
    directory = {"changed": True, "path": "/var/lib/vigil", "state": "directory"}
    assert changed_paths(directory) == ("/var/lib/vigil",)
    loop = {
        "changed": True,
        "msg": "All items completed",
        "results": [
            {"changed": True, "dest": "/opt/vigil/a/bin/a", "diff": []},
            {"changed": False, "dest": "/opt/vigil/a/bin/unchanged"},
            {
                "changed": True,
                "diff": [{"before_header": "/etc/a.conf (content)", "after_header": "/etc/a.conf (content)"}],
            },
        ],
    }
    assert changed_paths(loop) == ("/opt/vigil/a/bin/a", "/etc/a.conf")


def test_a_binary_copied_in_check_mode_is_named_by_its_invocation() -> None:
    """A copy over a binary that differs, in check mode, returns no `dest` and a diff without headers;
    the host path is in the arguments it was invoked with (its `src` is the controller's, not named)."""
    src = "/var/lib/vigil/bundles/2/files/components/prometheus-node-exporter/bin/node_exporter"
    dest = "/opt/vigil/prometheus-node-exporter/1.5.0-1+b6/bin/node_exporter"
    args = {"dest": dest, "group": "root", "mode": "0755", "owner": "root", "src": src}
    loop = {
        "changed": True,
        "msg": "All items completed",
        "results": [
            {
                "changed": True,
                "diff": [{"dst_binary": 1, "src_larger": 104448}],
                "invocation": {**args, "module_args": args},
                "item": "bin/node_exporter",
            }
        ],
    }
    assert changed_paths(loop) == (dest,)
    assert changed_paths({"changed": True, "invocation": {"module_args": "not a mapping"}}) == ()


def test_what_is_not_a_path_is_not_named() -> None:
    service = {"changed": True, "name": "vigil-node-exporter", "state": "started", "status": {}}
    assert changed_paths(service) == ()
    command = {"changed": True, "cmd": ["/usr/sbin/augenrules", "--load"], "stdout": "/etc/audit"}
    assert changed_paths(command) == ()
    odd = {"changed": True, "dest": ["/etc/x"], "diff": "not a list", "results": "nor this"}
    assert changed_paths(odd) == ()
    relative = {"changed": True, "dest": "etc/relative", "diff": [{"before_header": "before: /etc/x"}]}
    assert changed_paths(relative) == ()
    # a copy's after_header is its source on the controller, not a path on the host
    copy = {
        "changed": True,
        "diff": [{"before_header": "/etc/x", "after_header": "/var/lib/vigil/bundles/1/x"}],
    }
    assert changed_paths(copy) == ("/etc/x",)


def test_a_loop_over_many_files_says_how_many_more() -> None:
    res = {
        "changed": True,
        "results": [{"changed": True, "dest": f"/etc/f{i}"} for i in range(PATHS_MAX + 5)],
    }
    paths = changed_paths(res)
    assert len(paths) == PATHS_MAX + 1
    assert paths[-1] == "... 5 more"


def test_the_run_keeps_each_change_in_order_and_only_changes() -> None:
    progress = Progress()
    progress.apply(ok("gpu01", "Install the unit", {"changed": True, "dest": UNIT}, role="node_exporter"))
    progress.apply(ok("gpu01", "Start it", {"changed": False, "name": "vigil-node-exporter"}))
    progress.apply(ok("mon01", "Restart vmalert", {"changed": True, "name": "vigil-vmalert"}))
    assert [c.line() for c in progress.changes] == [
        f"gpu01: Install the unit ({UNIT})",
        "mon01: Restart vmalert",
    ]
    assert progress.changes[0].role == "node_exporter"
    assert progress.hosts["gpu01"].changed == 1 and progress.hosts["gpu01"].ok == 2
