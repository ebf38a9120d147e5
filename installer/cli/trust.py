"""``vigil trust``: the trust root (which keys may sign bundles, and how many must)."""

from __future__ import annotations

import argparse
from pathlib import Path

from vigil.bundle.errors import TrustError
from vigil.bundle.signing import load_public_key, load_signing_key, read_passphrase
from vigil.bundle.trust import check_rotation, load_root, new_root, write_root
from vigil.installer.cli._context import Context
from vigil.installer.cli._output import emit_json, ok


def store_path(ctx: Context) -> Path:
    return ctx.home / "trust" / "root.json"


def resolve_trust(ctx: Context, given: Path | None) -> Path:
    """The trust root a command uses: ``--trust`` when given, else the installed one."""
    if given is not None:
        return given
    path = store_path(ctx)
    if not path.exists():
        raise TrustError(str(path), "no trust root installed; pass --trust or run `vigil trust install`")
    return path


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
    i.add_argument("--key", action="append", required=True, type=Path, metavar="PUB", help="a public key (repeat)")
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

    sh = ts.add_parser("show", help="print a trust root", description="Print a trust root's keys and threshold.")
    sh.add_argument("trust", type=Path, nargs="?", metavar="TRUST", help="default: the installed root")
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=_show, action="trust.show")


def _init(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.out)
    if args.out.exists():
        raise TrustError(str(args.out), "already exists; refusing to overwrite a trust root")
    root = new_root([load_public_key(p) for p in args.key], args.threshold, args.version)
    write_root(root, args.out)
    ctx.audit_details.update(version=root.version, threshold=root.threshold, keys=sorted(root.keys))
    ok(str(args.out), f"trust root v{root.version}: {root.threshold} of {len(root.keys)} keys ({', '.join(sorted(root.keys))})")
    return 0


def _sign(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.trust)
    root = load_root(args.trust)
    key = load_signing_key(args.key, read_passphrase(args.passphrase_file))
    root.sign(key)
    write_root(root, args.trust)
    ctx.audit_details.update(version=root.version, signer=key.id_hex)
    ok(str(args.trust), f"signed by {key.id_hex} ({len(root.signatures)} signature(s))")
    return 0


def _install(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.trust)
    new = load_root(args.trust)
    dest = store_path(ctx)
    dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if dest.exists():
        current = load_root(dest)
        signers = check_rotation(current, new, where=str(args.trust))
        ctx.audit_details.update(rotation=True, from_version=current.version, signers=signers)
    else:
        ctx.audit_details.update(rotation=False)
    write_root(new, dest)
    ctx.audit_details.update(version=new.version, threshold=new.threshold, keys=sorted(new.keys))
    ok(str(dest), f"trust root v{new.version} installed ({new.threshold} of {len(new.keys)} keys)")
    return 0


def _show(args: argparse.Namespace, ctx: Context) -> int:
    path = resolve_trust(ctx, args.trust)
    ctx.audit_object = str(path)
    root = load_root(path)
    data = {"path": str(path), "version": root.version, "threshold": root.threshold, "keys": sorted(root.keys),
            "signatures": sorted(s["key_id"] for s in root.signatures)}
    if args.json:
        emit_json(data)
    else:
        ok(str(path), f"v{root.version}, {root.threshold} of {len(root.keys)}: {', '.join(sorted(root.keys))}")
    return 0
