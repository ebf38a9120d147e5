"""Running the system tools the lab drives (debootstrap, ip, ssh, cp)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from vigil.installer.lab.errors import LabError, LabPrerequisiteMissing

#: tool -> Debian package that provides it (scripts/system-deps.sh installs them)
TOOLS: dict[str, str] = {
    "debootstrap": "debootstrap",
    "systemd-nspawn": "systemd-container",
    "ip": "iproute2",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "cp": "coreutils",
    "chroot": "coreutils",
}


def require_tools(names: Sequence[str] = tuple(TOOLS)) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pkgs = sorted({TOOLS.get(n, n) for n in missing})
        raise LabPrerequisiteMissing(
            "lab",
            f"missing {', '.join(missing)}; install {' '.join(pkgs)} (scripts/system-deps.sh does)",
        )


def run(
    argv: Sequence[str], *, obj: str, timeout: float = 600, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ARGV; on failure raise LabError naming OBJ with the last line of stderr."""
    try:
        cp = subprocess.run(
            list(argv), check=False, capture_output=True, text=True, timeout=timeout, input=input
        )
    except FileNotFoundError as exc:
        raise LabPrerequisiteMissing(obj, f"{argv[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise LabError(obj, f"{argv[0]} did not finish within {timeout:.0f}s") from exc
    if check and cp.returncode != 0:
        tail = (cp.stderr.strip() or cp.stdout.strip()).splitlines()[-3:]
        raise LabError(obj, f"{' '.join(argv[:3])} failed ({cp.returncode}): {' | '.join(tail)}")
    return cp
