"""The test tree's own rules: pytest imports test files by basename (rootdir-relative, no
`__init__.py`), so two test files of one name in different folders break collection with
"import file mismatch" — and only when both land in one worker; and no file imports a test
module (what files share lives in kits)."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_file_has_a_basename_of_its_own() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        rel = path.relative_to(TESTS)
        if any(part in {"apps", "fixtures", "node_modules"} for part in rel.parts):
            continue
        seen[path.name].append(str(rel))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def _imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every module an `import` or `from ... import` names, with its line: for
    `from a.b import c`, both `a.b` and `a.b.c` (c may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def test_no_test_module_is_imported_by_another_file() -> None:
    """Helpers, fixtures, constants and Hypothesis models two files share live in a kit
    (`*_kit.py` beside them) or a `conftest.py`, never in a `test_*` module another file
    imports: importing one runs its module body twice under another name and couples a
    test to another test's file."""
    found = []
    for root in (TESTS, TESTS.parent / "benchmarks"):
        for path in sorted(root.rglob("*.py")):
            if "node_modules" in path.parts:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for line, module in _imported_modules(tree):
                if module.startswith(("tests.", "benchmarks.")) and module.rsplit(".", 1)[
                    -1
                ].startswith("test_"):
                    found.append(f"{path.relative_to(TESTS.parent)}:{line}: {module}")
    assert found == []
