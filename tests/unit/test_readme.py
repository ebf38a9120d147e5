"""The README's command table is the CLI's own: every subcommand, with the help line it prints; its list
of system packages is the one scripts/system-deps.sh installs."""

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


SYSTEM_DEPS = README.parent / "scripts" / "system-deps.sh"
DEPS_INTRO = (
    "`scripts/system-deps.sh` takes\nfrom Debian's archive those of these packages that are missing:\n\n"
)


def script_packages() -> set[str]:
    """The Debian packages scripts/system-deps.sh installs: the values of its `[command]=package`
    and `[file]=package` tables."""
    return set(re.findall(r"^\s*\[[^\]]+\]=([a-z0-9][a-z0-9.+-]*)\s*$", SYSTEM_DEPS.read_text(), re.M))


def readme_packages(text: str) -> set[str]:
    """The packages the README's list names: the `names` before the colon of each item."""
    assert DEPS_INTRO in text, "the README no longer introduces the list of system packages"
    items = text.split(DEPS_INTRO, 1)[1].split("\n\n", 1)[0]
    heads = [line.split(": ", 1)[0] for line in items.splitlines() if line.startswith("- ")]
    return {name for head in heads for name in re.findall(r"`([^`]+)`", head)}


def test_readme_lists_exactly_the_system_packages_the_script_installs() -> None:
    assert readme_packages(README.read_text()) == script_packages()


def test_the_check_sees_a_package_missing_from_the_readme() -> None:
    text = README.read_text()
    packages = script_packages()
    assert {"qpdf", "poppler-utils", "nftables", "minisign", "debian-archive-keyring"} <= packages
    for name in ("qpdf", "debian-archive-keyring"):
        assert f"`{name}`" in text
        assert readme_packages(text.replace(f"`{name}`, ", "").replace(f", `{name}`", "")) != packages
