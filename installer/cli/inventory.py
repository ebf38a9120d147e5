"""``vigil inventory check``: an inventory checked as ``vigil deploy`` checks it, before any host is
contacted."""

from __future__ import annotations

import argparse
from pathlib import Path

from vigil.installer import ops
from vigil.installer.cli._common import json_option, trust_option
from vigil.installer.cli._output import emit_json, ok, say
from vigil.installer.deploy import DeployError as ops_error


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "inventory",
        help="check an inventory before a deploy",
        description="Inventories: `check` reads one as a deploy would, offline.",
    )
    isub = p.add_subparsers(dest="inventory_command", metavar="SUBCOMMAND", parser_class=type(p))
    isub.required = True
    c = isub.add_parser(
        "check",
        parents=[trust_option(), json_option()],
        help="check an inventory as deploy does, offline",
        description="Check an inventory as `vigil deploy` does before it contacts a host: the groups vigil "
        "knows, every host placed, the required variables, the limit; then each host's variables against "
        "the argument spec of every role the site playbook gives it, from the imported bundle (default: the "
        "highest; --bundle N) or --ansible-dir. Contacts no host and changes nothing. Exit 1 when a variable "
        "is refused, naming the role, the variable and the hosts.",
    )
    c.add_argument("--inventory", "-i", type=Path, required=True, help="inventory directory or file")
    c.add_argument("--limit", help="only these hosts/groups (Ansible pattern)")
    c.add_argument("--bundle", type=int, metavar="N", help="imported bundle version (default: the highest)")
    c.add_argument("--ansible-dir", type=Path, help="check against this Ansible tree instead of the bundle's")
    c.set_defaults(func=_check, action="inventory.check")

    e = isub.add_parser(
        "edit",
        parents=[trust_option()],
        help="replace the variables every host shares, checked first",
        description="Replace the inventory directory's group_vars/all.yml (the variables every host shares) "
        "with FILE, only if the whole inventory still passes `vigil inventory check` with it (tried on a "
        "private copy first). Written staged, then renamed; a link in its place, a file changed since "
        "--expect-sha256, YAML that is not a mapping of variable names, or a variable a role refuses: "
        "nothing is written.",
    )
    e.add_argument("--inventory", "-i", type=Path, required=True, help="inventory directory")
    e.add_argument("--vars", type=Path, required=True, metavar="FILE", help="the new group_vars/all.yml")
    e.add_argument("--expect-sha256", metavar="HEX", help="refuse if the file on disk is not this one")
    e.add_argument("--bundle", type=int, metavar="N", help="imported bundle version (default: the highest)")
    e.add_argument("--ansible-dir", type=Path, help="check against this Ansible tree instead of the bundle's")
    e.set_defaults(func=_edit, action="inventory.edit")


def _check(args: argparse.Namespace, inv: ops.Invocation) -> int:
    result = ops.check_inventory(
        inv,
        inventory=args.inventory,
        limit=args.limit,
        trust=args.trust,
        bundle_version=args.bundle,
        ansible_dir=args.ansible_dir,
    )
    specs = result.specs
    if args.json:
        emit_json(
            {
                "inventory": str(result.inventory.path),
                "groups": result.inventory.groups,
                "selected": result.inventory.selected,
                "bundle_version": result.bundle_version,
                "specs_checked": specs is not None,
                "checked": specs.checked if specs else 0,
                "findings": [vars(f) for f in specs.findings] if specs else [],
                "deferred": [d._asdict() for d in specs.deferred] if specs else [],
            }
        )
    else:
        say(*result.lines())  # messages quoting the inventory's and hosts' values: escapes shown
    ops.inventory_failure(result, args.inventory)
    if not args.json:
        ok(str(args.inventory), f"{len(result.inventory.selected)} hosts checked; nothing contacted")
    return 0


def _edit(args: argparse.Namespace, inv: ops.Invocation) -> int:
    try:
        text = args.vars.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ops_error(str(args.vars), f"cannot read: {exc}") from None
    result = ops.edit_shared_vars(
        inv,
        inventory=args.inventory,
        text=text,
        expected_sha256=args.expect_sha256,
        trust=args.trust,
        bundle_version=args.bundle,
        ansible_dir=args.ansible_dir,
    )
    say(*(f"  {line}" for line in (result.specs.deferred_lines() if result.specs else [])))
    ok(inv.object, f"written (sha256 {inv.details['sha256_after']}); {result.summary()}")
    return 0
