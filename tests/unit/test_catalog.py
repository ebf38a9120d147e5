"""Catalog and lock: validation messages, determinism, the committed debian lock, and the model
module that does no I/O."""

from __future__ import annotations

import ast
import hashlib
import tomllib
from pathlib import Path

import pytest
import yaml

from vigil.bundle import catalog_model
from vigil.bundle.catalog import (
    CATALOG_DIR,
    ProjectSource,
    UrlSource,
    check_lock_current,
    load_catalog,
    load_lock,
    lock_channel,
)
from vigil.bundle.catalog_model import parse_catalog, parse_lock
from vigil.bundle.errors import CatalogError
from vigil.bundle.fetchers._http import sha256_from_checksum_file

REPO = Path(__file__).resolve().parents[2]
SHA_A = "a" * 64
SHA_B = "b" * 64


def make_catalog(tmp_path: Path, components: list[dict] | None = None, **top: object) -> Path:
    """Write a catalog file; ``components`` default to one valid url component."""
    doc: dict[str, object] = {
        "channel": "test",
        "arch": "amd64",
        "components": components if components is not None else [url_component()],
    }
    doc.update(top)
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def url_component(**over: object) -> dict[str, object]:
    comp: dict[str, object] = {
        "name": "vmalert",
        "version": "1.0.0",
        "license": "Apache-2.0",
        "source": {"kind": "url", "url": "https://example.invalid/vmalert.tar.gz", "sha256": SHA_A},
        "files": {"vmalert-prod": "bin/vmalert"},
    }
    comp.update(over)
    return comp


def test_shipped_catalogs_load() -> None:
    debian = load_catalog(CATALOG_DIR / "debian.yaml")
    assert debian.channel == "debian" and debian.arch == "amd64"
    names = [c.name for c in debian.components]
    assert names == [
        "victoria-metrics",
        "prometheus-alertmanager",
        "prometheus-node-exporter",
        "libauparse0",
        "auditd",
        "libestr0",
        "libfastjson4",
        "liblognorm5",
        "rsyslog",
        "rsyslog-gnutls",
        "libmnl0",
        "libnftnl11",
        "libjansson4",
        "libxtables12",
        "libnftables1",
        "nftables",
        "vigil-deps",
        "vigil",
        "vigil-exporters",
    ]
    am = next(c for c in debian.components if c.name == "prometheus-alertmanager")
    assert am.files_map["usr/bin/prometheus-alertmanager"] == "bin/alertmanager"
    upstream = load_catalog(CATALOG_DIR / "upstream.yaml")
    assert {c.name for c in upstream.components} >= {
        "victoria-metrics",
        "vmutils",
        "alertmanager",
        "node-exporter",
        "grafana",
        "dcgm",
        "dcgm-exporter",
    }


def test_upstream_catalog_holds_no_hand_written_checksum() -> None:
    upstream = load_catalog(CATALOG_DIR / "upstream.yaml")
    for c in upstream.components:
        if isinstance(c.source, ProjectSource):  # built from this tree at build time: no upstream checksum
            continue
        assert isinstance(c.source, UrlSource)
        assert c.source.sha256 is None and c.source.checksum_url, c.name
        assert c.source.url.startswith("https://") and c.source.checksum_url.startswith("https://")


