"""The CLI is a thin front end: shared options defined once, every handler over the operations layer."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from vigil.installer.cli import build_parser

CLI = Path(__file__).resolve().parents[3] / "installer" / "cli"

#: subcommands whose output is data; each must take --json
JSON = {
    "backup status",
    "keys generate",
    "keys show",
    "trust show",
    "bundle build",
    "bundle verify",
    "bundle inspect",
    "bundle import",
    "deploy",
    "upgrade",
    "rollback",
    "status",
    "lab up",
    "lab down",
    "lab status",
    "lab job",
    "lab fault",
    "audit show",
    "inventory check",
    "pki issue",
    "pki status",
    "explain job",
    "explain gpu",
    "plan",
}
#: subcommands that verify against a trust root; each must take --trust
TRUST = {
    "bundle verify",
    "bundle import",
    "bundle join",
    "deploy",
    "upgrade",
    "rollback",
    "status",
    "inventory check",
    "inventory edit",
}


def leaves(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix.strip(): parser}
    for name, child in subs[0].choices.items():
        found.update(leaves(child, f"{prefix} {name}"))
    return found


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_data_commands_take_json_and_verifying_commands_take_trust() -> None:
    commands = leaves(build_parser())
    assert {c for c, p in commands.items() if "--json" in options(p)} == JSON
    assert {c for c, p in commands.items() if "--trust" in options(p)} == TRUST


def test_shared_options_are_defined_once() -> None:
    """--json, --trust and the signing options come from the parent parsers in _common.py (audit show's
    --json is one of three exclusive formats there, so it is its own)."""
    defined: dict[str, list[str]] = {}
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and arg.value in (
                        "--json",
                        "--trust",
                        "--passphrase-file",
                    ):
                        defined.setdefault(arg.value, []).append(path.name)
    assert defined == {
        "--json": ["_common.py", "audit.py"],
        "--trust": ["_common.py"],
        "--passphrase-file": ["_common.py", "keys.py", "trust.py"],
    }


def test_handlers_do_not_reach_below_the_operations_layer() -> None:
    """The CLI modules render; the work is in vigil.installer.ops. They may import the bundle package only
    for reading a passphrase file, the deploy package only for the run handle's type."""
    allowed = {
        "vigil.installer",
        "vigil.installer.ops",
        "vigil.installer.cli",
        "vigil.basics.errors",
        "vigil.basics.printable",  # rendering: outside text printed with its escapes visible
        "vigil.bundle.signing",
        "vigil.installer.deploy",
        "vigil.installer.audit.errors",
        "vigil.bundle.store",
    }
    # the demo is a script of real vigil commands; to clean up after its fault it cancels its lab job
    extra = {
        "demo.py": {"vigil.installer.lab", "vigil.installer.lab.jobs", "vigil.installer.lab.hosts"},
        # the lab's --help names its hosts from the one place they are defined
        "lab.py": {"vigil.installer.lab.hosts"},
        # `vigil tui` starts the other front end (the CLI sits above it in the layers contract)
        "tui.py": {"vigil.tui"},
    }
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vigil."):
                module = node.module
                assert module in allowed | extra.get(path.name, set()) or module.startswith(
                    "vigil.installer.cli."
                ), f"{path.name}: {module}"
