"""``vigil bundle``: lock, build, verify, inspect, import, split and join signed bundles."""

from __future__ import annotations

import argparse
from pathlib import Path

from bundle.inspect import inspect_bundle
from bundle.store import BundleStore
from bundle.trust import load_root
from bundle.verify import verify_bundle
from installer import __version__
from installer.cli._context import Context
from installer.cli._output import emit_json, ok, progress_bar
from installer.cli.trust import resolve_trust


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bundle",
        help="build, verify and import signed offline bundles",
        description="A bundle is one signed file holding every artifact a site needs. Build it on a "
        "connected host, carry it in, verify and import it on the admin host inside the air gap.",
    )
    bs = p.add_subparsers(dest="bundle_command", metavar="ACTION")
    bs.required = True

    v = bs.add_parser(
        "verify",
        help="check signatures and every byte of a bundle",
        description="Verify BUNDLE: its signatures against the trust root and its threshold, its expiry "
        "and minimum vigil version, then every payload file streamed and hashed against the signed "
        "manifest. Nothing is written. Exit 0 and `OK:` when intact; otherwise one `FAIL:` line naming "
        "the file and the reason.",
    )
    v.add_argument("bundle", type=Path, metavar="BUNDLE")
    v.add_argument("--trust", type=Path, help="trust root file (default: the installed one)")
    v.add_argument("--json", action="store_true", help="print the result as JSON")
    v.set_defaults(func=_verify, action="bundle.verify")

    i = bs.add_parser(
        "inspect",
        help="show what a bundle holds",
        description="Show BUNDLE's components, versions, sizes, licences, signers, dates and SBOM summary. "
        "Inspect reads without verifying; run `vigil bundle verify` before trusting what it shows.",
    )
    i.add_argument("bundle", type=Path, metavar="BUNDLE")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    i.set_defaults(func=_inspect, action="bundle.inspect")

    im = bs.add_parser(
        "import",
        help="verify a bundle and add it to this host's store",
        description="Verify BUNDLE while unpacking it into a staging directory of the store "
        "($VIGIL_HOME/bundles), then rename it into place. A version not newer than the highest "
        "imported is refused unless --allow-downgrade is given (the choice is recorded). A failed "
        "import leaves the store as it was.",
    )
    im.add_argument("bundle", type=Path, metavar="BUNDLE")
    im.add_argument("--trust", type=Path, help="trust root file (default: the installed one)")
    im.add_argument("--allow-downgrade", action="store_true", help="import an older version on purpose")
    im.add_argument("--json", action="store_true", help="print the result as JSON")
    im.set_defaults(func=_import, action="bundle.import")


def _verify(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.bundle)
    trust_path = resolve_trust(ctx, args.trust)
    trust = load_root(trust_path)
    with progress_bar(f"verify {args.bundle.name}", enabled=not args.json) as progress:
        head = verify_bundle(args.bundle, trust, vigil_version=__version__, progress=progress)
    m = head.manifest
    ctx.audit_details.update(
        version=m.version, manifest_sha256=head.manifest_sha256, signers=head.signers, trust=str(trust_path)
    )
    if args.json:
        emit_json({"bundle": str(args.bundle), "verified": True, "version": m.version,
                   "manifest_sha256": head.manifest_sha256, "signers": head.signers,
                   "files": len(m.files), "bytes": m.total_size, "expires": m.expires})
    else:
        ok(args.bundle.name, f"version {m.version}, {len(m.files)} files, {m.total_size} bytes verified; "
           f"signed by {', '.join(head.signers)}; expires {m.expires}")
    return 0


def _inspect(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.bundle)
    info = inspect_bundle(args.bundle)
    ctx.audit_details.update(version=info["version"])
    if args.json:
        emit_json(info)
        return 0
    print(f"bundle    {info['bundle']}  (not verified by inspect: run `vigil bundle verify`)")
    print(f"version   {info['version']}  channel {info['channel']}  arch {info['arch']}")
    print(f"created   {info['created']}  expires {info['expires']}  needs vigil >= {info['min_vigil_version']}")
    print(f"payload   {info['payload']['size']} bytes zstd, {info['files']} files, {info['bytes']} bytes unpacked")
    for s in info["signers"]:
        print(f"signer    {s['key_id']}  {s['trusted_comment']}")
    print()
    print(f"{'component':<28} {'version':<24} {'license':<14} {'files':>5} {'bytes':>12}  kind")
    for c in info["components"]:
        print(f"{c['name']:<28} {c['version']:<24} {c['license']:<14} {c['files']:>5} {c['bytes']:>12}  {c['kind']}")
    sbom = info["sbom"]
    if sbom:
        lic = ", ".join(f"{k} {v}" for k, v in sbom["licenses"].items())
        print(f"\nsbom      {sbom['format']}, {sbom['components']} components; licences: {lic}")
    else:
        print("\nsbom      missing or unreadable")
    return 0


def _import(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.bundle)
    trust_path = resolve_trust(ctx, args.trust)
    trust = load_root(trust_path)
    store = BundleStore(ctx.home)
    ctx.audit_details.update(allow_downgrade=args.allow_downgrade, highest_before=store.highest())
    with progress_bar(f"import {args.bundle.name}", enabled=not args.json) as progress:
        result = store.import_bundle(
            args.bundle, trust, vigil_version=__version__, allow_downgrade=args.allow_downgrade, progress=progress
        )
    ctx.audit_details.update(
        version=result.version, manifest_sha256=result.manifest_sha256, signers=result.signers,
        downgrade=result.downgrade, already_imported=result.already_imported,
    )
    if args.json:
        emit_json({"bundle": str(args.bundle), "version": result.version, "path": str(result.path),
                   "manifest_sha256": result.manifest_sha256, "signers": result.signers,
                   "already_imported": result.already_imported, "downgrade": result.downgrade,
                   "files": result.files, "bytes": result.bytes})
    elif result.already_imported:
        ok(args.bundle.name, f"version {result.version} already imported ({result.path}); nothing changed")
    else:
        note = " (downgrade, allowed by --allow-downgrade)" if result.downgrade else ""
        ok(args.bundle.name, f"version {result.version} imported into {result.path}{note}")
    return 0
