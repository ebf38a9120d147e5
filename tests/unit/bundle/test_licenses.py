"""Licences: each wheel's from its own METADATA, one expression per component, the SBOM's, and the
`vigil bundle inspect` table that shows them at any terminal width.

The wheels are tiny ones made here (a zip with a ``*.dist-info/METADATA``); the bundle is built from
them by the real fetcher and builder, offline (the wheel is put in the download cache first).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.factories import KeyPair, StagedFile, make_key
from vigil.bundle.build import build_bundle
from vigil.bundle.catalog_model import LockedArtifact, LockedComponent
from vigil.bundle.fetchers import fetch_component
from vigil.bundle.fetchers._pip import wheel_file_license, wheel_license
from vigil.bundle.inspect import inspect_bundle
from vigil.bundle.manifest import ComponentEntry
from vigil.bundle.sbom import SbomItem, combine_licenses, render_sbom, summarize_sbom
from vigil.installer.cli import main
from vigil.installer.cli.bundle import inspect_text

CREATED = datetime(2026, 11, 1, tzinfo=UTC)

BSD_3 = """Copyright 2007 Pallets

Redistribution and use in source and binary forms, with or without modification, are permitted
provided that the following conditions are met:
1. Redistributions of source code must retain the above copyright notice, this list of conditions
   and the following disclaimer.
2. Redistributions in binary form must reproduce the above copyright notice, this list of
   conditions and the following disclaimer in the documentation and/or other materials provided
   with the distribution.
3. Neither the name of the copyright holder nor the names of its contributors may be used to
   endorse or promote products derived from this software without specific prior written permission.