BAD_COMPONENTS = [
    (
        {"source": {"kind": "ftp", "url": "ftp://x/y"}},
        "component 'vmalert': source.kind 'ftp' is not one of url, deb, wheel, file, project",
    ),
    (
        {"source": {"kind": "url", "url": "https://x/y.tar.gz", "sha256": "ABC"}},
        "component 'vmalert': source: sha256 must be 64 lowercase hex digits, not 'ABC'",
    ),
    (
        {
            "source": {
                "kind": "url",
                "url": "https://x/y.tar.gz",
                "sha256": SHA_A,
                "checksum_url": "https://x/sums",
            }
        },
        "component 'vmalert': source: give sha256 or checksum_url, not both",
    ),
    (
        {"source": {"kind": "url", "url": "ftp://x/y.tar.gz", "sha256": SHA_A}},
        "component 'vmalert': source: url 'ftp://x/y.tar.gz' must be an http, https or file URL",
    ),
    (
        {"source": {"kind": "url", "url": "https://x/y", "sha265": SHA_A}},
        "component 'vmalert': source: unknown key 'sha265' (allowed: kind, url, sha256, checksum_url)",
    ),
    (
        {"source": {"kind": "deb", "package": "victoria-metrics"}},
        "component 'vmalert': source: missing 'version'",
    ),
    (
        {"source": {"kind": "wheel", "python_version": "py311", "platform": "any", "requirements": ["x"]}},
        "component 'vmalert': source: python_version 'py311' must look like '3.11'",
    ),
    (
        {"source": {"kind": "wheel", "python_version": "3.11", "platform": "any"}},
        "component 'vmalert': source: give requirements or pyproject",
    ),
    (
        {
            "source": {
                "kind": "wheel",
                "python_version": "3.11",
                "platform": "any",
                "requirements": ["x"],
                "index_url": "http://pypi.org/simple",
            }
        },
        "component 'vmalert': source: index_url 'http://pypi.org/simple' must be https",
    ),
    (
        {"source": {"kind": "file", "path": "x.bin", "sha256": 7}},
        "component 'vmalert': source: sha256 must be a non-empty string, not an integer",
    ),
    ({"version": None}, "component 'vmalert': missing 'version'"),
    (
        {"license": "Apache 2.0 / MIT!"},
        "component 'vmalert': license 'Apache 2.0 / MIT!' is not an SPDX expression",
    ),
    (
        {"files": {"../etc/passwd": "bin/x"}},
        "component 'vmalert': files key '../etc/passwd' must be a relative path without '..'",
    ),
    (
        {"files": {"vmalert-prod": "/usr/bin/vmalert"}},
        "component 'vmalert': files['vmalert-prod'] target '/usr/bin/vmalert' must be a relative path "
        "without '..'",
    ),
    (
        {"files": {"*.whl": "wheels"}},
        "component 'vmalert': files['*.whl'] maps several files, so its target must be a directory "
        "ending in '/'",
    ),
    ({"files": {"a": "bin/x", "b": "bin/x"}}, "component 'vmalert': files target 'bin/x' appears twice"),
    ({"files": {}}, "component 'vmalert': files must name at least one file"),
    ({"files": ["vmalert"]}, "component 'vmalert': files: must be a mapping, not a list"),
    (
        {"name": "VM Alert"},
        "components[0]: name 'VM Alert' must be lowercase letters, digits, '.', '_', '+', '-'",
    ),
    (
        {"homepage": "https://x"},
        "component 'vmalert': unknown key 'homepage' (allowed: name, license, source, files, version)",
    ),
]


@pytest.mark.parametrize(("override", "message"), BAD_COMPONENTS, ids=[m for _, m in BAD_COMPONENTS])
def test_bad_component_is_named(tmp_path: Path, override: dict, message: str) -> None:
    comp = url_component(**override)
    comp = {k: v for k, v in comp.items() if v is not None}
    path = make_catalog(tmp_path, [comp])
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    assert exc.value.obj == str(path)
    assert exc.value.reason == message


def test_kind_error_reads_as_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bundle" / "catalog").mkdir(parents=True)
    path = tmp_path / "bundle" / "catalog" / "debian.yaml"
    path.write_text(
        yaml.safe_dump(
            {"channel": "debian", "arch": "amd64", "components": [url_component(source={"kind": "ftp"})]}
        )
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CatalogError) as exc:
        load_catalog(Path("bundle/catalog/debian.yaml"))
    assert str(exc.value) == (
        "bundle/catalog/debian.yaml: component 'vmalert': source.kind 'ftp' "
        "is not one of url, deb, wheel, file, project"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("channel: [unclosed", "not valid YAML at line 1"),
        ("- a\n- b\n", "must be a mapping, not a list"),
        ("channel: t\narch: amd64\n", "missing 'components'"),
        ("channel: t\narch: amd64\ncomponents: []\n", "components must be a non-empty list"),
        (
            "channel: T!\narch: amd64\ncomponents: [x]\n",
            "channel 'T!' must be lowercase letters, digits, '.', '_', '-'",
        ),
        ("channel: t\narch: 64\ncomponents: [x]\n", "arch must be a non-empty string, not an integer"),
    ],
)
def test_bad_catalog_top_level(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    assert exc.value.reason.startswith(message), exc.value.reason


def test_duplicate_component(tmp_path: Path) -> None:
    path = make_catalog(tmp_path, [url_component(), url_component()])
    with pytest.raises(CatalogError, match="component 'vmalert': appears twice"):
        load_catalog(path)


def test_missing_catalog_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as exc:
        load_catalog(tmp_path / "nope.yaml")
    assert exc.value.reason.startswith("cannot read")


# --- lock ---------------------------------------------------------------------------------------


def offline_catalog(tmp_path: Path) -> Path:
    """A catalog whose lock needs no network: a sha256 url, a file, and a file:// checksum_url."""
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"vigil test payload\n")
    blob_sha = hashlib.sha256(blob.read_bytes()).hexdigest()
    sums = tmp_path / "sha256sums.txt"
    sums.write_text(f"{SHA_B}  other.tar.gz\n{SHA_A}  ./dist/tool-1.0.linux-amd64.tar.gz\n")
    return make_catalog(
        tmp_path,
        [
            url_component(name="zeta"),
            {
                "name": "alpha",
                "version": "2",
                "license": "MIT",
                "source": {"kind": "file", "path": "blob.bin", "sha256": blob_sha},
                "files": {"blob.bin": "share/blob.bin"},
            },
            {
                "name": "tool",
                "version": "1.0",
                "license": "Apache-2.0",
                "source": {
                    "kind": "url",
                    "url": "https://example.invalid/dist/tool-1.0.linux-amd64.tar.gz",
                    "checksum_url": sums.as_uri(),
                },
                "files": {"tool-1.0/tool": "bin/tool"},
            },
        ],
    )


