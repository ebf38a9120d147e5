"""``vigil pki``: the site's offline certificate authority on the admin host."""

from __future__ import annotations

import argparse

from vigil.bundle.signing import read_passphrase
from vigil.installer import ops
from vigil.installer.cli._common import json_option, passphrase_option
from vigil.installer.cli._output import emit_json, ok

CA_DAYS, LEAF_DAYS, RENEW_DAYS, USAGES = (
    ops.PKI_CA_DAYS,
    ops.PKI_LEAF_DAYS,
    ops.PKI_RENEW_DAYS,
    ops.PKI_USAGES,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "pki",
        help="the site's certificate authority (offline, on the admin host)",
        description="The site CA in $VIGIL_HOME/secrets/pki/ (0700): an ECDSA P-256 key (0600, encrypted "
        "with --passphrase-file when given) and certificate, and the certificates it issued with their keys.",
    )
    psub = p.add_subparsers(dest="pki_command", metavar="SUBCOMMAND", parser_class=type(p))
    psub.required = True

    i = psub.add_parser(
        "init",
        parents=[passphrase_option("file whose first line encrypts the CA key")],
        help="make the site CA (once)",
        description="Make the site CA once. Run again, it changes nothing and says so (after checking that "
        "the key and certificate are still a readable pair).",
    )
    i.add_argument("--name", default="vigil site CA", help="the CA's common name (default %(default)s)")
    i.add_argument("--days", type=int, default=CA_DAYS, help="validity in days (default %(default)s)")
    i.set_defaults(func=_init, action="pki.init")

    s = psub.add_parser(
        "issue",
        parents=[json_option(), passphrase_option("the CA key's passphrase")],
        help="issue a host's certificate (again only when needed)",
        description="Issue NAME's certificate for a TLS server (or a client that authenticates by "
        "certificate), with --dns and --ip as subjectAltName. It is issued again only when it is missing, "
        "unreadable, not the site CA's, for other names or usage, or expires within --renew-days.",
    )
    s.add_argument("--name", required=True, help="the host (the certificate's common name)")
    s.add_argument("--usage", choices=USAGES, default="server", help="TLS server or client (default server)")
    s.add_argument("--dns", action="append", default=[], help="a DNS name (repeat)")
    s.add_argument("--ip", action="append", default=[], help="an IP address (repeat)")
    s.add_argument("--days", type=int, default=LEAF_DAYS, help="validity in days (default %(default)s)")
    s.add_argument(
        "--renew-days",
        type=int,
        default=RENEW_DAYS,
        help="issue again this close to expiry (default %(default)s)",
    )
    s.set_defaults(func=_issue, action="pki.issue")

    t = psub.add_parser(
        "status",
        parents=[json_option("certificates")],
        help="every issued certificate and its expiry",
        description="List every certificate the site CA issued with its names, expiry and state: ok, renew "
        "(within --renew-days), expired, or invalid (not the site CA's, unreadable). Exit 1 when one is "
        "expired or invalid.",
    )
    t.add_argument(
        "--renew-days",
        type=int,
        default=RENEW_DAYS,
        help="say renew this close to expiry (default %(default)s)",
    )
    t.set_defaults(func=_status, action="pki.status")


def _init(args: argparse.Namespace, inv: ops.Invocation) -> int:
    made = ops.pki_init(inv, name=args.name, days=args.days, passphrase=read_passphrase(args.passphrase_file))
    ok(inv.object, "site CA made" if made else "site CA already there; nothing changed")
    return 0


def _issue(args: argparse.Namespace, inv: ops.Invocation) -> int:
    out = ops.pki_issue(
        inv,
        name=args.name,
        usage=args.usage,
        dns=args.dns,
        ips=args.ip,
        days=args.days,
        renew_days=args.renew_days,
        passphrase=read_passphrase(args.passphrase_file),
    )
    if args.json:
        emit_json(
            {
                "name": out.name,
                "usage": out.usage,
                "cert": str(out.cert),
                "key": str(out.key),
                "changed": out.changed,
                "reason": out.reason,
            }
        )
    else:
        ok(str(out.cert), f"issued ({out.reason})" if out.changed else "valid; nothing changed")
    return 0


def _status(args: argparse.Namespace, inv: ops.Invocation) -> int:
    out = ops.pki_status(inv, renew_days=args.renew_days)
    if args.json:
        emit_json(
            {
                "ca": {"subject": out.ca_subject, "not_after": out.ca_not_after.isoformat()},
                "certificates": [
                    {
                        "name": c.name,
                        "usage": c.usage,
                        "path": str(c.path),
                        "names": list(c.names),
                        "not_after": c.not_after.isoformat(),
                        "days_left": c.days_left,
                        "state": c.state,
                        "reason": c.reason,
                    }
                    for c in out.certs
                ],
            }
        )
    else:
        print(f"CA {out.ca_subject}, until {out.ca_not_after:%Y-%m-%d}")
        for c in out.certs:
            names = ", ".join(c.names) or "-"
            print(
                f"  {c.state:8} {c.name} ({c.usage}) {names}: until {c.not_after:%Y-%m-%d}"
                + (f"; {c.reason}" if c.reason else "")
            )
    ops.pki_status_failure(out)
    return 0
