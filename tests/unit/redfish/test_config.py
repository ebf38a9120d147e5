"""The targets file (the issue's YAML shape, or JSON) and the credentials files: refused in one line."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vigil.exporters.redfish.__main__ import main
from vigil.exporters.redfish.config import ConfigError, load_config, read_credentials

ISSUE_YAML = """\
targets:
  - name: node01                      # becomes the target="node01" label
    url: https://bmc-node01.example   # base URL; the service root is <url>/redfish/v1
    credentials_file: {cred}   # one line "user:password"; refuse it unless mode is 0600/0400
    ca_file: {ca}                 # TLS verified against it; default: the system store
    insecure: false                   # true allows plain http or unverified TLS (lab only); logged
"""


@pytest.fixture
def files(tmp_path):
    cred = tmp_path / "node01.cred"
    cred.write_text("admin:pa:ss#word\n")
    cred.chmod(0o600)
    ca = tmp_path / "bmc-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    return tmp_path, str(cred), str(ca)


def test_the_issue_yaml_is_accepted(files):
    d, cred, ca = files
    (d / "r.yml").write_text(ISSUE_YAML.format(cred=cred, ca=ca))
    (t,) = load_config(str(d / "r.yml"))
    assert (t.name, t.url, t.origin, t.ca_file, t.insecure, t.auth) == (
        "node01",
        "https://bmc-node01.example",
        ("https", "bmc-node01.example", 443),
        ca,
        False,
        "session",
    )
    assert t.credentials is not None and t.credentials.password == "pa:ss#word"
    assert "pa:ss" not in repr(t) and "pa:ss" not in repr(t.credentials)


def test_json_and_quoted_strings(files):
    d, cred, _ = files
    (d / "r.json").write_text(
        '{"targets": [{"name": "n1", "url": "http://10.0.0.1:8000", "insecure": true}]}'
    )
    assert load_config(str(d / "r.json"))[0].origin == ("http", "10.0.0.1", 8000)
    (d / "q.yml").write_text(f"targets:\n- name: 'n 1'\n  url: \"https://h\"\n  credentials_file: '{cred}'\n")
    with pytest.raises(ConfigError, match=r"q.yml:2: `name`"):
        load_config(str(d / "q.yml"))


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("targets:\n  - name: a\n\turl: x\n", 3, "tab"),
        ("targets:\n  - name: a\n    url: https://h\n    colour: red\n", 2, "unknown key 'colour'"),
        ("targets:\n  - name: a\n    name: b\n", 3, "duplicate key 'name'"),
        ("targets:\n  - {name: a}\n", 2, "flow collections"),
        ("targets:\n  - name: &x a\n", 2, "anchors"),
        ("targets:\n  - name: a\n    url: http://h\n", 2, "plain http needs `insecure: true`"),
        ("targets:\n  - name: a\n    url: https://h\n    insecure: yes\n", 2, "true or false"),
        ("targets:\n  - name: a\n    url: https://h/redfish/v1\n", 2, "no path"),
        ("targets:\n  - name: a\n    url: https://u:p@h\n", 2, "no path, query or user info"),
        (
            "targets:\n  - name: a\n    url: https://h\n  - name: a\n    url: https://g\n",
            4,
            "duplicate target name",
        ),
        ("nodes:\n  - name: a\n", 1, "expected `targets:`"),
        ("targets:\n  - name: a\n      url: https://h\n", 3, "unexpected indentation"),
        ("targets:\n  - name: 'a\n", 2, "unterminated"),
        ("targets:\n  - name: a\n    url: https://h\n    timeout: 0\n", 2, "timeout"),
        ("targets:\n  - name: a\n    url: |\n", 3, "block scalars"),
    ],
)
def test_config_errors_are_one_line_with_file_and_line(tmp_path, text, line, reason):
    path = tmp_path / "r.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(str(path))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:{line}: "), msg
    assert reason in msg


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o700, 0o660])
def test_credentials_refused_unless_0600_or_0400(tmp_path, mode):
    cred = tmp_path / "c"
    cred.write_text("u:p\n")
    cred.chmod(mode)
    with pytest.raises(ConfigError, match=rf"^{cred}: mode {mode:04o}, must be 0600 or 0400"):
        read_credentials(str(cred))


def test_credentials_0400_accepted_and_shapes_checked(tmp_path):
    cred = tmp_path / "c"
    cred.write_text("u:p\n")
    cred.chmod(0o400)
    assert read_credentials(str(cred)).user == "u"
    for bad, why in (
        ("nocolon\n", "user:password"),
        ("u:p\nv:q\n", "found 2"),
        (":p\n", "user:password"),
        ("", "found 0"),
    ):
        cred.chmod(0o600)
        cred.write_text(bad)
        with pytest.raises(ConfigError, match=why):
            read_credentials(str(cred))


def test_credentials_symlink_refused_even_to_a_good_file(tmp_path):
    real = tmp_path / "real"
    real.write_text("u:p\n")
    real.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="symbolic link"):
        read_credentials(str(link))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_credentials_owned_by_someone_else_refused(tmp_path):
    cred = tmp_path / "c"
    cred.write_text("u:p\n")
    cred.chmod(0o600)
    os.chown(cred, 4242, 4242)
    with pytest.raises(ConfigError, match="owned by uid 4242"):
        read_credentials(str(cred))


def test_credentials_not_a_file_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a regular file"):
        read_credentials(str(tmp_path))


def test_cli_prints_one_fail_line(tmp_path):
    cred = tmp_path / "c"
    cred.write_text("u:p\n")
    cred.chmod(0o644)
    cfg = tmp_path / "r.yml"
    cfg.write_text(f"targets:\n  - name: a\n    url: https://h\n    credentials_file: {cred}\n")
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "vigil.exporters.redfish",
            "--config",
            str(cfg),
            "--listen-address",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cp.returncode == 2
    assert cp.stderr.strip() == f"FAIL: {cred}: mode 0644, must be 0600 or 0400 (chmod 600 {cred})"
    cred.chmod(0o600)
    cp = subprocess.run(
        [sys.executable, "-m", "vigil.exporters.redfish", "--config", str(cfg), "--check-config"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cp.returncode == 0 and cp.stdout.strip() == f"OK: {cfg}: 1 targets", cp.stderr


def test_shipped_mockups_carry_the_licence_and_match_the_dmtf_originals():
    from importlib import resources
    from pathlib import Path

    root = Path(str(resources.files("vigil.exporters.redfish.bmcsim").joinpath("mockups")))
    assert "BSD 3-Clause" in (root / "LICENSE.md").read_text()
    shared = Path("/work/shared/redfish-mockups")
    if not shared.is_dir():
        pytest.skip("the DMTF originals are not on this machine")
    copies = list(root.rglob("index.json"))
    assert len(copies) > 200
    for f in copies:
        assert f.read_bytes() == (shared / f.relative_to(root)).read_bytes(), f


# -- issue 34 (Low): hostile files fail in one line, at once ----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"targets": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"targets": [{"name": ' + "[" * 500 + "]" * 500 + ', "url": "https://h"}]}',
    ],
    ids=["recursion-bomb", "deep-value"],
)
def test_deeply_nested_json_config_fails_in_one_line(tmp_path, capsys, text):
    """It gave a RecursionError's traceback."""
    cfg = tmp_path / "r.json"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(str(cfg))
    assert str(e.value) == f"{cfg}: JSON nested deeper than 8"
    assert main(["--config", str(cfg), "--check-config"]) == 2
    assert capsys.readouterr().err == f"FAIL: {cfg}: JSON nested deeper than 8\n"