def test_lock_is_deterministic_and_sorted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    path = offline_catalog(tmp_path)
    lock_path = lock_channel(path)
    assert lock_path == tmp_path / "test.lock.yaml"
    first = lock_path.read_bytes()
    lock_channel(path)
    assert lock_path.read_bytes() == first
    assert b"locked_at" not in first
    lock = load_lock(lock_path)
    assert [c.name for c in lock.components] == ["alpha", "tool", "zeta"]
    tool = lock.component("tool")
    assert tool.artifacts[0].sha256 == SHA_A  # read from the checksum file by basename
    assert tool.artifacts[0].checksum_url == (tmp_path / "sha256sums.txt").as_uri()
    alpha = lock.component("alpha")
    assert alpha.artifacts[0].size == len(b"vigil test payload\n")
    check_lock_current(load_catalog(path), lock)
    assert list(tmp_path.glob(".test.lock.yaml.*")) == []


def test_lock_honours_source_date_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764417600")
    lock = load_lock(lock_channel(offline_catalog(tmp_path)))
    assert lock.locked_at == "2025-11-29T12:00:00Z"


def test_lock_refuses_url_without_checksum_and_keeps_old_lock(tmp_path: Path) -> None:
    path = offline_catalog(tmp_path)
    lock_path = lock_channel(path)
    before = lock_path.read_bytes()
    bad = url_component(name="grafana", source={"kind": "url", "url": "https://example.invalid/g.tgz"})
    path = make_catalog(tmp_path, [bad])
    with pytest.raises(CatalogError) as exc:
        lock_channel(path)
    assert exc.value.reason == (
        "url source https://example.invalid/g.tgz has neither sha256 nor "
        "checksum_url; add the vendor's published sha256 to the catalog"
    )
    assert "component 'grafana'" in exc.value.obj
    assert lock_path.read_bytes() == before


def test_lock_refuses_file_with_wrong_sha(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"x")
    path = make_catalog(
        tmp_path,
        [
            {
                "name": "a",
                "version": "1",
                "license": "MIT",
                "source": {"kind": "file", "path": "blob.bin", "sha256": SHA_A},
                "files": {"blob.bin": "blob.bin"},
            }
        ],
    )
    with pytest.raises(CatalogError, match=r"file blob.bin: sha256 mismatch: expected aaaaaaaaaaaa…"):
        lock_channel(path)


