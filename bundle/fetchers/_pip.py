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
import re
import subprocess
import sys
import tempfile
import tomllib
import urllib.parse
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from cyclonedx.spdx import fixup_id, is_expression

from vigil.bundle.errors import CatalogError
from vigil.bundle.sbom import NOASSERTION

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
    "License :: OSI Approved :: MIT No Attribution License (MIT-0)": "MIT-0",
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: GNU General Public License v2 (GPLv2)": "GPL-2.0-only",
    "License :: OSI Approved :: GNU General Public License v2 or later (GPLv2+)": "GPL-2.0-or-later",
    "License :: OSI Approved :: GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v2 or later (LGPLv2+)": "LGPL-2.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "License :: OSI Approved :: GNU Lesser General Public License v3 or later (LGPLv3+)": "LGPL-3.0-or-later",
    "License :: OSI Approved :: Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
    "License :: OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
    "License :: OSI Approved :: zlib/libpng License": "Zlib",
    "License :: OSI Approved :: Zope Public License": "ZPL-2.1",
    "License :: CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
}
# "BSD License" names no one licence: the licence text shipped in the wheel tells BSD-2 from BSD-3.
_BSD = "License :: OSI Approved :: BSD License"
_LICENSE_FIELD_MAX = 100  # a longer License field is prose or a whole licence text, not an expression
_METADATA_MAX = 1 << 20  # bytes of METADATA (or of one licence file) read from a wheel


def license_from_metadata(
    *,
    expression: str | None,
    license_field: str | None,
    classifiers: Iterable[str],
    license_texts: Iterable[str] = (),
) -> str:
    """The SPDX expression a distribution's core metadata declares, or NOASSERTION.

    1 ``License-Expression`` (PEP 639) as it is; 2 ``License`` when it is itself a short SPDX
    expression (it is often prose: "Apache 2.0", "UNKNOWN", a whole licence text); 3 the trove
    classifiers that name one licence (several: joined with OR, as dual licensing); "BSD License"
    only when one of ``license_texts`` shows which BSD licence it is.
    """
    if expression and expression.strip():
        return " ".join(expression.split())
    field = (license_field or "").strip()
    if field and "\n" not in field and len(field) <= _LICENSE_FIELD_MAX and is_expression(field):
        return fixup_id(field) or " ".join(field.split())
    classifiers = list(classifiers)
    found = {_CLASSIFIERS[c] for c in classifiers if c in _CLASSIFIERS}
    if _BSD in classifiers:
        bsd = _bsd_variant(license_texts)
        if bsd:
            found.add(bsd)
    if not found:
        return NOASSERTION
    return " OR ".join(sorted(found))


def _bsd_variant(texts: Iterable[str]) -> str | None:
    """BSD-3-Clause or BSD-2-Clause when a licence text is one of them; None when none is."""
    for text in texts:
        words = " ".join(text.split()).lower()
        if "redistributions of source code" not in words or "redistributions in binary form" not in words:
            continue
        if "advertising materials" in words:  # the 4-clause licence
            continue
        return "BSD-3-Clause" if "neither the name" in words else "BSD-2-Clause"
    return None


def wheel_license(meta: dict[str, Any]) -> str:
    """The SPDX expression of a wheel, from pip's report (core metadata as JSON), or NOASSERTION."""
    classifiers = meta.get("classifier", [])
    return license_from_metadata(
        expression=_text(meta.get("license_expression")),
        license_field=_text(meta.get("license")),
        classifiers=[c for c in classifiers if isinstance(c, str)] if isinstance(classifiers, list) else [],
    )


def wheel_file_license(wheel: Path) -> str:
    """The SPDX expression a wheel file's own METADATA declares, or NOASSERTION.

    Reads ``<name>-<version>.dist-info/METADATA`` and, for a "BSD License" classifier, the licence
    files it names (``License-File``, under ``licenses/`` as PEP 639 puts them, or beside METADATA
    as older tools did). A file that is not a readable wheel gives NOASSERTION.
    """
    try:
        with zipfile.ZipFile(wheel) as zf:
            meta_name = _metadata_member(zf, wheel.name)
            if meta_name is None:
                return NOASSERTION
            msg = HeaderParser().parsestr(_read_member(zf, meta_name) or "")
            dist_info = meta_name.rsplit("/", 1)[0]
            names = set(zf.namelist())
            texts: list[str] = []
            if _BSD in (msg.get_all("Classifier") or []):
                for f in msg.get_all("License-File") or []:
                    for member in (f"{dist_info}/licenses/{f}", f"{dist_info}/{f}"):
                        if member in names:
                            texts.append(_read_member(zf, member) or "")
                            break
    except (OSError, zipfile.BadZipFile, UnicodeError):
        return NOASSERTION
    return license_from_metadata(
        expression=_text(msg.get("License-Expression")),
        license_field=_text(msg.get("License")),
        classifiers=[str(c) for c in msg.get_all("Classifier") or []],
        license_texts=texts,
    )


def _metadata_member(zf: zipfile.ZipFile, filename: str) -> str | None:
    """The wheel's ``*.dist-info/METADATA``: the one its file name names, else the only one."""
    found = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    parts = filename.split("-")
    if len(parts) >= 2:
        own = f"{parts[0]}-{parts[1]}.dist-info/METADATA"
        if own in found:
            return own
    return found[0] if len(found) == 1 else None


def _read_member(zf: zipfile.ZipFile, name: str) -> str | None:
    info = zf.getinfo(name)
    if info.file_size > _METADATA_MAX:
        return None
    return zf.read(info).decode("utf-8", errors="replace")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
