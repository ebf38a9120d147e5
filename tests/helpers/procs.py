"""The live processes of this machine whose command line names something (a run's directory, a
distinctive argument): for tests that must see nothing of a run left behind."""

from __future__ import annotations

from pathlib import Path


def processes_matching(needle: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains NEEDLE."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmd and state != "Z":
            out.append(int(proc.name))
    return out