"""
BSD_2 = BSD_3.split("3. Neither")[0]
APACHE_TEXT = "Apache License\nVersion 2.0, January 2004\n\nTERMS AND CONDITIONS FOR USE ...\n"
BSD = "License :: OSI Approved :: BSD License"
MIT = "License :: OSI Approved :: MIT License"
APACHE = "License :: OSI Approved :: Apache Software License"


def make_wheel(
    directory: Path,
    name: str = "demo",
    version: str = "1.0",
    *,
    headers: list[tuple[str, str]] | None = None,
    files: dict[str, str] | None = None,  # path inside the dist-info folder: text
) -> Path:
    """A wheel that holds a module and a dist-info folder with METADATA (and ``files``)."""
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    dist_info = f"{name}-{version}.dist-info"
    meta = [("Metadata-Version", "2.4"), ("Name", name), ("Version", version), *(headers or [])]
    text = "".join(f"{k}: {v}\n" for k, v in meta) + "\nA long description.\nLicense: not a header\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(f"{dist_info}/METADATA", text)
        for path, content in (files or {}).items():
            zf.writestr(f"{dist_info}/{path}", content)
        zf.writestr(f"{dist_info}/RECORD", "")
    return wheel


# --- one wheel's licence, from its METADATA ------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "files", "expected"),
    [
        # 1 License-Expression (PEP 639) first, whatever else is there
        (
            [("License-Expression", "Apache-2.0 OR BSD-3-Clause"), ("License", "MIT"), ("Classifier", MIT)],
            {},
            "Apache-2.0 OR BSD-3-Clause",
        ),
        # 2 License when it is an SPDX expression (an id's case is put right)
        ([("License", "BSD-2-Clause"), ("Classifier", MIT)], {}, "BSD-2-Clause"),
        ([("License", "mit")], {}, "MIT"),
        ([("License", "MIT OR Apache-2.0")], {}, "MIT OR Apache-2.0"),
        # ... not when it is prose: then the classifiers
        ([("License", "Apache 2.0"), ("Classifier", APACHE)], {}, "Apache-2.0"),
        ([("License", "UNKNOWN"), ("Classifier", MIT)], {}, "MIT"),
        (
            [
                ("License", "PSFL"),
                ("Classifier", "License :: OSI Approved :: Python Software Foundation License"),
            ],
            {},
            "PSF-2.0",
        ),
        ([("License", "Copyright (c) the authors. Permission is hereby granted ...")], {}, "NOASSERTION"),
        # 3 the classifiers: several are a choice (OR); an unknown one adds nothing
        ([("Classifier", MIT)], {}, "MIT"),
        ([("Classifier", MIT), ("Classifier", APACHE)], {}, "Apache-2.0 OR MIT"),
        ([("Classifier", "License :: OSI Approved :: Academic Free License (AFL)")], {}, "NOASSERTION"),
        ([("Classifier", "Programming Language :: Python :: 3")], {}, "NOASSERTION"),
        # "BSD License" says which BSD licence only through the licence text the wheel carries
        (
            [("Classifier", BSD), ("License-File", "LICENSE.txt")],
            {"licenses/LICENSE.txt": BSD_3},
            "BSD-3-Clause",
        ),
        ([("Classifier", BSD), ("License-File", "LICENSE")], {"LICENSE": BSD_2}, "BSD-2-Clause"),
        ([("Classifier", BSD), ("License-File", "LICENSE")], {"LICENSE": APACHE_TEXT}, "NOASSERTION"),
        ([("Classifier", BSD)], {"LICENSE": BSD_3}, "NOASSERTION"),  # no License-File names it
        ([], {}, "NOASSERTION"),
    ],
)
def test_wheel_licence_comes_from_its_metadata(
    tmp_path: Path, headers: list[tuple[str, str]], files: dict[str, str], expected: str
) -> None:
    assert wheel_file_license(make_wheel(tmp_path, headers=headers, files=files)) == expected


def test_a_file_that_is_no_wheel_has_no_licence(tmp_path: Path) -> None:
    junk = tmp_path / "junk-1.0-py3-none-any.whl"
    junk.write_bytes(b"PK" + bytes(100))
    assert wheel_file_license(junk) == "NOASSERTION"
    bare = tmp_path / "bare-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bare, "w") as zf:
        zf.writestr("bare/__init__.py", "")
    assert wheel_file_license(bare) == "NOASSERTION"


def test_pip_report_metadata_follows_the_same_rules() -> None:
    """The lock takes each wheel's licence from pip's report: core metadata as JSON."""
    assert wheel_license({"license": "Apache-2.0", "classifier": [MIT]}) == "Apache-2.0"
    assert wheel_license({"license": "Apache 2.0", "classifier": [APACHE]}) == "Apache-2.0"
    assert wheel_license({"license_expression": "MIT", "license": "BSD-2-Clause"}) == "MIT"
    assert wheel_license({"classifier": [BSD]}) == "NOASSERTION"


# --- one expression for a component --------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (["MIT", "MIT", "Apache-2.0"], "Apache-2.0 AND MIT"),
        (["MIT", "Apache-2.0 OR BSD-3-Clause"], "(Apache-2.0 OR BSD-3-Clause) AND MIT"),
        (
            ["GPL-3.0-or-later AND LGPL-3.0-or-later AND Apache-2.0", "Apache-2.0", "(MIT AND ISC)"],
            "Apache-2.0 AND GPL-3.0-or-later AND ISC AND LGPL-3.0-or-later AND MIT",
        ),
        (["(Apache-2.0 OR MIT)", "Apache-2.0 OR MIT"], "Apache-2.0 OR MIT"),
        (["Apache-2.0 WITH LLVM-exception", "MIT"], "Apache-2.0 WITH LLVM-exception AND MIT"),
        (["MIT", "NOASSERTION"], "NOASSERTION"),  # one unknown part: the whole is unknown
        (["MIT", ""], "NOASSERTION"),
        ([], "NOASSERTION"),
    ],
)
def test_component_licence_is_the_and_of_its_parts(parts: list[str], expected: str) -> None:
    assert combine_licenses(parts) == expected


def test_sbom_writes_ids_expressions_and_names_where_cyclonedx_wants_them() -> None:
    items = [
        SbomItem(n, "1", lic, "wheel", "", "")
        for n, lic in [
            ("a", "MIT"),
            ("b", "Apache-2.0 OR MIT"),
            ("c", "Custom licence"),
            ("d", "NOASSERTION"),
        ]
    ]
    doc = json.loads(render_sbom(items, bundle_name="b", bundle_version=1, created=CREATED))
    licenses = {c["name"]: c.get("licenses") for c in doc["components"]}
    assert licenses["a"] == [{"license": {"id": "MIT"}}]
    assert licenses["b"] == [{"expression": "Apache-2.0 OR MIT"}]
    assert licenses["c"] == [{"license": {"name": "Custom licence"}}]
    assert not licenses["d"]
    assert summarize_sbom(json.dumps(doc).encode())["licenses"] == {
        "Apache-2.0 OR MIT": 1,
        "Custom licence": 1,
        "MIT": 1,
        "unknown": 1,
    }


# --- a bundle of wheels: the fetcher, the builder, inspect ---------------------------------------


def wheel_component(tmp_path: Path, wheels: list[Path], cache: Path) -> LockedComponent:
    """A locked wheel component, as `vigil bundle lock` writes vigil-deps, with the wheels cached."""
    arts = []
    for w in wheels:
        sha = hashlib.sha256(w.read_bytes()).hexdigest()
        (cache / "sha256").mkdir(parents=True, exist_ok=True)
        (cache / "sha256" / sha).write_bytes(w.read_bytes())
        name, version = w.name.split("-")[:2]
        arts.append(
            LockedArtifact(
                filename=w.name,
                url=f"https://files.example.invalid/{w.name}",
                sha256=sha,
                size=w.stat().st_size,
                name=name,
                version=version,
                license="NOASSERTION",  # what an older lock says of these wheels
            )
        )
    return LockedComponent(
        name="vigil-deps",
        version="0.1.0",
        license="NOASSERTION",  # the catalog's: "each wheel carries its own licence"
        kind="wheel",
        artifacts=tuple(arts),
        files=(("*.whl", "wheels/"),),
        base_dir=tmp_path,
    )


LONG = "GPL-3.0-or-later AND LGPL-3.0-or-later AND Apache-2.0 AND BSD-3-Clause AND MIT AND ISC AND Zlib"


@pytest.fixture
def deps_bundle(tmp_path: Path) -> tuple[Path, KeyPair]:
    wheels = [
        make_wheel(
            tmp_path / "w", "alpha", "1.0", headers=[("License-Expression", "Apache-2.0 OR BSD-3-Clause")]
        ),
        make_wheel(tmp_path / "w", "beta", "2.0", headers=[("License", "BSD-2-Clause")]),
        make_wheel(
            tmp_path / "w",
            "gamma",
            "3.0",
            headers=[("Classifier", BSD), ("License-File", "LICENSE.txt")],
            files={"LICENSE.txt": BSD_3},
        ),
        make_wheel(tmp_path / "w", "delta", "4.0", headers=[("License", "UNKNOWN"), ("Classifier", MIT)]),
    ]
    comp = wheel_component(tmp_path, wheels, tmp_path / "cache")
    staged = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert {Path(s.path).name.split("-")[0]: s.license for s in staged} == {
        "alpha": "Apache-2.0 OR BSD-3-Clause",
        "beta": "BSD-2-Clause",
        "gamma": "BSD-3-Clause",
        "delta": "MIT",
    }
    (tmp_path / "debs").mkdir()
    deb = tmp_path / "debs" / "rsyslog.deb"
    deb.write_bytes(b"!<arch>\n")
    rsyslog = StagedFile(
        "components/rsyslog/rsyslog.deb", deb, component="rsyslog", version="8.2302.0-1+deb12u2", license=LONG
    )
    k = make_key(tmp_path, "k")
    (tmp_path / "out").mkdir()
    path = build_bundle(
        [*staged, rsyslog],
        version=1,
        arch="amd64",
        channel="debian",
        keys=[k.key],
        out_dir=tmp_path / "out",
        min_vigil_version="0.1.0",
        builder_version="0.1.0",
        created=CREATED,
        kinds={"vigil-deps": "wheel", "rsyslog": "deb"},
        components=[
            ComponentEntry("vigil-deps", "0.1.0", "NOASSERTION", "wheel", "4 artifacts, see files", ""),
            ComponentEntry(
                "rsyslog", "8.2302.0-1+deb12u2", LONG, "deb", "https://deb.example.invalid/r.deb", ""
            ),
        ],
    )
    return path, k


def test_vigil_deps_gets_the_and_of_its_wheels_and_the_sbom_has_no_unknown(
    deps_bundle: tuple[Path, KeyPair],
) -> None:
    info = inspect_bundle(deps_bundle[0])
    comps = {c["name"]: c for c in info["components"]}
    assert (
        comps["vigil-deps"]["license"]
        == "(Apache-2.0 OR BSD-3-Clause) AND BSD-2-Clause AND BSD-3-Clause AND MIT"
    )
    assert comps["rsyslog"]["license"] == LONG  # a catalog licence is kept as it is
    assert info["sbom"]["licenses"] == {
        "Apache-2.0 OR BSD-3-Clause": 1,
        "BSD-2-Clause": 1,
        "BSD-3-Clause": 1,
        "MIT": 1,
        LONG: 1,
    }


# --- the inspect table ---------------------------------------------------------------------------


def info_with(components: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "bundle": "vigil-1-amd64.bundle",
        "version": 1,
        "channel": "debian",
        "arch": "amd64",
        "created": "2025-11-29T00:00:00Z",
        "expires": "2035-11-27T00:00:00Z",
        "min_vigil_version": "0.1.0",
        "payload": {"size": 61355501, "sha256": "0" * 64},
        "files": 204,
        "bytes": 139458548,
        "signers": [
            {
                "key_id": "317EEF8AD29A7416",
                "trusted_comment": "vigil bundle vigil-1-amd64.bundle version:1 channel:debian "
                "created:2025-11-29T00:00:00Z",
            }
        ],
        "components": components,
        "sbom": {
            "format": "CycloneDX 1.6",
            "components": 44,
            "licenses": {"Apache-2.0": 11, LONG: 2, "MIT": 11, "Apache-2.0 OR BSD-3-Clause": 1, "unknown": 1},
        },
    }


COMPONENTS = [
    {"name": "prometheus-node-exporter", "version": "1.5.0-1+b6", "license": "Apache-2.0", "kind": "deb"},
    {"name": "rsyslog", "version": "8.2302.0-1+deb12u2", "license": LONG, "kind": "deb"},
    {"name": "vigil-deps", "version": "0.1.0", "license": "MIT", "kind": "wheel"},
]
for _n, _c in enumerate(COMPONENTS):
    _c.update(files=_n + 1, bytes=10**_n * 724132)


def table(text: str) -> list[str]:
    """The component table's lines: from its heading to the blank line after it."""
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("component "))
    return lines[first : lines.index("", first)]


