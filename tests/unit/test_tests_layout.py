"""The test tree's own layering: the fast part stands alone.

Unit tests import the code under test, tests/factories.py and tests/helpers/ — never a module of
tests/integration or tests/lab (their fixtures build bundles and boot hosts). What both need lives in
tests/helpers/, which imports no test directory at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def offenders(folder: Path, banned: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{folder.name}/{path.relative_to(folder)} imports {name}"
        for path in folder.rglob("*.py")
        for name in imported_modules(path)
        if name in banned or name.startswith(tuple(b + "." for b in banned))
    )


def test_unit_tests_import_no_integration_or_lab_module() -> None:
    assert offenders(TESTS / "unit", ("tests.integration", "tests.lab")) == []


def test_shared_helpers_import_no_test_directory() -> None:
    assert offenders(TESTS / "helpers", ("tests.unit", "tests.integration", "tests.lab")) == []


def test_the_check_finds_an_offender(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "from tests.integration.test_roles_config import components\nimport tests.lab.labhttp as h\n"
    )
    assert offenders(tmp_path, ("tests.integration", "tests.lab")) == [
        f"{tmp_path.name}/test_x.py imports tests.integration.test_roles_config",
        f"{tmp_path.name}/test_x.py imports tests.lab.labhttp",
    ]


def test_every_test_module_has_its_own_name() -> None:
    """pytest imports a test module of a folder without __init__.py by its file name: two files of
    one name stop the whole run at collection (`import file mismatch`)."""
    seen: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