def test_stale_lock_detected(tmp_path: Path) -> None:
    path = offline_catalog(tmp_path)
    lock = load_lock(lock_channel(path))
    path.write_text(path.read_text() + "\n# edited\n")
    with pytest.raises(CatalogError, match="stale: .* changed since it was locked"):
        check_lock_current(load_catalog(path), lock)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(lock_format=2), "lock_format 2 is not 1; re-run `vigil bundle lock`"),
        (
            lambda d: d["components"][0]["artifacts"][0].pop("sha256"),
            "component 'alpha': artifacts[0]: sha256 must be a non-empty string, not null",
        ),
        (
            lambda d: d["components"][0]["artifacts"][0].update(size="big"),
            "component 'alpha': artifacts[0]: size must be a non-negative integer, not 'big'",
        ),
        (
            lambda d: d["components"][0].update(kind="ftp"),
            "component 'alpha': kind 'ftp' is not one of url, deb, wheel, file, project",
        ),
        (
            lambda d: d["components"][2]["artifacts"][0].pop("url"),
            "component 'zeta': artifacts[0]: missing 'url'",
        ),
    ],
)
def test_bad_lock_is_named(tmp_path: Path, edit, message: str) -> None:
    lock_path = lock_channel(offline_catalog(tmp_path))
    doc = yaml.safe_load(lock_path.read_text())
    edit(doc)
    lock_path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CatalogError) as exc:
        load_lock(lock_path)
    assert exc.value.reason == message


def test_lock_wheel_urls_must_be_https(tmp_path: Path) -> None:
    lock_path = lock_channel(offline_catalog(tmp_path))
    doc = yaml.safe_load(lock_path.read_text())
    doc["components"][2]["kind"] = "wheel"
    doc["components"][2]["artifacts"][0]["url"] = "file:///opt/wheels/x.whl"
    lock_path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CatalogError, match="wheel url 'file:///opt/wheels/x.whl' must be https"):
        load_lock(lock_path)


# --- the committed debian lock ------------------------------------------------------------------


def test_committed_debian_lock_is_current() -> None:
    lock = load_lock(CATALOG_DIR / "debian.lock.yaml")
    check_lock_current(load_catalog(CATALOG_DIR / "debian.yaml"), lock)
    node = lock.component("prometheus-node-exporter")
    assert node.kind == "deb" and node.version == "1.5.0-1+b6"
    art = node.artifacts[0]
    assert art.size and art.sha256 and art.url and art.url.endswith("_amd64.deb")
    assert lock.component("prometheus-alertmanager").files_map == {
        "usr/bin/amtool": "bin/amtool",
        "usr/bin/prometheus-alertmanager": "bin/alertmanager",
    }


def test_committed_wheels_match_pyproject() -> None:
    """The locked wheel set was resolved from exactly pyproject's runtime dependencies."""
    raw = yaml.safe_load((CATALOG_DIR / "debian.lock.yaml").read_text())
    deps = next(c for c in raw["components"] if c["name"] == "vigil-deps")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert deps["requirements"] == project["dependencies"], "re-run `vigil bundle lock --channel debian`"
    assert deps["version"] == project["version"]
    lock = load_lock(CATALOG_DIR / "debian.lock.yaml")
    wheels = lock.component("vigil-deps").artifacts
    names = {a.name.lower().replace("_", "-") for a in wheels if a.name}
    for dep in project["dependencies"]:
        base = dep.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower()
        assert base.replace("_", "-") in names, base
    for a in wheels:
        assert a.url and a.url.startswith("https://files.pythonhosted.org/"), a.url
        assert a.filename.endswith(".whl") and a.sha256 and a.license


# --- upstream checksum files --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"{SHA_B}  other\n{SHA_A}  tool.tar.gz\n",
        f"{SHA_A} *tool.tar.gz\n",
        f"{SHA_A}  ./bin/tool.tar.gz\n",
        f"SHA256 (tool.tar.gz) = {SHA_A}\n",
        f"{SHA_A}\n",
        f"Package: x\nVersion: 1\nFilename: ./other.deb\nSHA256: {SHA_B}\n\n"
        f"Package: y\nFilename: ./tool.tar.gz\nSize: 3\nSHA256: {SHA_A}\n",
    ],
    ids=["sha256sum", "binary-mode", "with-dir", "bsd", "bare", "packages-index"],
)
def test_checksum_file_formats(text: str) -> None:
    assert sha256_from_checksum_file(text, "tool.tar.gz", source="sums") == SHA_A


def test_checksum_file_without_entry_or_conflicting() -> None:
    with pytest.raises(CatalogError, match="no sha256 for 'tool.tar.gz' in this checksum file"):
        sha256_from_checksum_file(f"{SHA_B}  other\n", "tool.tar.gz", source="sums")
    with pytest.raises(CatalogError, match="conflicting sha256 lines for 'tool.tar.gz'"):
        sha256_from_checksum_file(
            f"{SHA_A}  tool.tar.gz\n{SHA_B}  tool.tar.gz\n", "tool.tar.gz", source="sums"
        )


