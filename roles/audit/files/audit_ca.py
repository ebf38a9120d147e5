#!/usr/bin/env python3
"""The small internal CA of the audit log forwarding, kept on the controller; openssl does the crypto.

    audit_ca.py --dir DIR ca   [--days N] [--name CN]
    audit_ca.py --dir DIR cert --host HOST --usage server|client [--dns NAME]... [--ip ADDR]...
                               [--days N] [--renew-days N]

`ca` makes `DIR/ca.key` (0600) and `DIR/ca.crt` once. `cert` makes `DIR/hosts/HOST/<usage>.key`
(0600) and `<usage>.crt`, signed by the CA, with the names as subjectAltName (CN = HOST), the
extended key usage of its role (TLS server or TLS client), and issues it again when it is missing,
no longer verifies against the CA, carries other names, or expires within --renew-days. Keys are
ECDSA P-256 and never leave DIR except to their own host. Directories are 0700.

Prints one JSON object: {"changed": bool, "reason": str, "cert": path, "key": path}; on failure
exit 1 with one line on stderr naming the file and the reason.
"""

import argparse
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile

OPENSSL = "openssl"


class CAError(Exception):
    pass


def run(*argv, input_text=None):
    try:
        res = subprocess.run([OPENSSL, *argv], input=input_text, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise CAError("openssl is not installed on the controller (Debian: package openssl)") from None
    return res


def must(*argv):
    res = run(*argv)
    if res.returncode != 0:
        last = (res.stderr or res.stdout).strip().splitlines()
        raise CAError("openssl {}: {}".format(argv[0], last[-1] if last else f"exit {res.returncode}"))
    return res.stdout


def private_dir(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def new_key(path):
    must("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)


def expires_within(cert, days):
    return run("x509", "-in", cert, "-noout", "-checkend", str(int(days) * 86400)).returncode != 0


def names_of(cert):
    """The subjectAltName entries of a certificate, as a sorted list of 'DNS:x' / 'IP:y'."""
    out = run("x509", "-in", cert, "-noout", "-ext", "subjectAltName").stdout
    names = []
    for line in out.splitlines()[1:]:
        for item in line.split(","):
            item = item.strip()
            if item.startswith("DNS:"):
                names.append(item)
            elif item.startswith("IP Address:"):
                names.append("IP:" + str(ipaddress.ip_address(item[len("IP Address:") :])))
    return sorted(names)


def key_matches(cert, key):
    a = run("x509", "-in", cert, "-noout", "-pubkey").stdout
    b = run("pkey", "-in", key, "-pubout").stdout
    return bool(a) and a == b


def ensure_ca(directory, days, name):
    private_dir(directory)
    key = os.path.join(directory, "ca.key")
    crt = os.path.join(directory, "ca.crt")
    if os.path.exists(key) and os.path.exists(crt):
        if not key_matches(crt, key):
            raise CAError(
                f"{key} does not belong to {crt}; restore the pair from backup (every host "
                "certificate depends on it)"
            )
        if expires_within(crt, 0):
            raise CAError(
                f"{crt} has expired; move the directory aside to make a new CA (every host "
                "is then issued a new certificate)"
            )
        os.chmod(key, 0o600)
        return {"changed": False, "reason": "present", "cert": crt, "key": key}
    if os.path.exists(key) or os.path.exists(crt):
        raise CAError(
            f"{directory} holds only half of the CA (ca.key / ca.crt); restore the other from backup "
            "or remove both to start a new CA"
        )
    work = tempfile.mkdtemp(prefix=".ca.", dir=directory)
    try:
        tkey = os.path.join(work, "ca.key")
        tcrt = os.path.join(work, "ca.crt")
        new_key(tkey)
        must(
            "req",
            "-new",
            "-x509",
            "-key",
            tkey,
            "-out",
            tcrt,
            "-days",
            str(days),
            "-sha256",
            "-subj",
            "/CN=" + name,
            "-set_serial",
            "0x" + secrets.token_hex(16),
            "-addext",
            "basicConstraints=critical,CA:TRUE,pathlen:0",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-addext",
            "subjectKeyIdentifier=hash",
        )
        os.chmod(tcrt, 0o644)
        os.replace(tkey, key)
        os.replace(tcrt, crt)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"changed": True, "reason": "created", "cert": crt, "key": key}


def ensure_cert(directory, host, usage, dns, ips, days, renew_days):
    ca_key = os.path.join(directory, "ca.key")
    ca_crt = os.path.join(directory, "ca.crt")
    if not (os.path.exists(ca_key) and os.path.exists(ca_crt)):
        raise CAError(f"{directory}: no CA yet; run `audit_ca.py --dir {directory} ca` first")
    if "/" in host or host in ("", ".", "..") or host != host.strip():
        raise CAError(f"host name {host!r} cannot name a directory")
    hostdir = os.path.join(directory, "hosts", host)
    private_dir(os.path.join(directory, "hosts"))
    private_dir(hostdir)
    key = os.path.join(hostdir, usage + ".key")
    crt = os.path.join(hostdir, usage + ".crt")
    wanted = sorted(
        set(["DNS:" + d for d in [host, *dns]] + ["IP:" + str(ipaddress.ip_address(i)) for i in ips])
    )
    reason = None
    if not (os.path.exists(key) and os.path.exists(crt)):
        reason = "created"
    elif run("verify", "-CAfile", ca_crt, "-purpose", "ssl" + usage, crt).returncode != 0:
        reason = "did not verify against the CA"
    elif names_of(crt) != wanted:
        reason = "names changed ({} -> {})".format(", ".join(names_of(crt)), ", ".join(wanted))
    elif expires_within(crt, renew_days):
        reason = f"expires within {renew_days} days"
    elif not key_matches(crt, key):
        reason = "key and certificate did not match"
    if reason is None:
        os.chmod(key, 0o600)
        return {"changed": False, "reason": "valid", "cert": crt, "key": key}
    work = tempfile.mkdtemp(prefix=".cert.", dir=hostdir)
    try:
        tkey = os.path.join(work, "key")
        tcsr = os.path.join(work, "csr")
        tcrt = os.path.join(work, "crt")
        ext = os.path.join(work, "ext")
        with open(ext, "w", encoding="utf-8") as f:
            f.write(
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage={}Auth\n"
                "subjectAltName={}\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid\n".format(usage, ",".join(wanted))
            )
        new_key(tkey)
        must("req", "-new", "-key", tkey, "-subj", "/CN=" + host, "-out", tcsr)
        must(
            "x509",
            "-req",
            "-in",
            tcsr,
            "-CA",
            ca_crt,
            "-CAkey",
            ca_key,
            "-out",
            tcrt,
            "-days",
            str(days),
            "-sha256",
            "-set_serial",
            "0x" + secrets.token_hex(16),
            "-extfile",
            ext,
        )
        os.chmod(tcrt, 0o644)
        os.replace(tkey, key)
        os.replace(tcrt, crt)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"changed": True, "reason": reason, "cert": crt, "key": key}


def main(argv):
    p = argparse.ArgumentParser(prog="audit_ca.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True)
    sub = p.add_subparsers(dest="cmd", required=True)
    ca = sub.add_parser("ca")
    ca.add_argument("--days", type=int, default=3650)
    ca.add_argument("--name", default="vigil audit forwarding CA")
    cert = sub.add_parser("cert")
    cert.add_argument("--host", required=True)
    cert.add_argument("--usage", choices=("server", "client"), required=True)
    cert.add_argument("--dns", action="append", default=[])
    cert.add_argument("--ip", action="append", default=[])
    cert.add_argument("--days", type=int, default=825)
    cert.add_argument("--renew-days", type=int, default=30)
    args = p.parse_args(argv)
    old = os.umask(0o077)
    try:
        if args.cmd == "ca":
            out = ensure_ca(args.dir, args.days, args.name)
        else:
            out = ensure_cert(args.dir, args.host, args.usage, args.dns, args.ip, args.days, args.renew_days)
    except (CAError, ValueError) as e:
        sys.stderr.write(f"FAIL: audit CA {args.dir}: {e}\n")
        return 1
    finally:
        os.umask(old)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
