"""The exporters run on the target's system python3 >= 3.9 with the standard library only.

These checks read the source; the exporters' tests run under a real Python 3.9 in
tests/integration/test_host_python39.py.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3] / "exporters"
SOURCES = sorted(ROOT.rglob("*.py"))

#: 3.10+ names and idioms that parse under 3.9 but fail when run there
NEWER_APIS = [
    (r"\bdatetime\.UTC\b|from datetime import [^\n]*\bUTC\b", "datetime.UTC (3.11)"),
    (r"\bzip\([^)]*strict\s*=", "zip(strict=) (3.10)"),
    (r"\bimport tomllib\b|\bfrom tomllib\b", "tomllib (3.11)"),
    (r"\bdataclass\([^)]*(kw_only|slots)\s*=", "dataclass(kw_only=/slots=) (3.10)"),
    (r"\bTypeAlias\b|\bParamSpec\b|\bTypeGuard\b|\bSelf\b|\bStrEnum\b", "typing/enum names (3.10+)"),
    (r"\bExceptionGroup\b|\bexcept\*", "exception groups (3.11)"),
    (r"\bitertools\.pairwise\b|\bpairwise\(", "itertools.pairwise (3.10)"),
    (r"\bint\.bit_count\b|\.bit_count\(\)", "int.bit_count (3.10)"),
    (r"\baiter\(|\banext\(", "aiter/anext (3.10)"),
    (r"\basyncio\.TaskGroup\b|\basyncio\.timeout\(", "asyncio 3.11 APIs"),
]


def test_sources_found():
    assert len(SOURCES) >= 10


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_parses_as_python_3_9(path):
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src, filename=str(path), feature_version=(3, 9))
    in_annotation: set[int] = set()
    for node in ast.walk(tree):
        anns = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            anns.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for ann in anns:
            in_annotation.update(id(n) for n in ast.walk(ann))
    for node in ast.walk(tree):
        # `X | Y` outside annotations needs 3.10 at run time (annotations are strings here)
        if id(node) in in_annotation:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            for side in (node.left, node.right):
                assert not (
                    isinstance(side, ast.Name)
                    and side.id in {"str", "int", "float", "None", "bytes", "list", "dict", "tuple"}
                ), f"{path}:{node.lineno}: `X | Y` type union at run time"
    assert (
        "from __future__ import annotations" in src
        or not src.strip()
        or path.name == "__init__.py"
        and "annotations" in src
    ), f"{path}: add `from __future__ import annotations`"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_newer_stdlib_apis(path):
    src = path.read_text(encoding="utf-8")
    found = [why for pattern, why in NEWER_APIS if re.search(pattern, src)]
    assert not found, f"{path}: {', '.join(found)}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_standard_library_only(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stdlib = set(sys.stdlib_module_names)
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            ours = name == "vigil.exporters" or name.startswith("vigil.exporters.")
            assert top in stdlib or top == "__future__" or ours, f"{path}: imports {name}"


def test_checks_catch_what_they_look_for(tmp_path):
    """The compat checks must fail on the things they exist for."""
    with pytest.raises(SyntaxError):
        ast.parse("match x:\n    case 1:\n        pass\n", feature_version=(3, 9))
    assert any(re.search(p, "zip(a, b, strict=True)") for p, _ in NEWER_APIS)
    assert any(re.search(p, "from datetime import UTC") for p, _ in NEWER_APIS)
    bad = tmp_path / "bad.py"
    bad.write_text("from __future__ import annotations\nAlias = int | None\n")
    with pytest.raises(AssertionError, match="type union at run time"):
        test_parses_as_python_3_9(bad)


def test_wheel_builds_with_package_and_scripts(tmp_path):
    from vigil.bundle.fetchers._project import build_project_wheel

    whl = build_project_wheel(ROOT, tmp_path)
    assert whl.name.startswith("vigil_exporters-0.1.0-py3-none-any")
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        ep = next(n for n in names if n.endswith("entry_points.txt"))
        entry = z.read(ep).decode()
    assert {
        "vigil/exporters/__init__.py",
        "vigil/exporters/gpusim/sim.py",
        "vigil/exporters/slurm/collector.py",
        "vigil/exporters/gpusim/faults.py",
        "vigil/exporters/py.typed",
    } <= names
    assert "vigil/__init__.py" not in names  # a namespace package, shared with the admin-side wheel
    assert not any(n.startswith("exporters/pyproject") or "__pycache__" in n for n in names)
    assert "vigil-gpusim = vigil.exporters.gpusim.__main__:main" in entry
    assert "vigil-slurm-exporter = vigil.exporters.slurm.__main__:main" in entry
    # the unpacked wheel runs on a bare python3 -m (how the roles start it; no pip on the nodes)
    cp = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(whl)!r}); "
            "import runpy; sys.argv=['x','--help']; runpy.run_module('vigil.exporters.gpusim', "
            "run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "usage: vigil-gpusim" in cp.stdout, cp.stderr
