"""The runtime's shape (issue 12), checked on its source: facts, pure transitions, drivers.

- every SQL statement lives in `lineup_runtime_lite/store/`;
- the transitions (and the decisions they return) import nothing that does IO, reads a
  clock or draws randomness;
- there is no import circle anywhere in `lineup_runtime_lite` (TYPE_CHECKING imports count).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lineup_runtime_lite

PACKAGE = Path(lineup_runtime_lite.__file__).parent
SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|BEGIN|COMMIT|ROLLBACK|"
    r"SAVEPOINT|RELEASE)\b"
)
#: The pure modules and the only imports they may make.
PURE = {
    "transitions.py",
    "decisions.py",
    "pomodoro.py",
    "handlers.py",
    "store/records.py",
}
PURE_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "json",
    "typing",
    "lineup_runtime_lite.clock",  # format_ts only (checked below)
    "lineup_runtime_lite.decisions",
    "lineup_runtime_lite.handlers",
    "lineup_runtime_lite.install",  # the Tool record
    "lineup_runtime_lite.messages",
    "lineup_runtime_lite.store.facts",  # the port type (handlers read through it)
    "lineup_runtime_lite.store.records",
    "lineup_runtime_lite.transitions",
    "lineup_sdk.context",
    "lineup_sdk.errors",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path) -> set[str]:
    """Modules imported at module level (TYPE_CHECKING blocks included), not in functions."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(getattr(node, "orelse", []))

    visit(tree.body)
    return found


def test_no_sql_outside_the_store() -> None:
    offenders = []
    for name, path in _modules().items():
        if name.startswith("lineup_runtime_lite.store"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.match(node.value)
            ):
                offenders.append(f"{path.name}:{node.lineno}: {node.value[:40]!r}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany"):
                offenders.append(f"{path.name}:{node.lineno}: .{node.attr}(")
    assert offenders == []


def test_the_check_sees_sql() -> None:
    assert SQL.match("SELECT 1") and SQL.match("  UPDATE calls SET")
    assert not SQL.match("select the first") and not SQL.match("Selected")


def test_transitions_do_no_io() -> None:
    for rel in sorted(PURE):
        path = PACKAGE / rel
        extra = {
            m
            for m in _imports(path)
            if m not in PURE_IMPORTS and not any(m.startswith(p + ".") for p in PURE_IMPORTS)
        }
        assert extra == set(), (rel, extra)
        source = path.read_text()
        for banned in ("time.", "secrets.", "random.", "datetime.now", "open(", "os."):
            assert banned not in source, (rel, banned)


def test_the_purity_check_sees_an_io_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import sqlite3\nfrom lineup_runtime_lite.decisions import X\n")
    found = _imports(tmp_path / "m.py")
    assert "sqlite3" in found and "sqlite3" not in PURE_IMPORTS


def test_no_import_circle_in_the_runtime() -> None:
    modules = _modules()
    graph = {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    # importing `a.b.c` runs the package `a.b` first (its __init__ and what that imports),
    # unless the importer is inside `a.b` already; the root package is loaded before all
    for name in graph:
        for target in list(graph[name]):
            parts = target.split(".")
            for n in range(2, len(parts)):
                parent = ".".join(parts[:n])
                if parent in modules and not name.startswith(parent + "."):
                    graph[name].add(parent)
    # a package's __init__ importing its own submodules is not a circle through them
    for name in graph:
        graph[name] = {m for m in graph[name] if not m.startswith(name + ".") and m != name}
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError(" -> ".join(cycle))
            if nxt not in seen:
                visit(nxt)
        stack.pop()
        seen[node] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name)


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import b\n"
    )
    assert _imports(tmp_path / "a.py") == {"typing", "typing.TYPE_CHECKING", "b"}
