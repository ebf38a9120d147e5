"""``vigil bundle``: lock, build, verify, inspect, import, split and join signed bundles."""

from __future__ import annotations

import argparse
import shutil
import textwrap
from pathlib import Path
from typing import Any

from vigil.bundle.signing import read_passphrase
from vigil.installer import ops
from vigil.installer.cli._common import json_option, signing_options, trust_option
from vigil.installer.cli._output import emit_json, ok, showing_progress, visible_tree


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
        parents=[signing_options(), json_option()],
        help="fetch, verify and pack a channel into one signed bundle",
        description="Fetch every artifact of CHANNEL's lock (each checked against its pinned SHA-256), "
        "stage the files, the project's Ansible content and a CycloneDX SBOM, and write "
        "DIR/vigil-N-ARCH.bundle signed with every --key. With the same inputs and SOURCE_DATE_EPOCH "
        "two builds are byte-identical. Prints the bundle's path as the last line.",
    )
    bd.add_argument("--channel", required=True)
    bd.add_argument(
        "--version", required=True, type=int, metavar="N", help="bundle version (monotonic integer)"
    )
    bd.add_argument("--out", required=True, type=Path, metavar="DIR")
    bd.add_argument("--valid-days", type=int, default=365, help="days until the bundle expires (default 365)")
    bd.add_argument("--min-vigil-version", help="oldest vigil that may import it (default: this vigil)")
    bd.add_argument("--catalog-dir", type=Path, help="directory of the catalogs (default: the packaged ones)")
    bd.add_argument("--cache", type=Path, help="download cache (default $VIGIL_CACHE or ~/.cache/vigil)")
    bd.set_defaults(func=_build, action="bundle.build")

    v = bs.add_parser(
        "verify",
        parents=[trust_option(), json_option()],
        help="check signatures and every byte of a bundle",
        description="Verify BUNDLE: its signatures against the trust root and its threshold, its expiry "
        "and minimum vigil version, then every byte of the payload: hashed as stored and compared with "
        "the signed manifest's SHA-256 (at the speed of reading the file). --deep also decompresses it "
        "and checks every member (path, type, mode) and every file's hash, as an import does while it "
        "unpacks. Nothing is written. Exit 0 and `OK:` when intact; otherwise one `FAIL:` line naming "
        "the file and the reason.",
    )
    v.add_argument("bundle", type=Path, metavar="BUNDLE")
    v.add_argument(
        "--deep",
        action="store_true",
        help="also decompress the payload and check every member and every file's hash",
    )
    v.set_defaults(func=_verify, action="bundle.verify")

    i = bs.add_parser(
        "inspect",
        parents=[json_option("summary")],
        help="show what a bundle holds",
        description="Show BUNDLE's components, versions, sizes, licences, signers, dates and SBOM summary. "
        "Inspect reads without verifying; run `vigil bundle verify` before trusting what it shows.",
    )
    i.add_argument("bundle", type=Path, metavar="BUNDLE")
    i.set_defaults(func=_inspect, action="bundle.inspect")

    im = bs.add_parser(
        "import",
        parents=[trust_option(), json_option()],
        help="verify a bundle and add it to this host's store",
        description="Verify BUNDLE while unpacking it into a staging directory of the store "
        "($VIGIL_HOME/bundles), then rename it into place. A version not newer than the highest "
        "imported is refused unless --allow-downgrade is given (the choice is recorded). A failed "
        "import leaves the store as it was.",
    )
    im.add_argument("bundle", type=Path, metavar="BUNDLE")
    im.add_argument("--allow-downgrade", action="store_true", help="import an older version on purpose")
    im.set_defaults(func=_import, action="bundle.import")

    sp = bs.add_parser(
        "split",
        parents=[signing_options("signing key (repeat)")],
        help="cut a bundle into parts for removable media",
        description="Cut BUNDLE into parts of at most SIZE bytes (NAME.part001, ...) and write "
        "NAME.parts.json, an index of each part's size and SHA-256 signed with --key. `vigil bundle join` "
        "checks the index and every part before it writes anything.",
    )
    sp.add_argument("bundle", type=Path, metavar="BUNDLE")
    sp.add_argument("--size", required=True, help="largest part, e.g. 4G, 700M (binary units)")
    sp.add_argument("--out", type=Path, help="directory for the parts (default: beside BUNDLE)")
    sp.set_defaults(func=_split, action="bundle.split")

    jn = bs.add_parser(
        "join",
        parents=[trust_option()],
        help="check and join the parts of a split bundle",
        description="Check INDEX (NAME.parts.json) against the trust root, then each part in order, "
        "and write the joined bundle. A missing, reordered or altered part is named; nothing is "
        "left behind on failure.",
    )
    jn.add_argument("index", type=Path, metavar="INDEX")
    jn.add_argument("--out", type=Path, help="joined bundle path (default: beside the parts)")
    jn.set_defaults(func=_join, action="bundle.join")


