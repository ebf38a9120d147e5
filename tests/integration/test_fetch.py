"""Fetchers against real things: a local HTTP server, apt, the package index, setuptools."""

from __future__ import annotations

import hashlib
import http.server
import importlib.metadata
import io
import os
import subprocess
import sys
import tarfile
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from vigil.bundle.catalog import load_lock, lock_channel
from vigil.bundle.errors import CatalogError, FetchError
from vigil.bundle.fetchers import _project, build_project_wheel, fetch_component
from vigil.bundle.fetchers._extract import extract_tar_stream
from vigil.bundle.fetchers._http import _HttpsOnlyRedirects
from vigil.bundle.fetchers._pip import clean_pip_env
from vigil.bundle.fetchers._project import unmet_build_requirements

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tar_gz(members: dict[str, tuple[bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, (data, mode) in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Server:
    """Serves files from a directory on 127.0.0.1 and counts requests per path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits: dict[str, int] = {}
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):  # type: ignore[no-untyped-def]
                super().__init__(*a, directory=str(root), **kw)

            def do_GET(self) -> None:
                outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                super().do_GET()

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def put(self, name: str, data: bytes) -> str:
        (self.root / name).write_bytes(data)
        return self.url(name)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "www"
    root.mkdir()
    s = Server(root)
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Downloads from real upstreams are cached once per session (or under $VIGIL_CACHE)."""
    env = os.environ.get("VIGIL_CACHE")
    return Path(env) if env else tmp_path_factory.mktemp("cache")


def catalog(tmp_path: Path, components: list[dict], arch: str = "amd64") -> Path:
    path = tmp_path / "it.yaml"
    path.write_text(yaml.safe_dump({"channel": "it", "arch": arch, "components": components}))
    return path


def locked(tmp_path: Path, components: list[dict], name: str):  # type: ignore[no-untyped-def]
    return load_lock(lock_channel(catalog(tmp_path, components))).component(name)


def cache_files(cache: Path) -> list[str]:
    d = cache / "sha256"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


# --- url ----------------------------------------------------------------------------------------


def test_url_good_checksum_stages_file(tmp_path: Path, server: Server) -> None:
    data = b"#!/bin/sh\necho vmctl\n"
    url = server.put("vmctl", data)
    comp = locked(
        tmp_path,
        [
            {
                "name": "tools",
                "version": "1",
                "license": "Apache-2.0",
                "source": {"kind": "url", "url": url, "sha256": sha(data)},
                "files": {"vmctl": "bin/vmctl"},
            }
        ],
        "tools",
    )
    seen: list[tuple[int, int | None]] = []
    staged = fetch_component(
        comp, tmp_path / "cache", tmp_path / "stage", progress=lambda d, t: seen.append((d, t))
    )
    assert len(staged) == 1
    s = staged[0]
    assert s.path == "components/tools/bin/vmctl"
    assert s.source == (tmp_path / "stage" / s.path).resolve()
    assert s.source.read_bytes() == data
    assert (s.size, s.sha256, s.mode) == (len(data), sha(data), 0o755)
    assert (s.component, s.version, s.license) == ("tools", "1", "Apache-2.0")
    assert (s.upstream_url, s.upstream_sha256) == (url, sha(data))
    assert seen and seen[-1] == (len(data), len(data))
    assert cache_files(tmp_path / "cache") == [sha(data)]


def test_url_bad_checksum_names_both_and_caches_nothing(tmp_path: Path, server: Server) -> None:
    data = b"tampered bytes"
    url = server.put("alertmanager.tar.gz", data)
    expected = sha(b"the real thing")
    comp = locked(
        tmp_path,
        [
            {
                "name": "am",
                "version": "1",
                "license": "Apache-2.0",
                "source": {"kind": "url", "url": url, "sha256": expected},
                "files": {"am/alertmanager": "bin/alertmanager"},
            }
        ],
        "am",
    )
    with pytest.raises(FetchError) as exc:
        fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert exc.value.obj == url
    assert exc.value.reason == f"sha256 mismatch: expected {expected[:12]}…, got {sha(data)[:12]}…"
    assert list((tmp_path / "cache" / "sha256").iterdir()) == []
    assert not (tmp_path / "stage" / "components" / "am" / "bin").exists()


def test_url_checksum_file_and_tar_members(tmp_path: Path, server: Server) -> None:
    archive = tar_gz(
        {
            "node_exporter-1.8.2.linux-amd64/node_exporter": (b"ELF exporter", 0o755),
            "node_exporter-1.8.2.linux-amd64/LICENSE": (b"Apache", 0o644),
            "node_exporter-1.8.2.linux-amd64/NOTICE": (b"notice", 0o644),
        }
    )
    url = server.put("node_exporter-1.8.2.linux-amd64.tar.gz", archive)
    sums = server.put(
        "sha256sums.txt",
        f"{'0' * 64}  node_exporter-1.8.2.darwin-amd64.tar.gz\n"
        f"{sha(archive)}  node_exporter-1.8.2.linux-amd64.tar.gz\n".encode(),
    )
    comp = locked(
        tmp_path,
        [
            {
                "name": "node-exporter",
                "version": "1.8.2",
                "license": "Apache-2.0",
                "source": {"kind": "url", "url": url, "checksum_url": sums},
                "files": {
                    "node_exporter-1.8.2.linux-amd64/node_exporter": "bin/node_exporter",
                    "node_exporter-1.8.2.linux-amd64/LICENSE": "share/LICENSE",
                },
            }
        ],
        "node-exporter",
    )
    assert comp.artifacts[0].sha256 == sha(archive)
    staged = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert [(s.path, s.mode) for s in staged] == [
        ("components/node-exporter/bin/node_exporter", 0o755),
        ("components/node-exporter/share/LICENSE", 0o644),
    ]
    assert staged[0].source.read_bytes() == b"ELF exporter"
    assert staged[0].sha256 == sha(b"ELF exporter") and staged[0].upstream_sha256 == sha(archive)
    assert not list((tmp_path / "stage").rglob("NOTICE"))


def test_url_missing_member_is_named(tmp_path: Path, server: Server) -> None:
    archive = tar_gz({"am/amtool": (b"x", 0o755)})
    url = server.put("am.tar.gz", archive)
    comp = locked(
        tmp_path,
        [
            {
                "name": "am",
                "version": "1",
                "license": "Apache-2.0",
                "source": {"kind": "url", "url": url, "sha256": sha(archive)},
                "files": {"am/alertmanager": "bin/alertmanager"},
            }
        ],
        "am",
    )
    with pytest.raises(FetchError, match="am: am.tar.gz: no member 'am/alertmanager' in the source"):
        fetch_component(comp, tmp_path / "cache", tmp_path / "stage")


def test_cache_hit_is_rehashed(tmp_path: Path, server: Server) -> None:
    data = b"vmbackup binary"
    url = server.put("vmbackup", data)
    comp = locked(
        tmp_path,
        [
            {
                "name": "vm",
                "version": "1",
                "license": "Apache-2.0",
                "source": {"kind": "url", "url": url, "sha256": sha(data)},
                "files": {"vmbackup": "bin/vmbackup"},
            }
        ],
        "vm",
    )
    cache = tmp_path / "cache"
    fetch_component(comp, cache, tmp_path / "s1")
    fetch_component(comp, cache, tmp_path / "s2")
    assert server.hits["/vmbackup"] == 1  # second time from the cache
    (cache / "sha256" / sha(data)).write_bytes(b"rotten bytes on disk")
    staged = fetch_component(comp, cache, tmp_path / "s3")
    assert server.hits["/vmbackup"] == 2  # the corrupt entry was noticed and fetched again
    assert staged[0].source.read_bytes() == data
    assert (cache / "sha256" / sha(data)).read_bytes() == data


def test_https_to_http_redirect_refused() -> None:
    handler = _HttpsOnlyRedirects()
    req = urllib.request.Request("https://github.com/x/releases/download/v1/a.tar.gz")
    with pytest.raises(FetchError, match="refusing redirect from https to http"):
        handler.redirect_request(req, io.BytesIO(), 302, "Found", {}, "http://evil.invalid/a.tar.gz")
    ok = handler.redirect_request(req, io.BytesIO(), 302, "Found", {}, "https://objects.example/a")
    assert ok is not None and ok.full_url == "https://objects.example/a"


@pytest.mark.parametrize(
    ("member", "kind", "message"),
    [
        ("../evil", tarfile.REGTYPE, "refusing member '../evil': '..' in path"),
        ("/etc/passwd", tarfile.REGTYPE, "refusing member '/etc/passwd': absolute path"),
        ("bin/tool", tarfile.SYMTYPE, "refusing member 'bin/tool': it is a link (to '/etc/shadow')"),
        ("bin/tool", tarfile.CHRTYPE, "refusing member 'bin/tool': not a regular file"),
    ],
)
def test_hostile_archive_members_refused(tmp_path: Path, member: str, kind: bytes, message: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(member)
        info.type = kind
        if kind == tarfile.SYMTYPE:
            info.linkname = "/etc/shadow"
        tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    buf.seek(0)
    with pytest.raises(FetchError) as exc:
        extract_tar_stream(buf, {"bin/tool": "bin/tool"}, tmp_path / "out", obj="t")
    assert exc.value.reason == message
    assert not (tmp_path / "out" / "bin" / "tool").exists()


def test_zip_members(tmp_path: Path, server: Server) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("exporter/redfish_exporter")
        info.external_attr = (0o100755) << 16
        zf.writestr(info, b"binary")
        zf.writestr("exporter/README.md", b"readme")
    data = buf.getvalue()
    url = server.put("redfish.zip", data)
    comp = locked(
        tmp_path,
        [
            {
                "name": "redfish",
                "version": "1",
                "license": "MIT",
                "source": {"kind": "url", "url": url, "sha256": sha(data)},
                "files": {"exporter/": "opt/"},
            }
        ],
        "redfish",
    )
    staged = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert [(s.path, s.mode) for s in staged] == [
        ("components/redfish/opt/README.md", 0o644),
        ("components/redfish/opt/redfish_exporter", 0o755),
    ]


def test_file_source(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_bytes(b"groups: []\n")
    comp = locked(
        tmp_path,
        [
            {
                "name": "rules",
                "version": "1",
                "license": "Apache-2.0",
                "source": {"kind": "file", "path": "rules.yml", "sha256": sha(b"groups: []\n")},
                "files": {"rules.yml": "etc/rules.yml"},
            }
        ],
        "rules",
    )
    (s,) = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert (s.path, s.mode, s.size) == ("components/rules/etc/rules.yml", 0o644, 11)
    assert s.upstream_url == (tmp_path / "rules.yml").as_uri()
    (tmp_path / "rules.yml").write_bytes(b"groups: {}\n")  # same size, other bytes
    with pytest.raises(FetchError, match="sha256 mismatch"):
        fetch_component(comp, tmp_path / "cache2", tmp_path / "stage2")


# --- deb ----------------------------------------------------------------------------------------

NODE = {
    "name": "prometheus-node-exporter",
    "version": "1.5.0-1+b6",
    "license": "Apache-2.0",
    "source": {"kind": "deb", "package": "prometheus-node-exporter", "version": "1.5.0-1+b6"},
    "files": {"usr/bin/prometheus-node-exporter": "bin/node_exporter"},
}


def test_deb_lock_fetch_extract(tmp_path: Path, shared_cache: Path) -> None:
    comp = locked(tmp_path, [NODE], "prometheus-node-exporter")
    (art,) = comp.artifacts
    assert art.filename == "prometheus-node-exporter_1.5.0-1+b6_amd64.deb"
    assert art.url and art.url.startswith("http") and art.url.endswith("_amd64.deb")
    assert art.size and art.size > 1_000_000 and art.sha256 and len(art.sha256) == 64
    (s,) = fetch_component(comp, shared_cache, tmp_path / "stage")
    assert s.path == "components/prometheus-node-exporter/bin/node_exporter"
    assert s.mode == 0o755 and s.size == s.source.stat().st_size > 1_000_000
    assert s.sha256 == sha(s.source.read_bytes())
    assert s.upstream_sha256 == art.sha256 and s.upstream_url == art.url
    assert s.source.read_bytes()[:4] == b"\x7fELF"
    assert (shared_cache / "sha256" / art.sha256).stat().st_size == art.size


def test_deb_unknown_version_says_apt_get_update(tmp_path: Path) -> None:
    bad = dict(NODE, source={"kind": "deb", "package": "prometheus-node-exporter", "version": "0.0.1-nosuch"})
    with pytest.raises(CatalogError) as exc:
        lock_channel(catalog(tmp_path, [bad]))
    assert exc.value.reason == (
        "apt has no prometheus-node-exporter:amd64=0.0.1-nosuch (run `apt-get update` first, and "
        "check the version with `apt-cache policy prometheus-node-exporter`)"
    )


def test_deb_size_lie_in_lock_refused(tmp_path: Path, shared_cache: Path) -> None:
    lock_path = lock_channel(catalog(tmp_path, [NODE]))
    doc = yaml.safe_load(lock_path.read_text())
    art = doc["components"][0]["artifacts"][0]
    art["sha256"] = "f" * 64  # not in the cache: forces a download, which must not match
    lock_path.write_text(yaml.safe_dump(doc))
    comp = load_lock(lock_path).component("prometheus-node-exporter")
    cache = tmp_path / "cache"
    with pytest.raises(FetchError, match="sha256 mismatch: expected ffffffffffff…, got "):
        fetch_component(comp, cache, tmp_path / "stage")
    assert cache_files(cache) == []


# --- wheel --------------------------------------------------------------------------------------


def test_wheel_resolve_and_fetch(tmp_path: Path, shared_cache: Path) -> None:
    comp = locked(
        tmp_path,
        [
            {
                "name": "pydeps",
                "version": "1",
                "license": "NOASSERTION",
                "source": {
                    "kind": "wheel",
                    "requirements": ["packaging"],
                    "python_version": "3.11",
                    "platform": "manylinux2014_x86_64",
                },
                "files": {"*.whl": "wheels/"},
            }
        ],
        "pydeps",
    )
    (art,) = comp.artifacts
    assert art.filename.startswith("packaging-") and art.filename.endswith("-py3-none-any.whl")
    assert art.url and art.url.startswith("https://files.pythonhosted.org/")
    assert art.name == "packaging" and art.license and art.sha256
    (s,) = fetch_component(comp, shared_cache, tmp_path / "stage")
    assert s.path == f"components/pydeps/wheels/{art.filename}"
    assert s.sha256 == art.sha256 == s.upstream_sha256 and s.mode == 0o644
    assert s.version == art.version and s.license == art.license
    with zipfile.ZipFile(s.source) as zf:
        assert any(n.endswith(".dist-info/METADATA") for n in zf.namelist())


# --- project ------------------------------------------------------------------------------------


def test_project_builds_vigil_wheel(tmp_path: Path) -> None:
    wheel = build_project_wheel(REPO, tmp_path / "out")
    assert wheel.name == "vigil-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {
        "vigil/bundle/catalog.py",
        "vigil/bundle/fetchers/__init__.py",
        "vigil/bundle/catalog/debian.lock.yaml",
        "vigil/basics/errors.py",
        "vigil/installer/cli/__init__.py",
        "vigil/installer/ops/__init__.py",
    } <= names
    # one namespace: nothing at the top level but vigil/ (no __init__.py: shared with vigil.exporters)
    assert {n.split("/")[0] for n in names} == {"vigil", "vigil-0.1.0.dist-info"}
    assert "vigil/__init__.py" not in names


def test_project_wheel_is_reproducible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    (proj / "tinypkg").mkdir(parents=True)
    (proj / "tinypkg" / "__init__.py").write_text("VALUE = 1\n")
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypkg"\nversion = "1.0"\n'
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764417600")
    a = build_project_wheel(proj, tmp_path / "a")
    os.utime(proj / "tinypkg" / "__init__.py", (1, 1))  # source mtimes must not matter
    b = build_project_wheel(proj, tmp_path / "b")
    assert a.name == b.name == "tinypkg-1.0-py3-none-any.whl"
    assert a.read_bytes() == b.read_bytes()
    assert not (proj / "build").exists()  # the source tree is left as it was


def _pep639_project(tmp_path: Path) -> Path:
    """A project whose metadata only setuptools >= 77 can write (a PEP 639 licence expression)."""
    proj = tmp_path / "proj"
    (proj / "tinypkg").mkdir(parents=True)
    (proj / "tinypkg" / "__init__.py").write_text("")
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77", "wheel"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypkg"\nversion = "3.0"\nlicense = "MIT"\n'
    )
    return proj


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python3 -m venv`, nothing more: the setuptools Python's ensurepip brings (65.5 on 3.11)."""
    venv = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=clean_pip_env())
    return venv / "bin" / "python"


def test_an_old_setuptools_in_a_plain_venv_builds_with_isolation(
    tmp_path: Path, plain_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = _pep639_project(tmp_path)
    assert unmet_build_requirements(proj, str(plain_venv))[0][0] == "setuptools>=77"
    monkeypatch.setattr(sys, "executable", str(plain_venv))  # the interpreter `vigil` runs on
    wheel = build_project_wheel(proj, tmp_path / "out")
    assert wheel.name == "tinypkg-3.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read("tinypkg-3.0.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in meta


def test_an_old_setuptools_and_no_index_says_what_to_install(
    tmp_path: Path, plain_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = _pep639_project(tmp_path)
    empty = tmp_path / "empty-index"
    empty.mkdir()
    monkeypatch.setattr(sys, "executable", str(plain_venv))
    monkeypatch.setattr(_project, "DEFAULT_INDEX", empty.as_uri())  # a host with no index
    with pytest.raises(FetchError) as err:
        build_project_wheel(proj, tmp_path / "out")
    msg = str(err.value)
    assert "cannot build the wheel offline (setuptools 65." in msg, msg
    assert f"`{plain_venv} -m pip install 'setuptools>=77' 'wheel'`" in msg, msg
    assert "No matching distribution found for setuptools>=77" in msg, msg
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_build_requirements_judged_by_the_building_interpreter(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        "[build-system]\nrequires = ["
        '"setuptools>=1", "setuptools>=9999", "no-such-dist-vigil", "x[extra]>=1; python_version>\'3\'"]\n'
    )
    assert unmet_build_requirements(proj) == [
        ("setuptools>=9999", importlib.metadata.version("setuptools")),
        ("no-such-dist-vigil", None),
    ]
    (proj / "pyproject.toml").write_text("not toml [")
    assert unmet_build_requirements(proj) == []


def test_project_component_stages_wheel(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "tinypkg").mkdir(parents=True)
    (proj / "tinypkg" / "__init__.py").write_text("")
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypkg"\nversion = "2.0"\n'
    )
    comp = locked(
        tmp_path,
        [
            {
                "name": "tiny",
                "license": "MIT",
                "source": {"kind": "project", "path": "proj"},
                "files": {"*.whl": "wheels/"},
            }
        ],
        "tiny",
    )
    assert comp.version == "2.0" and comp.artifacts[0].sha256 is None
    (s,) = fetch_component(comp, tmp_path / "cache", tmp_path / "stage")
    assert s.path == "components/tiny/wheels/tinypkg-2.0-py3-none-any.whl"
    assert s.sha256 == sha(s.source.read_bytes()) and s.version == "2.0"
