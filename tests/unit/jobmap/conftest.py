"""Run the Slurm job map prolog/epilog directly, as slurmd would, against temporary directories.

The one stand-in here is `logger`: syslog is not running on the build machine, so a fake `logger`
earlier on PATH appends its arguments to a file the tests read. Everything else is real: dash,
bash in POSIX mode, flock, mv, rm, promtool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = ROOT / "roles" / "slurm_jobmap" / "files"
PROLOG = FILES / "prolog.sh"
EPILOG = FILES / "epilog.sh"
#: the shells the scripts must run under (POSIX sh, no bashisms)
SHELLS = {"dash": ["dash"], "bash-posix": ["bash", "--posix"]}

FAKE_LOGGER = """#!/bin/sh
# test stand-in for logger(1): one line per call, the arguments joined by spaces
printf '%s\\n' "$*" >>"$JM_FAKE_LOG"
exit "${JM_FAKE_LOGGER_RC:-0}"
"""

Env = Mapping[str, str | bytes | None]


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(
            f"{tool} is missing: run `bash scripts/system-deps.sh` as root (Debian package {package})"
        )
    return path


@dataclass
class JobMapRun:
    """A job map dir, a textfile dir and a syslog stand-in in a temporary directory."""

    base: Path
    shell: list[str] = field(default_factory=lambda: ["dash"])
    fake_logger: bool = True

    @property
    def map_dir(self) -> Path:
        return self.base / "run dir" / "jobmap"

    @property
    def tf_dir(self) -> Path:
        return self.base / "textfile"

    @property
    def log_file(self) -> Path:
        return self.base / "syslog.txt"

    @property
    def gres_map(self) -> Path:
        """The GRES map the scripts read here (absent unless a test writes it)."""
        return self.base / "gres map" / "jobmap-gres.conf"

    @property
    def bin_dir(self) -> Path:
        return self.base / "bin"

    def __post_init__(self) -> None:
        self.map_dir.mkdir(parents=True, exist_ok=True)
        self.tf_dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir.mkdir(exist_ok=True)
        self.gres_map.parent.mkdir(exist_ok=True)
        logger = self.bin_dir / "logger"
        logger.write_text(FAKE_LOGGER)
        logger.chmod(0o755)

    def env(self, extra: Env) -> dict[bytes, bytes]:
        path = (f"{self.bin_dir}:" if self.fake_logger else "") + os.environ.get("PATH", "/usr/bin:/bin")
        env: dict[str, str | bytes | None] = {
            "PATH": path,
            "VIGIL_JOBMAP_DIR": str(self.map_dir),
            "VIGIL_TEXTFILE_DIR": str(self.tf_dir),
            "VIGIL_JOBMAP_CONF": str(self.base / "no-such.conf"),
            "VIGIL_JOBMAP_GRES_MAP": str(self.gres_map),
            "JM_FAKE_LOG": str(self.log_file),
        }
        env.update(extra)
        return {
            k.encode(): (v if isinstance(v, bytes) else v.encode()) for k, v in env.items() if v is not None
        }

    def run(
        self, phase: str, env: Env | None = None, *, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        script = PROLOG if phase == "prolog" else EPILOG
        return subprocess.run(
            [*self.shell, str(script)],
            env=self.env(env or {}),
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def prolog(
        self, job: str | int, gpus: str | None = None, **env: str | bytes | None
    ) -> subprocess.CompletedProcess[bytes]:
        cp = self.run("prolog", {"SLURM_JOB_ID": str(job), "SLURM_JOB_GPUS": gpus, **env})
        assert cp.returncode == 0, cp
        return cp

    def epilog(
        self, job: str | int, gpus: str | None = None, **env: str | bytes | None
    ) -> subprocess.CompletedProcess[bytes]:
        cp = self.run("epilog", {"SLURM_JOB_ID": str(job), "SLURM_JOB_GPUS": gpus, **env})
        assert cp.returncode == 0, cp
        return cp

    def job_map(self) -> dict[str, str]:
        """GPU file name -> content, for the files that map a job: an empty file maps none (dcgm-exporter
        leaves its series unlabelled), and the lock and staging entries (dot names) are not part of it."""
        return {name: text for name, text in self.files().items() if text}

    def files(self) -> dict[str, str]:
        """Every GPU file name -> content, the empty ones (left by epilogs) included."""
        if not self.map_dir.is_dir():
            return {}
        return {p.name: p.read_text() for p in sorted(self.map_dir.iterdir()) if not p.name.startswith(".")}

    def leftovers(self) -> list[str]:
        """Temporary files left anywhere (the staging dir must be empty, no *.tmp.* files)."""
        found = []
        stage = self.map_dir / ".stage"
        if stage.is_dir():
            found += [f".stage/{p.name}" for p in stage.iterdir()]
        if self.tf_dir.is_dir():
            found += [p.name for p in self.tf_dir.iterdir() if not p.name.endswith(".prom")]
        return found

    def textfiles(self) -> dict[str, bytes]:
        if not self.tf_dir.is_dir():
            return {}
        return {p.name: p.read_bytes() for p in sorted(self.tf_dir.iterdir()) if not p.name.startswith(".")}

    def log(self) -> list[str]:
        return self.log_file.read_text().splitlines() if self.log_file.exists() else []


@pytest.fixture
def make_jobmap(tmp_path: Path):
    """Factory: make_jobmap(shell="dash"|"bash-posix", fake_logger=True) -> JobMapRun."""
    count = 0

    def make(shell: str = "dash", *, fake_logger: bool = True) -> JobMapRun:
        nonlocal count
        count += 1
        return JobMapRun(tmp_path / f"run{count}", shell=SHELLS[shell], fake_logger=fake_logger)

    return make


def label(value: bytes | str, limit: int = 256) -> str:
    """What the prolog must write for VALUE: cut to LIMIT bytes, invalid UTF-8 dropped, escaped."""
    raw = value.encode() if isinstance(value, str) else value
    text = raw[:limit].decode("utf-8", errors="ignore")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def info_line(job: str, user: str = "", account: str = "", partition: str = "", node: str = "") -> bytes:
    return (
        "# HELP slurm_job_info Slurm job on this node (vigil prolog); the value is always 1.\n"
        "# TYPE slurm_job_info gauge\n"
        f'slurm_job_info{{hpc_job="{job}",user="{user}",account="{account}",partition="{partition}",'
        f'node="{node}"}} 1\n'
    ).encode()
