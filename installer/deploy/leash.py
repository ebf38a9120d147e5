"""Ansible dies with the vigil that started it.

ansible-runner starts ``ansible-playbook`` on a pseudo-terminal with SIGHUP ignored, so when the
vigil process that holds the terminal is killed (``kill -9``, the OOM killer, a lost SSH session),
the playbook goes on changing hosts until it next writes a line, and a long task writes none for
minutes. Its worker processes run in sessions of their own. Meanwhile the site lock, which the
kernel dropped with vigil, lets a rerun start beside it.

The leash closes that gap: each run gets a private ``bin/`` first on its ``PATH`` with an
``ansible-playbook`` and an ``ansible`` that ask the kernel for SIGTERM when their parent dies
(``prctl(PR_SET_PDEATHSIG)``), check that the parent is still the vigil that wrote them (it may
have died before the request), and then exec the real program. Ansible's own SIGTERM handler
takes its workers down with it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from vigil.basics.atomic import write_file_atomic
from vigil.installer.deploy.artifacts import DeployError

#: the programs ansible-runner starts by name from PATH
TOOLS = ("ansible-playbook", "ansible")

_SCRIPT = """#!{python} -I
# Written by vigil for one run: the real program dies with the vigil that started it.
import ctypes
import os
import signal
import sys

REAL = {real!r}
PARENT = {parent}
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
    sys.exit(f"FAIL: {{REAL}}: prctl(PR_SET_PDEATHSIG): {{os.strerror(ctypes.get_errno())}}")
if os.getppid() != PARENT:
    sys.exit(f"FAIL: {{REAL}}: vigil (pid {{PARENT}}) ended before the run began; nothing was run")
os.execv(REAL, [REAL, *sys.argv[1:]])
"""

#: Linux reads at most this much of a #! line (BINPRM_BUF_SIZE since 5.1)
_SHEBANG_MAX = 255


def real_tool(name: str, search_path: str) -> str:
    """The program NAME on SEARCH_PATH (the run's PATH without the leash)."""
    found = shutil.which(name, path=search_path)
    if found is None:
        raise DeployError(name, f"not found on PATH ({search_path}); install vigil with its Ansible")
    return os.path.abspath(found)


def write_leash(run_dir: Path, search_path: str, *, parent: int | None = None) -> Path:
    """Write RUN_DIR/bin/{ansible-playbook,ansible} for a run whose PATH is SEARCH_PATH.

    Returns the directory to put first on the run's PATH. PARENT is the pid the programs must be
    started by (this process unless given).
    """
    parent = os.getpid() if parent is None else parent
    python = sys.executable
    if not python or any(ch.isspace() for ch in python) or len(python) + 6 > _SHEBANG_MAX:
        raise DeployError(python or "sys.executable", "cannot name this Python on a #! line")
    bin_dir = run_dir / "bin"
    bin_dir.mkdir(mode=0o700, exist_ok=True)
    for name in TOOLS:
        real = real_tool(name, search_path)
        text = _SCRIPT.format(python=python, real=real, parent=parent)
        write_file_atomic(bin_dir / name, text.encode(), mode=0o700, fsync=False)
    return bin_dir
