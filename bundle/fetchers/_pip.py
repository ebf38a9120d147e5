"""Python wheels: resolve a requirement set for a target interpreter and platform with pip.

pip runs in a clean configuration: no config files (``PIP_CONFIG_FILE=/dev/null``), none of the
caller's ``PIP_*`` settings except TLS and timeout ones, and an explicit ``--index-url``. That keeps
local find-links directories and ``file://`` extra indexes out of the lock, which must name only
the real index's https URLs.

``pip install --dry-run --report`` resolves without installing. pip 23.x refuses ``--platform``
without ``--target`` even for a dry run ("Can not use any platform or abi specific options unless
installing via '--target'"); passing a throw-away ``--target`` works on pip 23.2 and 26.x alike,
and nothing is written there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.bundle.errors import CatalogError

DEFAULT_INDEX = "https://pypi.org/simple"
_KEEP_ENV = (
    "PIP_CERT",
    "PIP_CLIENT_CERT",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_TRUSTED_HOST",
    "PIP_PROXY",
)


@dataclass(frozen=True)
class ResolvedWheel:
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    license: str


def clean_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in _KEEP_ENV}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pyproject_dependencies(pyproject: Path, *, obj: str) -> list[str]:
    """``[project].dependencies`` of a pyproject.toml."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CatalogError(obj, f"cannot read {pyproject}: {e}") from None
    deps = data.get("project", {}).get("dependencies")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise CatalogError(obj, f"{pyproject} has no [project].dependencies list")
    return list(deps)


def pyproject_version(pyproject: Path, *, obj: str) -> str:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CatalogError(obj, f"cannot read {pyproject}: {e}") from None
    version = data.get("project", {}).get("version")
    if not isinstance(version, str):
        raise CatalogError(obj, f"{pyproject} has no static [project].version")
    return version


def resolve(
    requirements: list[str], *, python_version: str, platforms: list[str], index_url: str, obj: str
) -> list[ResolvedWheel]:
    """Every wheel (the requirements and their dependencies) pip would install on the target."""
    if not requirements:
        raise CatalogError(obj, "no requirements to resolve")
    abi = "cp" + python_version.replace(".", "")
    with tempfile.TemporaryDirectory(prefix="vigil-pip-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--only-binary=:all:",
            "--no-cache-dir",
            "--target",
            str(Path(tmp) / "target"),
            "--python-version",
            python_version,
            "--implementation",
            "cp",
            "--abi",
            abi,
            "--index-url",
            index_url,
            "--report",
            str(report),
        ]
        for platform in platforms:
            argv += ["--platform", platform]
        argv += ["--", *requirements]
        res = subprocess.run(argv, env=clean_pip_env(), capture_output=True, text=True, check=False)
        if res.returncode != 0 or not report.exists():
            lines = [ln for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
            reason = next((ln.strip() for ln in lines if "ERROR" in ln), lines[-1] if lines else "failed")
            raise CatalogError(
                obj, f"pip could not resolve for python {python_version} {','.join(platforms)}: {reason}"
            )
        data = json.loads(report.read_text(encoding="utf-8"))
    wheels = [_wheel(item, obj=obj) for item in data.get("install", [])]
    return sorted(wheels, key=lambda w: w.filename)


def _wheel(item: dict[str, Any], *, obj: str) -> ResolvedWheel:
    info = item.get("download_info", {})
    url = info.get("url", "")
    meta = item.get("metadata", {})
    name = str(meta.get("name", "?"))
    if urllib.parse.urlsplit(url).scheme != "https":
        raise CatalogError(obj, f"pip resolved {name} to {url!r}, not an https URL of the index")
    archive = info.get("archive_info", {})
    sha256 = archive.get("hashes", {}).get("sha256")
    if sha256 is None and str(archive.get("hash", "")).startswith("sha256="):
        sha256 = archive["hash"].split("=", 1)[1]
    if not sha256:
        raise CatalogError(obj, f"the index gave no sha256 for {url}")
    filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    if not filename.endswith(".whl"):
        raise CatalogError(obj, f"pip resolved {name} to {filename}, not a wheel")
    return ResolvedWheel(
        name=name,
        version=str(meta.get("version", "?")),
        filename=filename,
        url=url,
        sha256=sha256.lower(),
        license=wheel_license(meta),
    )


# Trove classifiers that name one SPDX licence without doubt; anything else is NOASSERTION.
_CLASSIFIERS = {
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "License :: OSI Approved :: GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "License :: OSI Approved :: GNU Lesser General Public License v3 or later (LGPLv3+)": "LGPL-3.0-or-later",
    "License :: OSI Approved :: Zope Public License": "ZPL-2.1",
}


def wheel_license(meta: dict[str, Any]) -> str:
    """The SPDX expression a wheel's metadata declares, or NOASSERTION."""
    expr = meta.get("license_expression")
    if isinstance(expr, str) and expr.strip():
        return expr.strip()
    found = sorted({_CLASSIFIERS[c] for c in meta.get("classifier", []) if c in _CLASSIFIERS})
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        return " OR ".join(found)
    return "NOASSERTION"
