#!/usr/bin/env python3
"""Redfish exporter: one scrape of 500 BMCs beside the baseline of one, measured in the same run.

    first scrape (walk + readings) of N targets / of 1 target
    steady scrape (readings only; the tree is cached) of N targets / of 1 target

The BMCs are the lab's simulator (``vigil.exporters.redfish.bmcsim``, mockup public-rackmount1,
live readings, session authentication) in --sims processes on 127.0.0.1, each serving N/--sims
targets (each target its own name, session and connection), over HTTPS with a throwaway CA (or
plain HTTP with --http). The exporter runs in this process with its defaults (64 workers). Every
steady figure is the median of --repeat scrapes.
Usage: python benchmarks/redfish_exporter.py [--targets 500] [--sims 8] [--repeat 5] [--http]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vigil.exporters.redfish import RedfishCollector, parse_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_pki(d: Path) -> tuple[str, str, str]:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bmc")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    (d / "cert.pem").write_bytes(cert.public_bytes(pem))
    (d / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(d / "ca.pem"), str(d / "cert.pem"), str(d / "key.pem")


def config(n: int, urls: list[str], cred: str, ca: str | None, d: Path) -> RedfishCollector:
    lines = ["targets:"]
    for i in range(n):
        lines += [
            f"  - name: node{i:04d}",
            f"    url: {urls[i % len(urls)]}",
            f"    credentials_file: {cred}",
        ]
        lines += [f"    ca_file: {ca}"] if ca else ["    insecure: true"]
    path = d / f"redfish-{n}.yml"
    path.write_text("\n".join(lines) + "\n")
    return RedfishCollector(parse_config(path.read_text(), str(path)))


def measure(c: RedfishCollector, repeat: int) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    text = c.scrape()
    first = time.perf_counter() - t0
    steady = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        text = c.scrape()
        steady.append(time.perf_counter() - t0)
    up = sum(1 for line in text.splitlines() if line.startswith("redfish_up{") and line.endswith(" 1"))
    return first, statistics.median(steady), up


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--targets", type=int, default=500)
    ap.add_argument("--sims", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--http", action="store_true", help="plain HTTP instead of HTTPS")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cred = d / "bmc.cred"
        cred.write_text("monitor:bench-password\n")
        cred.chmod(0o600)
        ca = cert = key = None
        if not a.http:
            ca, cert, key = make_pki(d)
        procs, urls = [], []
        for _ in range(a.sims):
            port = free_port()
            cmd = [
                sys.executable,
                "-m",
                "vigil.exporters.redfish.bmcsim",
                "--listen-address",
                f"127.0.0.1:{port}",
                "--credentials-file",
                str(cred),
                "--gpu-power",
                "1400",
                "--faults-file",
                str(d / "faults.json"),
            ]
            if cert and key:
                cmd += ["--tls-cert", cert, "--tls-key", key]
            procs.append(subprocess.Popen(cmd, stderr=subprocess.DEVNULL))
            urls.append(f"{'http' if a.http else 'https'}://127.0.0.1:{port}")
        try:
            for port in [int(u.rsplit(":", 1)[1]) for u in urls]:
                for _ in range(100):
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                        break
                    except OSError:
                        time.sleep(0.05)
            one = config(1, urls, str(cred), ca, d)
            many = config(a.targets, urls, str(cred), ca, d)
            b_first, b_steady, b_up = measure(one, a.repeat)
            m_first, m_steady, m_up = measure(many, a.repeat)
            one.close()
            many.close()
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=10)
    scheme = "http" if a.http else "https (TLS 1.2+, verified)"
    print(f"Redfish exporter, {scheme}, {a.sims} simulator processes, {os.cpu_count()} CPUs, 64 workers")
    print(f"{'scrape':<34}{'1 target':>12}{f'{a.targets} targets':>14}{'ratio':>9}{'per target':>13}")
    for name, b, m in (
        ("first (walk + readings)", b_first, m_first),
        ("steady (readings, median)", b_steady, m_steady),
    ):
        print(f"{name:<34}{b * 1000:>10.1f}ms{m * 1000:>12.1f}ms{m / b:>9.1f}{m / a.targets * 1000:>11.2f}ms")
    print(f"targets up: {b_up}/1 and {m_up}/{a.targets}")
    return 0 if m_up == a.targets and b_up == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
