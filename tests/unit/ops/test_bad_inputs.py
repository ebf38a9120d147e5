"""Bad input gets one clear line naming the object and the reason, before anything is done."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from vigil.installer.cli import main
from vigil.installer.deploy import DeployError
from vigil.installer.deploy.inventory import load_inventory


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["--home", str(tmp_path / "home"), *argv])
    return rc, capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["node-down", "gpu01", "0"],
            "FAIL: gpu01/0: node-down stops the node's exporters: give no GPU index",
        ),
        (["thermal", "gpu01"], "FAIL: gpu01: thermal needs a GPU index 0..3"),
        (["thermal", "gpu01", "4"], "FAIL: gpu01/4: no such GPU: give an index 0..3"),
        (["thermal", "mon01", "0"], "FAIL: mon01: faults are injected on GPU nodes only"),
        (["thermal", "gpu09", "0"], "FAIL: gpu09: no such lab host (hosts: mon01, ctl01, gpu01, gpu02)"),
        (
            ["ecc-sbe-storm", "gpu01", "0", "--rate", "-3"],
            "FAIL: --rate -3.0: must be a number of errors per second above 0 (at most 1e6)",
        ),
        (
            ["nvlink-crc", "gpu01", "0", "--rate", "nan"],
            "FAIL: --rate nan: must be a number of errors per second above 0 (at most 1e6)",
        ),
        (
            ["xid", "gpu01", "0", "--rate", "2"],
            "FAIL: --rate 2.0: is for ecc-sbe-storm and nvlink-crc only, not xid",
        ),
        (["thermal", "gpu01", "0", "--code", "79"], "FAIL: --code 79: is for xid only, not thermal"),
        (["xid", "gpu01", "0", "--code", "0"], "FAIL: --code 0: an XID code is 1..999"),
        (["xid", "gpu01", "0", "--clear", "--code", "79"], "FAIL: --code 79: not used with --clear"),
        (
            ["bmc-thermal", "gpu01", "0"],
            "FAIL: gpu01/0: bmc-thermal acts on the node's BMC: give no GPU index",
        ),
        (
            ["bmc-down", "gpu02", "1", "--clear"],
            "FAIL: gpu02/1: bmc-down acts on the node's BMC: give no GPU index",
        ),
        (["bmc-down", "mon01"], "FAIL: mon01: faults are injected on GPU nodes only"),
        (["bmc-thermal", "ctl01"], "FAIL: ctl01: faults are injected on GPU nodes only"),
        (["bmc-thermal", "gpu07"], "FAIL: gpu07: no such lab host (hosts: mon01, ctl01, gpu01, gpu02)"),
        (["bmc-thermal", "gpu01", "--code", "79"], "FAIL: --code 79: is for xid only, not bmc-thermal"),
        (
            ["bmc-down", "gpu01", "--rate", "5"],
            "FAIL: --rate 5.0: is for ecc-sbe-storm and nvlink-crc only, not bmc-down",
        ),
        (["power-off", "gpu01"], "FAIL: gpu01: power-off acts on monitoring hosts only"),
        (["power-off", "ctl01", "--clear"], "FAIL: ctl01: power-off acts on monitoring hosts only"),
        (["power-off", "mon01", "0"], "FAIL: mon01/0: power-off acts on the whole host: give no GPU index"),
        (["power-off", "mon02"], "FAIL: mon02: no such lab host (hosts: mon01, ctl01, gpu01, gpu02)"),
        (["power-off", "mon01", "--code", "79"], "FAIL: --code 79: is for xid only, not power-off"),
        (
            ["ecc-sbe-storm", "gpu01", "3", "--ramp", "0"],
            "FAIL: --ramp 0.0: must be a number of seconds above 0 (at most 86400)",
        ),
        (
            ["ecc-sbe-storm", "gpu01", "3", "--ramp", "inf"],
            "FAIL: --ramp inf: must be a number of seconds above 0 (at most 86400)",
        ),
        (
            ["nvlink-crc", "gpu01", "3", "--ramp", "60"],
            "FAIL: --ramp 60.0: is for ecc-sbe-storm only, not nvlink-crc",
        ),
        (
            ["ecc-sbe-storm", "gpu01", "3", "--clear", "--ramp", "60"],
            "FAIL: --ramp 60.0: not used with --clear",
        ),
        (
            ["thermal", "gpu01", "3", "--kill-job"],
            "FAIL: --kill-job: is for ecc-dbe and xid only, not thermal",
        ),
        (
            ["node-down", "gpu01", "--kill-job"],
            "FAIL: --kill-job: is for ecc-dbe and xid only, not node-down",
        ),
        (["xid", "gpu01", "3", "--clear", "--kill-job"], "FAIL: --kill-job: not used with --clear"),
    ],
)
def test_lab_fault_refuses_what_it_would_not_do_as_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], line: str
) -> None:
    rc, err = run(capsys, tmp_path, "lab", "fault", *argv)
    assert (rc, err) == (1, line)
    # refused on purpose, and recorded so
    (record,) = [json.loads(x) for x in (tmp_path / "home" / "audit" / "log.jsonl").read_text().splitlines()]
    assert (record["action"], record["outcome"]) == ("lab.fault", "refused")


def test_lab_job_names_the_option_it_refuses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, err = run(capsys, tmp_path, "lab", "job", "--account", "", "--gpus", "1", "--seconds", "5")
    assert (rc, err) == (1, "FAIL: --account '': must be 1-64 letters, digits, '_', '.', '-'")
    rc, err = run(capsys, tmp_path, "lab", "job", "--account", "physics", "--gpus", "9", "--seconds", "5")
    assert (rc, err) == (1, "FAIL: --gpus 9: must be 1..4 (GPUs per lab node)")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not a vigil bundle: the file is empty"),
        (b"<html>404 Not Found</html>\n", "not a vigil bundle: not a tar archive"),
        (bytes(range(256)) * 8, "not a vigil bundle: not a tar archive"),
    ],
)
def test_a_file_that_is_not_a_bundle_is_called_that(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, reason: str
) -> None:
    f = tmp_path / "vigil-9-amd64.bundle"
    f.write_bytes(content)
    for command in (["bundle", "inspect", str(f)], ["bundle", "verify", str(f), "--trust", str(f)]):
        rc, err = run(capsys, tmp_path, *command)
        assert rc == 1
        assert err == f"FAIL: {f.name}: {reason}" or err.startswith(
            f"FAIL: {f}"
        )  # verify reads the trust first


def test_a_split_part_given_as_a_bundle_points_at_join(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = tmp_path / "vigil-9-amd64.bundle.part002"
    f.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(600))  # the middle of a zstd payload
    rc, err = run(capsys, tmp_path, "bundle", "inspect", str(f))
    assert (rc, err) == (
        1,
        f"FAIL: {f.name}: not a vigil bundle: not a tar archive "
        "(a part of a split bundle? run `vigil bundle join` on its .parts.json)",
    )


INVENTORY = """\
all:
  children:
    monitoring:
      hosts:
        mon01: {ansible_host: 198.18.0.10}
    gpu_nodes:
      hosts:
        gpu01: {ansible_host: 198.18.0.21}
        gpu02: {ansible_host: 198.18.0.22}