def _load_within(path: Path, seconds: float) -> BaseException | None:
    """What load_config(PATH) raises, failing the test if it is still waiting after SECONDS."""
    raised: list[BaseException] = []

    def load() -> None:
        try:
            load_config(str(path))
        except BaseException as e:
            raised.append(e)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(seconds)
    stuck = t.is_alive()
    for fifo in path.parent.glob("*.fifo"):  # let a thread stuck opening a FIFO go (a failed run)
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert not stuck, f"load_config({path}) waits on a FIFO"
    return raised[0] if raised else None


def test_a_fifo_as_credentials_file_or_config_is_refused_at_once(tmp_path):
    """Opening a FIFO waits for a writer: the exporter's start hung."""
    fifo = tmp_path / "bmc.fifo"
    os.mkfifo(fifo, 0o600)
    cfg = tmp_path / "r.yml"
    cfg.write_text(f"targets:\n  - name: a\n    url: https://h\n    credentials_file: {fifo}\n")
    e = _load_within(cfg, 2)
    assert isinstance(e, ConfigError) and str(e) == f"{fifo}: not a regular file", e
    config_fifo = tmp_path / "config.fifo"
    os.mkfifo(config_fifo, 0o600)
    e = _load_within(config_fifo, 2)
    assert isinstance(e, ConfigError) and str(e) == f"{config_fifo}: not a regular file", e