def _lock(args: argparse.Namespace, inv: ops.Invocation) -> int:
    lock = ops.lock_channel(inv, args.channel, args.catalog_dir)
    ok(args.channel, f"locked into {lock}")
    return 0


def _build(args: argparse.Namespace, inv: ops.Invocation) -> int:
    keys = ops.load_keys(args.key, read_passphrase(args.passphrase_file))
    with showing_progress(inv, steps=None if args.json else "... ", bars=not args.json):
        built = ops.build_bundle(
            inv,
            channel=args.channel,
            version=args.version,
            keys=keys,
            out_dir=args.out,
            valid_days=args.valid_days,
            min_vigil_version=args.min_vigil_version,
            catalog_dir=args.catalog_dir,
            cache_dir=args.cache,
        )
    info = built.info
    if args.json:
        emit_json(
            {
                "bundle": str(built.path),
                "version": args.version,
                "files": info["files"],
                "bytes": info["bytes"],
                "payload_sha256": info["payload"]["sha256"],
                "signers": built.signers,
            }
        )
    else:
        ok(
            built.path.name,
            f"{info['files']} files, {info['bytes']} bytes, signed by {', '.join(built.signers)}",
        )
        print(built.path)
    return 0


def _verify(args: argparse.Namespace, inv: ops.Invocation) -> int:
    with showing_progress(inv, bars=not args.json):
        head = ops.verify_bundle(inv, args.bundle, args.trust, deep=args.deep)
    m = head.manifest
    if args.json:
        emit_json(
            {
                "bundle": str(args.bundle),
                "verified": True,
                "deep": args.deep,
                "version": m.version,
                "manifest_sha256": head.manifest_sha256,
                "signers": head.signers,
                "files": len(m.files),
                "bytes": m.total_size,
                "expires": m.expires,
            }
        )
    else:
        ok(args.bundle.name, ops.verified_message(head, deep=args.deep))
    return 0


def _inspect(args: argparse.Namespace, inv: ops.Invocation) -> int:
    info = ops.inspect_bundle(inv, args.bundle)
    if args.json:
        emit_json(info)
        return 0
    # an unverified bundle's names: each value shown with its escapes, on the line it belongs to
    print(inspect_text(visible_tree(info), width=shutil.get_terminal_size().columns))
    return 0


_LABEL = 10  # "signer    ": the width of the labels on the left of the summary lines
_GAP = "  "
_MIN_LICENSE = 20  # narrower than this, a component's licence goes on its own line under the row
_MIN_WIDTH = 40


