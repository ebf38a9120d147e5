"""After a run: no secret of the site may appear in what the run left on the admin host.

The secrets are the private files under ``$VIGIL_HOME/secrets/`` (no group or other permission):
the site CA's and the hosts' private keys, the audit CA's keys, the generated passwords and API
keys. Roles pass them with ``no_log`` or copy them by path; a task that printed one anyway (a
`debug`, a failed module's arguments, a `register` shown on failure) would put it into the run's
artifacts (job events, stdout), which outlive the run. This scan reads every file the run left and
fails the deploy, naming the secret's file and where it appeared (never the secret itself).

What is looked for: every line of 32 or more characters of a PEM body (a key leaked whole or in
part, as text or JSON-escaped: base64 needs no escaping), and the whole content of any other
secret of 12 or more characters. Shorter secrets cannot be told from chance and are not looked
for. Links are never followed, neither among the secrets nor in the run.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

#: the longest secret file read (keys and passwords are a few KiB)
SECRET_MAX = 1 << 20
#: shortest whole secret looked for, and shortest PEM line
MIN_SECRET = 12
MIN_PEM_LINE = 32
CHUNK = 4 << 20


@dataclass(frozen=True)
class Leak:
    #: the secret's file under secrets/
    secret: Path
    #: the run's file it appeared in
    found_in: Path

    def line(self) -> str:
        return f"the secret {self.secret} appears in {self.found_in}"


def _regular_files(root: Path) -> list[Path]:
    out = []
    for parent, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(files):
            path = Path(parent, name)
            try:
                st = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(path)
        dirs.sort()
    return out


def needles(home: Path) -> dict[bytes, Path]:
    """{what to look for: the secret file it comes from}."""
    out: dict[bytes, Path] = {}
    for path in _regular_files(home / "secrets"):
        st = path.lstat()
        if st.st_mode & 0o077 or st.st_size > SECRET_MAX:
            continue  # a certificate (0644) is public
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"-----BEGIN" in data:
            for line in data.splitlines():
                line = line.strip()
                if len(line) >= MIN_PEM_LINE and not line.startswith(b"-----"):
                    out[line] = path
            continue
        secret = data.strip()
        if len(secret) >= MIN_SECRET:
            out[secret] = path
            escaped = json.dumps(secret.decode("utf-8", "replace"))[1:-1].encode()
            if escaped != secret:
                out[escaped] = path
    return out


def find_leaks(home: Path, run_dir: Path) -> list[Leak]:
    """Every (secret, file of the run) pair where the secret appears; empty when none does."""
    wanted = needles(home)
    if not wanted:
        return []
    pattern = re.compile(b"|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True)))
    overlap = max(len(n) for n in wanted) - 1
    leaks: dict[tuple[Path, Path], Leak] = {}
    for path in _regular_files(run_dir):
        try:
            with path.open("rb") as fh:
                tail = b""
                while True:
                    chunk = fh.read(CHUNK)
                    if not chunk:
                        break
                    for m in pattern.finditer(tail + chunk):
                        secret = wanted[m.group(0)]
                        leaks.setdefault((secret, path), Leak(secret, path))
                    tail = (tail + chunk)[-overlap:] if overlap else b""
        except OSError:
            continue
    return sorted(leaks.values(), key=lambda leak: (str(leak.found_in), str(leak.secret)))
