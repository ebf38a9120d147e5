"""``pki``: the site CA on the admin host (``vigil pki init``, ``issue``, ``status``)."""

from __future__ import annotations

from vigil.installer import pki
from vigil.installer.ops._invocation import Invocation

#: what the front ends offer (the defaults are the domain's)
PKI_USAGES = pki.USAGES
PKI_CA_DAYS = pki.CA_DAYS
PKI_LEAF_DAYS = pki.LEAF_DAYS
PKI_RENEW_DAYS = pki.RENEW_DAYS


def pki_init(inv: Invocation, *, name: str, days: int, passphrase: bytes | None) -> bool:
    """``pki.init``: the site CA, made once; False when it was there already (and is whole)."""
    paths = pki.PkiPaths.of(inv.home)
    inv.object = str(paths.ca_cert)
    made = pki.init_ca(inv.home, name=name, days=days, passphrase=passphrase)
    cert, _ = pki.load_ca(inv.home, with_key=False)
    inv.details.update(
        made=made,
        subject=cert.subject.rfc4514_string(),
        not_after=cert.not_valid_after_utc.isoformat(),
        encrypted=passphrase is not None if made else None,
    )
    return made


def pki_issue(
    inv: Invocation,
    *,
    name: str,
    usage: str,
    dns: list[str],
    ips: list[str],
    days: int,
    renew_days: int,
    passphrase: bytes | None,
) -> pki.Issued:
    """``pki.issue``: NAME's certificate, (re)issued only when it is missing or no longer right."""
    inv.object = f"{name} ({usage})"
    out = pki.issue(
        inv.home,
        name,
        usage=usage,
        dns=dns,
        ips=ips,
        days=days,
        renew_days=renew_days,
        passphrase=passphrase,
    )
    inv.details.update(changed=out.changed, reason=out.reason, cert=str(out.cert), dns=dns, ips=ips)
    return out


def pki_status(inv: Invocation, *, renew_days: int) -> pki.Status:
    """``pki.status``: every issued certificate against the site CA and the clock."""
    inv.object = str(pki.PkiPaths.of(inv.home).root)
    out = pki.status(inv.home, renew_days=renew_days)
    states: dict[str, int] = {}
    for c in out.certs:
        states[c.state] = states.get(c.state, 0) + 1
    inv.details.update(certificates=len(out.certs), states=states)
    return out


def pki_status_failure(out: pki.Status) -> None:
    """Raise for the first certificate that is expired or not the site CA's (after they were shown)."""
    bad = [c for c in out.certs if c.state in ("expired", "invalid")]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise pki.PkiError(str(bad[0].path), f"{bad[0].state}: {bad[0].reason}{more}")
