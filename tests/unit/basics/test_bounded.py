"""The bounded YAML and JSON readers, attacked: alias bombs, recursive anchors, deep nesting, huge and
blocking files, and values too big to print."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from vigil.basics.bounded import (
    MAX_ALIAS_NODES,
    InputRefused,
    load_json,
    load_json_file,
    load_yaml,
    load_yaml_file,
    read_bounded,
    shown,
)


def laughs(levels: int = 9, width: int = 9) -> str:
    """The billion laughs in YAML: each anchor a list of WIDTH aliases of the one before."""
    names = [f"l{i}" for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    lines += [f"{n}: &{n} [{', '.join([f'*{p}'] * width)}]" for p, n in zip(names, names[1:], strict=False)]
    return "\n".join(lines) + "\n"


def test_the_billion_laughs_is_refused_before_anything_is_built_from_it() -> None:
    text = laughs()
    assert len(text) < 1500
    start = time.monotonic()
    with pytest.raises(InputRefused) as exc:
        load_yaml(text, "group_vars/all.yml")
    assert time.monotonic() - start < 1
    assert str(exc.value) == (
        "group_vars/all.yml: its aliases (YAML anchors and *references) expand it by more than "
        f"{MAX_ALIAS_NODES} values; refused"
    )
    assert exc.value.outcome == "refused"


def test_a_bomb_through_merge_keys_is_refused() -> None:
    text = "a0: &a0 {k: v}\n" + "".join(
        f"a{i}: &a{i} {{<<: [*a{i - 1}], k{i}: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, 40)
    )
    with pytest.raises(InputRefused, match="expand it by more than"):
        load_yaml(text, "x.yml")


def test_ordinary_anchors_and_merge_keys_are_read_as_yaml_reads_them() -> None:
    text = "base: &b {port: 1}\nmon: {<<: *b, host: m}\nboth: [*b, *b]\n"
    assert load_yaml(text, "x.yml") == yaml.safe_load(text)
    # aliases that add up to the budget, not past it
    assert load_yaml(laughs(levels=4, width=9), "x.yml")["l3"][0][0][0] == ["lol"] * 9


def test_a_recursive_anchor_is_refused() -> None:
    with pytest.raises(InputRefused, match="an alias refers to the node that holds it"):
        load_yaml("a: &a [1, *a]\n", "x.yml")


@pytest.mark.parametrize("levels", [65, 3000], ids=["past-the-limit", "past-python-recursion"])
def test_deep_nesting_is_refused_in_one_line(levels: int) -> None:
    with pytest.raises(InputRefused, match="nested deeper than 64 levels"):
        load_yaml("[" * levels + "]" * levels, "x.yml")


def test_a_value_python_cannot_build_is_refused_not_a_traceback() -> None:
    with pytest.raises(InputRefused, match="a value vigil cannot read"):
        load_yaml("n: " + "9" * 5000 + "\n", "x.yml")


def test_syntax_errors_stay_the_parsers_own() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: [unclosed\n", "x.yml")


def test_files_over_the_cap_links_and_fifos(tmp_path: Path) -> None:
    big = tmp_path / "big.yml"
    big.write_bytes(b"#" * 101)
    with pytest.raises(InputRefused, match="larger than 100 bytes"):
        read_bounded(big, max_bytes=100)
    assert read_bounded(big, max_bytes=101) == b"#" * 101
    link = tmp_path / "link.yml"
    link.symlink_to(big)
    assert load_yaml_file(link) is None  # a link to a file is read (only comments in it)
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)
    with pytest.raises(InputRefused, match="not a regular file"):
        load_yaml_file(fifo)  # refused, not a read that waits for a writer
    with pytest.raises(InputRefused, match="cannot read"):
        load_yaml_file(tmp_path / "missing.yml")


def test_json_depth_and_size(tmp_path: Path) -> None:
    assert load_json(b'{"a": [1, {"b": 2}]}', "x.json") == {"a": [1, {"b": 2}]}
    for depth in (65, 100_000):
        with pytest.raises(InputRefused, match="nested deeper than 64 levels"):
            load_json("[" * depth + "]" * depth, "x.json")
    with pytest.raises(ValueError):
        load_json("{", "x.json")
    f = tmp_path / "x.json"
    f.write_text("[" + "1," * 600_000 + "1]")
    with pytest.raises(InputRefused, match="larger than 1048576 bytes"):
        load_json_file(f)


def test_shown_is_bounded_whatever_the_value() -> None:
    bomb = yaml.safe_load(laughs())  # the plain loader shares the aliases: 9**9 values if walked
    start = time.monotonic()
    text = shown(bomb)
    assert time.monotonic() - start < 0.1 and len(text) <= 60
    assert shown("x" * 10_000, 20) == "'xxxxxxxxxxxxxxxx..."
    assert len(shown(10**5000)) <= 60 and shown("short") == "'short'"