"""


def test_a_limit_that_matches_no_host_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    assert load_inventory(tmp_path, limit="gpu_nodes").selected == ["gpu01", "gpu02"]
    assert load_inventory(tmp_path, limit="gpu0*:!gpu02").selected == ["gpu01"]
    assert load_inventory(tmp_path).selected == ["gpu01", "gpu02", "mon01"]
    with pytest.raises(DeployError) as info:
        load_inventory(tmp_path, limit="nosuchhost")
    assert (
        str(info.value) == f"--limit nosuchhost: matches no host of {tmp_path} (hosts: gpu01, gpu02, mon01)"
    )


def test_broken_yaml_is_one_line_naming_file_line_and_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hosts.yml").write_text(INVENTORY.replace("{ansible_host: 198.18.0.21}", "{ansible_host: 1"))
    with pytest.raises(DeployError) as info:
        load_inventory(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'hosts.yml'}: not valid YAML: expected ',' or '}}', but got ':' (line 9, column 14)"
    )
    assert capfd.readouterr().err == ""  # no Ansible plugin warnings before it
    # Ansible's own tags are not YAML errors
    (tmp_path / "hosts.yml").write_text(
        INVENTORY
        + textwrap.dedent("""\
          vars:
            secret: !vault |
              $ANSIBLE_VAULT;1.1;AES256
              6162
        """)
    )
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("note: !unsafe '{{ not templated }}'\n")
    from vigil.installer.deploy.inventory import check_files

    check_files(tmp_path)
    (tmp_path / "group_vars" / "all.yml").write_text("a: [1\n")
    with pytest.raises(DeployError, match=r"group_vars/all.yml: not valid YAML: "):
        check_files(tmp_path)
