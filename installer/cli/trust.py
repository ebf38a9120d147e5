"""``vigil trust``: the trust root (which keys may sign bundles, and how many must)."""

from __future__ import annotations

import argparse
from pathlib import Path

from vigil.bundle.signing import load_signing_key, read_passphrase
from vigil.installer import ops
from vigil.installer.cli._common import json_option
from vigil.installer.cli._output import emit_json, ok


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "trust",
        help="manage the trust root",
        description="A trust root lists the public keys allowed to sign bundles and how many of them "
        "(the threshold) must sign each one. A new root replaces the current one only when a threshold "
        "of the current keys signed it and its version is higher (key rotation).",
    )
    ts = p.add_subparsers(dest="trust_command", metavar="ACTION")
    ts.required = True

    i = ts.add_parser("init", help="write a new trust root", description="Write a trust root file.")
    i.add_argument(
        "--key", action="append", required=True, type=Path, metavar="PUB", help="a public key (repeat)"
    )
    i.add_argument("--threshold", type=int, required=True, metavar="K", help="signatures needed per bundle")
    i.add_argument("--version", type=int, default=1, help="root version (default 1; rotations count up)")
    i.add_argument("--out", type=Path, required=True, metavar="TRUST")
    i.set_defaults(func=_init, action="trust.init")

    s = ts.add_parser(
        "sign",
        help="add a key's signature to a trust root (for a rotation)",
        description="Sign TRUST with KEY, in place. Holders of the current root's keys sign the next root.",
    )
    s.add_argument("trust", type=Path, metavar="TRUST")
    s.add_argument("--key", required=True, type=Path)
    s.add_argument("--passphrase-file", type=Path)
    s.set_defaults(func=_sign, action="trust.sign")

    inst = ts.add_parser(
        "install",
        help="install a trust root on this host (first install, or a signed rotation)",
        description="Install TRUST as this host's trust root ($VIGIL_HOME/trust/root.json). The first "
        "install is taken as given (check it out of band); a later one must be a higher version signed "
        "by a threshold of the installed root's keys.",
    )
    inst.add_argument("trust", type=Path, metavar="TRUST")
    inst.set_defaults(func=_install, action="trust.install")

    sh = ts.add_parser(
        "show",
        help="print a trust root",
        description="Print a trust root's keys and threshold.",
        parents=[json_option()],
    )
    sh.add_argument("trust", type=Path, nargs="?", metavar="TRUST", help="default: the installed root")
    sh.set_defaults(func=_show, action="trust.show")


def _init(args: argparse.Namespace, inv: ops.Invocation) -> int:
    root = ops.init_trust(inv, args.out, args.key, args.threshold, args.version)
    ok(
        str(args.out),
        f"trust root v{root.version}: {root.threshold} of {len(root.keys)} keys "
        f"({', '.join(sorted(root.keys))})",
    )
    return 0


def _sign(args: argparse.Namespace, inv: ops.Invocation) -> int:
    key = load_signing_key(args.key, read_passphrase(args.passphrase_file))
    root = ops.sign_trust(inv, args.trust, key)
    ok(str(args.trust), f"signed by {key.id_hex} ({len(root.signatures)} signature(s))")
    return 0


def _install(args: argparse.Namespace, inv: ops.Invocation) -> int:
    dest, new = ops.install_trust(inv, args.trust)
    ok(str(dest), f"trust root v{new.version} installed ({new.threshold} of {len(new.keys)} keys)")
    return 0


def _show(args: argparse.Namespace, inv: ops.Invocation) -> int:
    path, root = ops.show_trust(inv, args.trust)
    data = {
        "path": str(path),
        "version": root.version,
        "threshold": root.threshold,
        "keys": sorted(root.keys),
        "signatures": sorted(s["key_id"] for s in root.signatures),
    }
    if args.json:
        emit_json(data)
    else:
        ok(
            str(path),
            f"v{root.version}, {root.threshold} of {len(root.keys)}: {', '.join(sorted(root.keys))}",
        )
    return 0
