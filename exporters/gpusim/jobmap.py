"""The HPC job map dir, read the way dcgm-exporter's ``hpcMapper`` reads it.

1. The dir holds one file per GPU, named by the GPU index (``0``, ``1``) or, for a MIG instance,
   ``<gpu>.<gpu instance id>`` (``2.0``); any other name, and any directory, is ignored.
2. Every line of a file is one job id; a GPU shared by two jobs has two lines and so gets two series
   of every metric, one per ``hpc_job``. An empty file leaves the GPU's series without ``hpc_job``.
3. The dir is read again at every scrape; a missing dir means "no jobs" (dcgm-exporter logs it and
   leaves the metrics unchanged).

Lines are taken as they are (only a trailing ``\\r`` dropped, as Go's line scanner does), so the
writer — the Slurm prolog — must write one clean job id per line.
"""

from __future__ import annotations

import logging
import os
import re

log = logging.getLogger("vigil.exporters.gpusim.jobmap")

_GPU_FILE = re.compile(r"^[0-9]+(\.[0-9]+)?$")


def read_jobmap(directory: str) -> dict[str, list[str]]:
    """``{"0": ["123", "124"], "2.0": ["125"]}`` from DIRECTORY; ``{}`` when it does not exist."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return {}
    except OSError as e:
        log.error("job map dir %s unreadable: %s", directory, e)
        return {}
    out: dict[str, list[str]] = {}
    for entry in entries:
        if not _GPU_FILE.match(entry.name):
            continue
        try:
            if entry.is_dir():
                continue
            with open(entry.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:  # removed by an epilog between listing and reading
            continue
        except OSError as e:
            log.error("job map file %s unreadable: %s", entry.path, e)
            continue
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the final newline ends the last line; it does not start another
        out[entry.name] = [ln.removesuffix("\r") for ln in lines]
    return out
