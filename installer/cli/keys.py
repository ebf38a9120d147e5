"""``vigil keys``: signing keys for bundles."""

from __future__ import annotations

import argparse
from pathlib import Path

from vigil.bundle.signing import read_passphrase
from vigil.installer import ops
from vigil.installer.cli._common import json_option
from vigil.installer.cli._output import emit_json, ok


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "keys",
        help="create signing keys",
        description="Create and show the Ed25519 keys that sign bundles and trust roots.",
    )
    ks = p.add_subparsers(dest="keys_command", metavar="ACTION")
    ks.required = True

    g = ks.add_parser(
        "generate",
        parents=[json_option()],
        help="create a key pair PREFIX.key (0600) and PREFIX.pub",
        description="Create an Ed25519 key pair: PREFIX.key (PKCS#8 PEM, mode 0600, encrypted with the "
        "passphrase when one is given) and PREFIX.pub (minisign's public key format, so the stock "
        "`minisign -V` can check bundle manifests). Existing files are never overwritten.",
    )
    g.add_argument("--out", required=True, type=Path, metavar="PREFIX", help="path prefix of the two files")
    g.add_argument("--passphrase-file", type=Path, help="file whose first line encrypts the private key")
    g.set_defaults(func=_generate, action="keys.generate")

    s = ks.add_parser(
        "show",
        help="print a public key's id",
        description="Print the key id of a public key.",
        parents=[json_option()],
    )
    s.add_argument("pub", type=Path, metavar="PUB")
    s.set_defaults(func=_show, action="keys.show")


def _generate(args: argparse.Namespace, inv: ops.Invocation) -> int:
    new = ops.generate_key(inv, args.out, read_passphrase(args.passphrase_file))
    if args.json:
        emit_json({"key": str(new.key), "pub": str(new.pub), "key_id": new.key_id})
    else:
        ok(str(new.key), f"key {new.key_id} written; public key {new.pub}")
    return 0


def _show(args: argparse.Namespace, inv: ops.Invocation) -> int:
    pub = ops.show_key(inv, args.pub)
    if args.json:
        emit_json({"pub": str(args.pub), "key_id": pub.id_hex})
    else:
        ok(str(args.pub), f"key {pub.id_hex}")
    return 0