# --- the model: checks on documents, no I/O -----------------------------------------------------

# What vigil.bundle.catalog_model may import: the standard library's pure parts and the errors.
MODEL_IMPORTS = {
    "__future__",
    "re",
    "collections.abc",
    "dataclasses",
    "pathlib",
    "typing",
    "vigil.bundle.errors",
}
# Calls that read or write a file (Path's and the builtins').
IO_CALLS = {
    "open",
    "read_bytes",
    "read_text",
    "write_bytes",
    "write_text",
    "mkdir",
    "unlink",
    "touch",
    "rename",
    "replace",
    "iterdir",
    "glob",
    "rglob",
    "stat",
}


def io_problems(source: str) -> list[str]:
    """Imports outside MODEL_IMPORTS, and calls that read or write files, in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is None:  # from . import x
            names = ["." * node.level + a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + node.module]
        else:
            names = []
        out += [f"line {node.lineno}: imports {n}" for n in names if n not in MODEL_IMPORTS]
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in IO_CALLS or name in ("__import__", "import_module"):
                out.append(f"line {node.lineno}: calls {name}()")
    return out


def test_model_does_no_io() -> None:
    assert io_problems(Path(catalog_model.__file__).read_text()) == []


def test_io_check_catches_io() -> None:
    hostile = (
        "import yaml\nimport urllib.request\nfrom vigil.bundle.fetchers import _http\n"
        "from . import catalog\nimport subprocess as sp\n"
        "def f(p):\n    return p.read_bytes(), open(p), __import__('os')\n"
    )
    assert io_problems(hostile) == [
        "line 1: imports yaml",
        "line 2: imports urllib.request",
        "line 3: imports vigil.bundle.fetchers",
        "line 4: imports .catalog",
        "line 5: imports subprocess",
        "line 7: calls read_bytes()",
        "line 7: calls open()",
        "line 7: calls __import__()",
    ]


def catalog_doc(**top: object) -> dict[str, object]:
    doc: dict[str, object] = {"channel": "test", "arch": "amd64", "components": [url_component()]}
    doc.update(top)
    return doc


def test_catalog_document_parses_without_a_file(tmp_path: Path) -> None:
    where = tmp_path / "never-written.yaml"
    cat = parse_catalog(catalog_doc(), path=where, sha256=SHA_A)
    assert not where.exists()
    assert (cat.channel, cat.sha256, cat.lock_path) == ("test", SHA_A, tmp_path / "test.lock.yaml")
    (comp,) = cat.components
    assert comp.source == UrlSource(url="https://example.invalid/vmalert.tar.gz", sha256=SHA_A)
    with pytest.raises(CatalogError) as exc:
        parse_catalog(catalog_doc(arch=None), path=where, sha256=SHA_A, display="cat.yaml")
    assert (exc.value.obj, exc.value.reason) == ("cat.yaml", "arch must be a non-empty string, not null")


def lock_doc(catalog_sha256: str) -> dict[str, object]:
    return {
        "lock_format": 1,
        "channel": "test",
        "arch": "amd64",
        "catalog_sha256": catalog_sha256,
        "components": [
            {
                "name": "vmalert",
                "version": "1.0.0",
                "license": "Apache-2.0",
                "kind": "url",
                "artifacts": [
                    {
                        "filename": "vmalert.tar.gz",
                        "url": "https://example.invalid/vmalert.tar.gz",
                        "sha256": SHA_A,
                    }
                ],
                "files": {"vmalert-prod": "bin/vmalert"},
            }
        ],
    }


def test_lock_document_parses_and_is_checked_against_the_catalog_digest(tmp_path: Path) -> None:
    cat = parse_catalog(catalog_doc(), path=tmp_path / "test.yaml", sha256=SHA_A, display="test.yaml")
    lock = parse_lock(lock_doc(SHA_A), path=cat.lock_path, base_dir=tmp_path, display="test.lock.yaml")
    assert lock.component("vmalert").resolve_path("x") == (tmp_path / "x").resolve()
    check_lock_current(cat, lock)
    stale = parse_lock(lock_doc(SHA_B), path=cat.lock_path, base_dir=tmp_path, display="test.lock.yaml")
    with pytest.raises(CatalogError) as exc:
        check_lock_current(cat, stale)
    assert str(exc.value) == (
        "test.lock.yaml: stale: test.yaml changed since it was locked; re-run `vigil bundle lock`"
    )
