"""Error codes: unique, snake_case, documented in the error reference
(`docs/reference/errors.md`), and the only codes the packages raise or report."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineup_sdk.codes import CODES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lineup_sdk", "lineup_build", "lineup_runtime_lite")
SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*\Z")
TABLE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)
#: Constructors whose first argument (or `code=`) is a stable code. Subclasses found in
#: the packages are added below. `ToolError` is excluded: its codes are the MiniApp's own
#: (`app.<code>`).
CODE_TAKERS = {"LineupError", "DeclarationError", "Diagnostic", "Problem"}


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_public_table_is_the_implementation() -> None:
    import importlib

    assert CODES is importlib.import_module("lineup_sdk._codes").CODES


def test_only_the_sdk_imports_the_private_codes_module() -> None:
    """Other packages (and the tests) use the public `lineup_sdk.codes`."""
    offenders = []
    for path in [*_sources(), *sorted((ROOT / "tests").rglob("*.py"))]:
        if path.is_relative_to(ROOT / "lineup_sdk"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n == "lineup_sdk._codes" for n in names) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "lineup_sdk"
                and any(a.name == "_codes" for a in node.names)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    assert offenders == [], offenders


def test_codes_are_unique_in_the_source() -> None:
    tree = ast.parse((ROOT / "lineup_sdk/_codes.py").read_text())
    (table,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "CODES"
    ]
    assert isinstance(table, ast.Dict)
    keys = [k.value for k in table.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    assert len(keys) == len(table.keys)
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert duplicates == [], "a dict literal silently keeps the last duplicate"


@pytest.mark.parametrize("code", sorted(CODES))
def test_code_is_snake_case_with_meaning_and_fix(code: str) -> None:
    assert SNAKE.match(code), code
    meaning, fix = CODES[code]
    assert meaning.strip() and fix.strip()


def _error_table_rows(readme: str) -> list[str]:
    """First-column codes of every table of a page that documents error codes."""
    rows: list[str] = []
    table: list[str] = []
    for line in [*readme.splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        firsts = TABLE_ROW.findall("\n".join(table))
        if any(f in CODES for f in firsts):  # an error table, not e.g. the package table
            rows.extend(firsts)
        table = []
    return rows


def test_the_error_reference_lists_exactly_the_codes() -> None:
    rows = _error_table_rows((ROOT / "docs" / "reference" / "errors.md").read_text())
    assert sorted(set(CODES) - set(rows)) == [], "codes missing from the error reference"
    assert sorted(set(rows) - set(CODES)) == [], "error reference rows that are not codes"
    assert sorted({r for r in rows if rows.count(r) > 1}) == [], "codes documented twice"


def _code_takers(trees: list[ast.Module]) -> set[str]:
    takers = set(CODE_TAKERS)
    changed = True
    while changed:  # subclasses of subclasses
        changed = False
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in takers:
                    bases = {
                        b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                        for b in node.bases
                    }
                    if bases & takers:
                        takers.add(node.name)
                        changed = True
    return takers - {"ToolError"}


def _literal_codes(
    path: Path, tree: ast.Module, takers: set[str]
) -> Iterator[tuple[str, int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in takers:
                continue
            args = [a for a in node.args[:1]] + [k.value for k in node.keywords if k.arg == "code"]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node.lineno, arg.value
        elif isinstance(node, ast.Dict):  # problem records: {"code": "...", ...}
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "code"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node.lineno, value.value


def test_every_literal_code_in_the_packages_is_documented() -> None:
    parsed = [(p, ast.parse(p.read_text(), filename=str(p))) for p in _sources()]
    takers = _code_takers([t for _, t in parsed])
    found = [hit for path, tree in parsed for hit in _literal_codes(path, tree, takers)]
    assert len(found) > 50  # the scan sees the packages' errors at all
    unknown = [(where, code) for where, _, code in found if code not in CODES]
    assert unknown == []


def test_unknown_codes_are_refused_at_construction() -> None:
    from lineup_build.diagnostics import Diagnostic
    from lineup_sdk.errors import LineupError

    with pytest.raises(ValueError, match="undocumented"):
        LineupError("no_such_code", "x")
    with pytest.raises(ValueError, match="undocumented"):
        Diagnostic("no_such_code", "x")
    # a MiniApp's own code (a ToolError's, which `Surface.act` raises as the outcome of a
    # UI Action, SPEC 17) is `app.<snake_case>`, and nothing else of that prefix
    err = LineupError("app.not_found", "no task t9")
    assert err.code == "app.not_found" and err.hint is None
    for bad in ("app.", "app.Not_found", "app.9lives", "app.a-b", "app.é"):
        with pytest.raises(ValueError, match="undocumented"):
            LineupError(bad, "x")


def test_lineup_error_to_dict_and_default_hint() -> None:
    from lineup_sdk.errors import LineupError

    err = LineupError("signing_key_missing", "no key", details={"a": 1}, exit_code=2)
    assert err.to_dict() == {
        "code": "signing_key_missing",
        "message": "no key",
        "hint": CODES["signing_key_missing"][1],
        "details": {"a": 1},
    }
    assert err.exit_code == 2 and str(err) == "signing_key_missing: no key"