def licence_of(lines: list[str], name: str) -> str:
    """The licence shown for ``name``: after the kind on its row, and on the indented lines below."""
    row = next(i for i, ln in enumerate(lines) if ln.startswith(name + " "))
    words = lines[row].split()[5:]
    for ln in lines[row + 1 :]:
        if not ln.startswith(" "):
            break
        words += ln.split()
    return " ".join(words)


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_inspect_fits_the_terminal_and_keeps_every_licence_whole(width: int) -> None:
    text = inspect_text(info_with(COMPONENTS), width=width)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= width, "\n".join(ln for ln in lines if len(ln) > width)
    rows = table(text)
    for c in COMPONENTS:
        row = next(ln for ln in rows if ln.startswith(c["name"] + " "))
        assert row.split()[:5] == [c["name"], c["version"], str(c["files"]), str(c["bytes"]), c["kind"]]
        assert licence_of(rows, c["name"]) == c["license"]
    sbom = " ".join(
        " ".join(lines[next(i for i, ln in enumerate(lines) if ln.startswith("licences")) :]).split()
    )
    assert (
        f"licences Apache-2.0 (11), {LONG} (2), MIT (11), Apache-2.0 OR BSD-3-Clause (1), unknown (1)" == sbom
    )


def test_inspect_at_80_columns_puts_each_licence_under_its_row() -> None:
    rows = table(inspect_text(info_with(COMPONENTS), width=80))
    indent = " " * len("prometheus-node-exporter  ")
    assert rows == [
        "component                 version             files     bytes  kind",
        f"{indent}license",
        "prometheus-node-exporter  1.5.0-1+b6              1    724132  deb",
        f"{indent}Apache-2.0",
        "rsyslog                   8.2302.0-1+deb12u2      2   7241320  deb",
        f"{indent}GPL-3.0-or-later AND LGPL-3.0-or-later AND Apache-2.0",
        f"{indent}AND BSD-3-Clause AND MIT AND ISC AND Zlib",
        "vigil-deps                0.1.0                   3  72413200  wheel",
        f"{indent}MIT",
    ]


