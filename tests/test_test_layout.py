"""The test tree's own rules: pytest imports test files by basename (rootdir-relative, no
`__init__.py`), so two test files of one name in different folders break collection with
"import file mismatch" — and only when both land in one worker; and no file imports a test
module (what files share lives in kits); and nothing reaches inside the runtime but through
its one door, `lineup_runtime_lite.internals`."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineup_runtime_lite import internals

TESTS = Path(__file__).resolve().parent


def test_every_test_file_has_a_basename_of_its_own() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        rel = path.relative_to(TESTS)
        if any(part in {"apps", "fixtures", "node_modules"} for part in rel.parts):
            continue
        seen[path.name].append(str(rel))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def _sources() -> Iterator[Path]:
    for root in (TESTS, TESTS.parent / "benchmarks"):
        for path in sorted(root.rglob("*.py")):
            if "node_modules" not in path.parts:
                yield path


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
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        for line, module in _imported_modules(tree):
            if module.startswith(("tests.", "benchmarks.")) and module.rsplit(".", 1)[
                -1
            ].startswith("test_"):
                found.append(f"{path.relative_to(TESTS.parent)}:{line}: {module}")
    assert found == []


#: A reach past a runtime's public face: its `_engine` or `_core` attribute.
ENGINE_REACH = re.compile(r"\._(?:engine|core)\b")


def test_the_suite_reaches_inside_the_runtime_only_through_its_one_door() -> None:
    """Tests and benchmarks reach the engine with `lineup_runtime_lite.internals.engine_of`,
    never through a runtime's `_engine` or `_core` attribute (in code, strings or comments),
    and import no private runtime module or name: what they need inside comes from
    `lineup_runtime_lite.internals` (for the runtime's own tests; no stability promise), so a
    change inside the runtime that the tests follow touches that one file."""
    reaches, private = [], []
    for path in _sources():
        text = path.read_text()
        rel = path.relative_to(TESTS.parent)
        reaches += [
            f"{rel}:{n}" for n, line in enumerate(text.splitlines(), 1) if ENGINE_REACH.search(line)
        ]
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                modules, names = [alias.name for alias in node.names], []
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "lineup_runtime_lite" and (
                    any(part.startswith("_") for part in parts[1:])
                    or any(name.startswith("_") for name in names)
                ):
                    private.append(f"{rel}:{node.lineno}: {module} {names}")
    assert reaches == []
    assert private == []


def test_the_door_resolves_every_name_it_lists() -> None:
    for name in internals.__all__:
        assert getattr(internals, name) is not None, name
    with pytest.raises(AttributeError):
        internals.nothing_here  # noqa: B018
