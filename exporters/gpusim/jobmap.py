"""The HPC job map dir, read the way dcgm-exporter 4.8.2's ``hpcMapper`` reads it, failures included.

1. The dir is stat'ed first: a dir that is missing (or cannot be stat'ed) means "no jobs" (logged),
   not an error.
2. It is listed, and each entry is ``lstat``'ed: an entry gone by then is skipped (the exporter only
   warns), a directory is skipped, and only names that are a GPU index (``0``, ``1``) or, for a MIG
   instance, ``<gpu>.<GPU instance id>`` (``2.0``) are kept.
3. Then each kept file is opened and read. **A file that cannot be opened or read now — one an
   epilog removed since the listing, above all — fails the whole read** (:class:`JobMapError`), and
   with it the scrape: dcgm-exporter answers that scrape with HTTP 500, so every GPU series of the
   node is missing from it. That is why the vigil epilog empties a file by rename and never
   removes it.
4. Every line of a file is one job id; a GPU shared by two jobs has two lines and so gets two series
   of every metric, one per ``hpc_job``. An empty file leaves the GPU's series without ``hpc_job``.

Lines are taken as they are (only a trailing ``\\r`` dropped, as Go's line scanner does; a line of
64 KiB or more is a read error there too), so the writer — the Slurm prolog — must write one clean
job id per line.
"""

from __future__ import annotations

import logging
import os
import re
import stat

log = logging.getLogger("vigil.exporters.gpusim.jobmap")

_GPU_FILE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
#: Go's bufio.Scanner refuses a line this long (MaxScanTokenSize), which fails the read
_MAX_LINE = 64 * 1024 - 1


class JobMapError(Exception):
    """The job map could not be read as a whole: the scrape that read it fails."""


def read_jobmap(directory: str) -> dict[str, list[str]]:
    """``{"0": ["123", "124"], "2.0": ["125"], "3": []}`` from DIRECTORY; ``{}`` when it does not exist.

    Raises :class:`JobMapError` where dcgm-exporter fails its scrape (see the module's steps 2-3).
    """
    # 1 the dir itself
    try:
        os.stat(directory)
    except OSError as e:
        if not isinstance(e, FileNotFoundError):
            log.error("job map dir %s: %s; no jobs", directory, e.strerror or e)
        return {}
    # 2 the listing: names, lstat, no dirs
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise JobMapError(f"job map dir {directory}: cannot list it: {e.strerror or e}") from e
    listed: list[str] = []
    for name in names:
        try:
            st = os.lstat(os.path.join(directory, name))
        except OSError:
            log.warning("job map file %s: gone before its stat; skipped", os.path.join(directory, name))
            continue
        if stat.S_ISDIR(st.st_mode) or not _GPU_FILE.match(name):
            continue
        listed.append(name)
    # 3 the contents: any file that cannot be read now fails the whole read
    out: dict[str, list[str]] = {}
    for name in listed:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise JobMapError(f"job map file {path}: {e.strerror or e}") from e
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the final newline ends the last line; it does not start another
        if any(len(ln) > _MAX_LINE for ln in lines):
            raise JobMapError(f"job map file {path}: a line of 64 KiB or more")
        out[name] = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    return out
