"""Options many subcommands share, as argparse parent parsers (one definition each)."""

from __future__ import annotations

import argparse
from pathlib import Path


def json_option(what: str = "result") -> argparse.ArgumentParser:
    """``--json``: print the command's data as JSON instead of text."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", help=f"print the {what} as JSON")
    return p


def trust_option() -> argparse.ArgumentParser:
    """``--trust``: verify against this trust root instead of the installed one."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--trust", type=Path, help="trust root file (default: the installed one)")
    return p


def signing_options(key_help: str = "signing key (repeat for k-of-n)") -> argparse.ArgumentParser:
    """``--key`` (repeatable) and ``--passphrase-file``: the keys an output is signed with."""
    p = argparse.ArgumentParser(add_help=False, parents=[passphrase_option()])
    p.add_argument("--key", action="append", required=True, type=Path, help=key_help)
    return p


def passphrase_option(what: str = "passphrase for the keys") -> argparse.ArgumentParser:
    """``--passphrase-file``: the first line of the file is a key's passphrase."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--passphrase-file", type=Path, help=what)
    return p