def inspect_text(info: dict[str, Any], *, width: int) -> str:
    """``vigil bundle inspect`` for people, in lines of at most ``width`` columns.

    Long values wrap at blanks: the licence column, which can hold a Debian copyright summary or the
    AND of every wheel's licence, wraps inside its column; when the terminal leaves it fewer than
    20 columns, each licence goes on the lines under its row, indented to the version column.
    Names and versions are never cut (only a line too narrow even for them is wider than ``width``).
    """
    width = max(width, _MIN_WIDTH)
    payload = f"{info['payload']['size']} bytes zstd, {info['files']} files, {info['bytes']} bytes unpacked"
    out = [
        *_labelled("bundle", [info["bundle"], "(not verified by inspect: run `vigil bundle verify`)"], width),
        *_labelled(
            "version", [str(info["version"]), f"channel {info['channel']}", f"arch {info['arch']}"], width
        ),
        *_labelled(
            "created",
            [info["created"], f"expires {info['expires']}", f"needs vigil >= {info['min_vigil_version']}"],
            width,
        ),
        *_labelled("payload", payload.split(", "), width, sep=", "),
    ]
    for s in info["signers"]:
        out += _labelled("signer", [s["key_id"], s["trusted_comment"]], width)
    out += ["", *_component_table(info["components"], width), ""]
    sbom = info["sbom"]
    if sbom:
        out += _labelled("sbom", [sbom["format"], f"{sbom['components']} components"], width, sep=", ")
        counts = [f"{name} ({n})" for name, n in sbom["licenses"].items()]
        if counts:
            out += _labelled("licences", counts, width, sep=", ")
    else:
        out += _labelled("sbom", ["missing or unreadable"], width)
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, cut at blanks (a longer word is cut too)."""
    return textwrap.wrap(text, max(width, 1), break_on_hyphens=False) or [""]


def _labelled(label: str, parts: list[str], width: int, *, sep: str = "  ") -> list[str]:
    """``label`` then ``parts`` joined with ``sep``, a line break only between parts where one can go
    (a part longer than a line is wrapped at its own blanks), the next lines indented under the first."""
    room = width - _LABEL - len(sep.rstrip())  # keeps a column for the comma that ends a line
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(sep) + len(part) <= room:
            lines[-1] += sep + part
            continue
        if lines:
            lines[-1] += sep.rstrip()
        lines += _wrap(part, room)
    return [f"{label if i == 0 else '':<{_LABEL}}{line}".rstrip() for i, line in enumerate(lines)]


def _component_table(components: list[dict[str, Any]], width: int) -> list[str]:
    rows = [
        (c["name"], c["version"], str(c["files"]), str(c["bytes"]), c["kind"], c["license"])
        for c in components
    ]
    head = ("component", "version", "files", "bytes", "kind", "license")
    w = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]

    def cells(r: tuple[str, ...]) -> str:
        return _GAP.join(
            (r[0].ljust(w[0]), r[1].ljust(w[1]), r[2].rjust(w[2]), r[3].rjust(w[3]), r[4].ljust(w[4]))
        )

    fixed = sum(w) + len(_GAP) * 5
    if width - fixed >= _MIN_LICENSE:  # the licence is the last column, wrapped inside it
        return [
            (cells(r) + _GAP if i == 0 else " " * fixed) + line
            for r in [head, *rows]
            for i, line in enumerate(_wrap(r[5], width - fixed))
        ]
    indent = w[0] + len(_GAP) if width - w[0] - len(_GAP) >= _MIN_LICENSE else len(_GAP)
    return [
        line.rstrip()
        for r in [head, *rows]
        for line in [cells(r), *(" " * indent + part for part in _wrap(r[5], width - indent))]
    ]


def _import(args: argparse.Namespace, inv: ops.Invocation) -> int:
    with showing_progress(inv, bars=not args.json):
        result = ops.import_bundle(inv, args.bundle, args.trust, allow_downgrade=args.allow_downgrade)
    if args.json:
        emit_json(
            {
                "bundle": str(args.bundle),
                "version": result.version,
                "path": str(result.path),
                "manifest_sha256": result.manifest_sha256,
                "signers": result.signers,
                "already_imported": result.already_imported,
                "downgrade": result.downgrade,
                "files": result.files,
                "bytes": result.bytes,
            }
        )
    elif result.already_imported:
        ok(args.bundle.name, f"version {result.version} already imported ({result.path}); nothing changed")
    else:
        note = " (downgrade, allowed by --allow-downgrade)" if result.downgrade else ""
        ok(args.bundle.name, f"version {result.version} imported into {result.path}{note}")
    return 0


def _split(args: argparse.Namespace, inv: ops.Invocation) -> int:
    keys = ops.load_keys(args.key, read_passphrase(args.passphrase_file))
    split = ops.split_bundle(inv, args.bundle, args.size, keys, args.out)
    ok(args.bundle.name, f"{split.parts} part(s) of at most {split.part_size} bytes; index {split.index}")
    print(split.index)
    return 0


def _join(args: argparse.Namespace, inv: ops.Invocation) -> int:
    out = ops.join_bundle(inv, args.index, args.trust, args.out)
    ok(args.index.name, f"parts checked and joined into {out}")
    print(out)
    return 0