def test_inspect_when_wide_wraps_the_licence_inside_its_column() -> None:
    rows = table(inspect_text(info_with(COMPONENTS), width=120))
    column = rows[0].index("license")
    assert rows[0].endswith("kind   license") and rows[1].endswith("deb    Apache-2.0")
    assert rows[2].startswith("rsyslog ") and rows[2][column:] == "GPL-3.0-or-later AND LGPL-3.0-or-later AND"
    assert rows[3] == " " * column + "Apache-2.0 AND BSD-3-Clause AND MIT AND ISC AND"
    assert rows[4] == " " * column + "Zlib"
    assert rows[5].startswith("vigil-deps ") and rows[5][column:] == "MIT"


def test_inspect_command_fits_80_columns(
    deps_bundle: tuple[Path, KeyPair], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main(["bundle", "inspect", str(deps_bundle[0])]) == 0
    out = capsys.readouterr().out
    assert max(len(ln) for ln in out.splitlines()) <= 80, out
    assert "unknown" not in out and "NOASSERTION" not in out
    rows = table(out)
    assert (
        licence_of(rows, "vigil-deps")
        == "(Apache-2.0 OR BSD-3-Clause) AND BSD-2-Clause AND BSD-3-Clause AND MIT"
    )
    assert licence_of(rows, "rsyslog") == LONG
