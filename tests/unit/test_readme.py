"""The README's command table is the CLI's own: every subcommand, with the help line it prints."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from vigil.installer.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def cli_commands() -> dict[str, str]:
    found: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for choice in subs[0]._choices_actions:
            child = subs[0].choices[choice.dest]
            if any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                walk(child, f"{prefix} {choice.dest}")
            else:
                found[f"{prefix} {choice.dest}"] = choice.help or ""

    walk(build_parser(), "vigil")
    return found


def readme_commands() -> dict[str, str]:
    section = README.read_text().split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return {m[1]: m[2] for m in re.finditer(r"^\| `(vigil[^`]*)` \| (.*?) \|$", section, re.M)}


def test_readme_lists_every_command_with_its_help_line() -> None:
    assert readme_commands() == cli_commands()


def test_the_check_sees_a_missing_or_stale_row() -> None:
    table = readme_commands()
    assert len(table) > 20
    commands = cli_commands()
    assert {k: v for k, v in table.items() if k != "vigil deploy"} != commands
    assert {**table, "vigil deploy": "something else"} != commands
