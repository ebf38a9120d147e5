"""Reaching lab hosts over SSH with the lab's key and its known_hosts (strict host key checking)."""

from __future__ import annotations

import subprocess

from vigil.installer.lab.paths import LabPaths


def ssh_options(paths: LabPaths) -> list[str]:
    return [
        "-F",
        "/dev/null",
        "-i",
        str(paths.ssh_key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        f"UserKnownHostsFile={paths.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
    ]


def ssh_argv(paths: LabPaths, ip: str, command: str, *, connect_timeout: int = 5) -> list[str]:
    return ["ssh", *ssh_options(paths), "-o", f"ConnectTimeout={connect_timeout}", f"root@{ip}", command]


def ssh(
    paths: LabPaths, ip: str, command: str, *, timeout: float = 60, connect_timeout: int = 5
) -> subprocess.CompletedProcess[str]:
    """Run COMMAND on the host at IP as root; never raises on a non-zero exit (check returncode)."""
    try:
        return subprocess.run(
            ssh_argv(paths, ip, command, connect_timeout=connect_timeout),
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, "", f"timed out after {timeout:.0f}s")
