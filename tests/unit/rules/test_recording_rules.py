"""The recording rules on known inputs (promtool test rules files under recording/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.rules import rulekit

#: the rule files the recording tests load
RULE_FILES = ("vigil-gpu.yml", "vigil-accounting.yml")


@pytest.mark.parametrize(
    "test_file", sorted((rulekit.HERE / "recording").glob("*.yml")), ids=lambda p: p.name
)
def test_recording_rules(test_file: Path, tmp_path: Path) -> None:
    files = rulekit.deploy(tmp_path / "rules")
    doc = test_file.read_text()
    out = tmp_path / test_file.name
    out.write_text(
        f"rule_files: [{', '.join(str(p) for p in files if p.name in RULE_FILES)}]\n"
        "evaluation_interval: 1m\n" + doc
    )
    res = rulekit.promtool("test", "rules", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
