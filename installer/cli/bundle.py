"""``vigil bundle``: lock, build, verify, inspect, import, split and join signed bundles."""

from __future__ import annotations

import argparse
from pathlib import Path

from vigil.bundle.inspect import inspect_bundle
from vigil.bundle.media import join_parts, parse_size, split_bundle
from vigil.bundle.signing import load_signing_key, read_passphrase
from vigil.bundle.store import BundleStore
from vigil.bundle.trust import load_root
from vigil.bundle.verify import verify_bundle
from vigil.installer import __version__
from vigil.installer.cli._context import Context
from vigil.installer.cli._output import emit_json, ok, progress_bar
from vigil.installer.cli.trust import resolve_trust


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bundle",
        help="build, verify and import signed offline bundles",
        description="A bundle is one signed file holding every artifact a site needs. Build it on a "
        "connected host, carry it in, verify and import it on the admin host inside the air gap.",
    )
    bs = p.add_subparsers(dest="bundle_command", metavar="ACTION")
    bs.required = True

    lk = bs.add_parser(
        "lock",
        help="resolve a channel's catalog into exact URLs and checksums",
        description="Resolve bundle/catalog/CHANNEL.yaml into CHANNEL.lock.yaml: the exact URL, size and "
        "upstream SHA-256 of every artifact (Debian packages from apt's signed indexes, wheels from the "
        "package index, release archives from the vendor's checksum files). Run on a connected host; "
        "commit the lock so every build of that channel fetches the same bytes.",
    )
    lk.add_argument("--channel", required=True, help="catalog name, e.g. debian or upstream")
    lk.add_argument("--catalog-dir", type=Path, help="directory of the catalogs (default: the packaged ones)")
    lk.set_defaults(func=_lock, action="bundle.lock")

    bd = bs.add_parser(
        "build",
        help="fetch, verify and pack a channel into one signed bundle",
        description="Fetch every artifact of CHANNEL's lock (each checked against its pinned SHA-256), "
        "stage the files, the project's Ansible content and a CycloneDX SBOM, and write "
        "DIR/vigil-N-ARCH.bundle signed with every --key. With the same inputs and SOURCE_DATE_EPOCH "
        "two builds are byte-identical. Prints the bundle's path as the last line.",
    )
    bd.add_argument("--channel", required=True)
    bd.add_argument("--version", required=True, type=int, metavar="N", help="bundle version (monotonic integer)")
    bd.add_argument("--key", action="append", required=True, type=Path, help="signing key (repeat for k-of-n)")
    bd.add_argument("--passphrase-file", type=Path, help="passphrase for the keys")
    bd.add_argument("--out", required=True, type=Path, metavar="DIR")
    bd.add_argument("--valid-days", type=int, default=365, help="days until the bundle expires (default 365)")
    bd.add_argument("--min-vigil-version", help="oldest vigil that may import it (default: this vigil)")
    bd.add_argument("--catalog-dir", type=Path, help="directory of the catalogs (default: the packaged ones)")
    bd.add_argument("--cache", type=Path, help="download cache (default $VIGIL_CACHE or ~/.cache/vigil)")
    bd.add_argument("--json", action="store_true", help="print the result as JSON")
    bd.set_defaults(func=_build, action="bundle.build")

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

    sp = bs.add_parser(
        "split",
        help="cut a bundle into parts for removable media",
        description="Cut BUNDLE into parts of at most SIZE bytes (NAME.part001, ...) and write "
        "NAME.parts.json, an index of each part's size and SHA-256 signed with --key. `vigil bundle join` "
        "checks the index and every part before it writes anything.",
    )
    sp.add_argument("bundle", type=Path, metavar="BUNDLE")
    sp.add_argument("--size", required=True, help="largest part, e.g. 4G, 700M (binary units)")
    sp.add_argument("--key", action="append", required=True, type=Path, help="signing key (repeat)")
    sp.add_argument("--passphrase-file", type=Path, help="passphrase for the keys")
    sp.add_argument("--out", type=Path, help="directory for the parts (default: beside BUNDLE)")
    sp.set_defaults(func=_split, action="bundle.split")

    jn = bs.add_parser(
        "join",
        help="check and join the parts of a split bundle",
        description="Check INDEX (NAME.parts.json) against the trust root, then each part in order, "
        "and write the joined bundle. A missing, reordered or altered part is named; nothing is "
        "left behind on failure.",
    )
    jn.add_argument("index", type=Path, metavar="INDEX")
    jn.add_argument("--trust", type=Path, help="trust root file (default: the installed one)")
    jn.add_argument("--out", type=Path, help="joined bundle path (default: beside the parts)")
    jn.set_defaults(func=_join, action="bundle.join")


def _lock(args: argparse.Namespace, ctx: Context) -> int:
    from vigil.bundle.catalog import CATALOG_DIR, catalog_path, lock_channel

    path = catalog_path(args.channel, args.catalog_dir or CATALOG_DIR)
    ctx.audit_object = str(path)
    lock = lock_channel(path)
    ctx.audit_details.update(channel=args.channel, lock=str(lock))
    ok(args.channel, f"locked into {lock}")
    return 0


def _build(args: argparse.Namespace, ctx: Context) -> int:
    import sys

    from vigil.bundle.catalog import CATALOG_DIR
    from vigil.bundle.channel import build_channel

    ctx.audit_object = f"channel {args.channel} version {args.version}"
    passphrase = read_passphrase(args.passphrase_file)
    keys = [load_signing_key(k, passphrase) for k in args.key]
    args.out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        if not args.json:
            print(f"... {line}", file=sys.stderr)

    with progress_bar(f"build {args.channel}", enabled=not args.json) as progress:
        path = build_channel(
            args.channel, version=args.version, keys=keys, out_dir=args.out, builder_version=__version__,
            min_vigil_version=args.min_vigil_version, catalog_dir=args.catalog_dir or CATALOG_DIR,
            cache_dir=args.cache, valid_days=args.valid_days, progress=progress, log=log,
        )
    info = inspect_bundle(path)
    ctx.audit_object = str(path)
    ctx.audit_details.update(channel=args.channel, version=args.version, signers=[k.id_hex for k in keys],
                             payload_sha256=info["payload"]["sha256"], files=info["files"])
    if args.json:
        emit_json({"bundle": str(path), "version": args.version, "files": info["files"], "bytes": info["bytes"],
                   "payload_sha256": info["payload"]["sha256"], "signers": [k.id_hex for k in keys]})
    else:
        ok(path.name, f"{info['files']} files, {info['bytes']} bytes, signed by {', '.join(k.id_hex for k in keys)}")
        print(path)
    return 0


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


def _split(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.bundle)
    size = parse_size(args.size)
    passphrase = read_passphrase(args.passphrase_file)
    keys = [load_signing_key(k, passphrase) for k in args.key]
    index = split_bundle(args.bundle, size, args.out or args.bundle.parent, keys)
    import json

    parts = json.loads(index.read_text())["signed"]["parts"]
    ctx.audit_details.update(parts=len(parts), part_size=size, index=str(index), signers=[k.id_hex for k in keys])
    ok(args.bundle.name, f"{len(parts)} part(s) of at most {size} bytes; index {index}")
    print(index)
    return 0


def _join(args: argparse.Namespace, ctx: Context) -> int:
    ctx.audit_object = str(args.index)
    trust = load_root(resolve_trust(ctx, args.trust))
    out = join_parts(args.index, trust, args.out)
    ctx.audit_details.update(bundle=str(out))
    ok(args.index.name, f"parts checked and joined into {out}")
    print(out)
    return 0
