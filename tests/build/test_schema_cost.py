"""The static cost of a tool schema (SPEC 13.3): plain schemas, the `schema_expensive`
warning and the `schema_too_complex` bound, at build and verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.schema_cost import (
    EXPENSIVE_EXPANSION,
    MAX_EXPANSION,
    MAX_NESTING,
    schema_cost,
)
from lineup_build.verify import verify_bundle
from lineup_sdk.errors import LineupError
from tests.build import bundle_kit as kit
from tests.build.schema_cost_kit import chain, too_complex_bundle


def deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"x": node}}
    return node


CASES = [
    ("pydantic-optional", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "plain"),
    ("closed-object", deep(3), "plain"),
    ("anyOf-4-levels", chain(4), "plain"),
    ("anyOf-9-levels", chain(9), "not_plain"),
    (
        "recursive-tree",
        {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"},
        "not_plain",
    ),
    ("uniqueItems", {"type": "array", "uniqueItems": True}, "not_plain"),
    ("anyOf-16-levels", chain(16), "expensive"),
    ("oneOf-16-levels", chain(16, "oneOf"), "expensive"),
    ("nested-40", deep(40), "expensive"),
    ("anyOf-20-levels", chain(20), "too_complex"),
    ("allOf-20-levels", chain(20, "allOf"), "too_complex"),
    ("nested-70", deep(70), "too_complex"),
]


@pytest.mark.parametrize(("schema", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_schema_classes(schema: Any, expected: str) -> None:
    cost = schema_cost(schema)
    got = (
        "too_complex"
        if cost.too_complex
        else "expensive"
        if cost.expensive
        else "plain"
        if cost.plain
        else "not_plain"
    )
    assert got == expected, cost


def test_the_bounds_are_ordered() -> None:
    assert EXPENSIVE_EXPANSION < MAX_EXPANSION and MAX_NESTING == 64


def _project(root: Path, result_schema: dict[str, Any]) -> Path:
    package = root / "demo_app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(
        "from typing import Any\n"
        "from lineup_sdk import ToolContext, define_agent_tools\n"
        'tools = define_agent_tools(app_scope="demo")\n'
        f'tools.declare("demo.get", input_schema={{"type": "object"}}, '
        f'result_schema={result_schema!r}, activation="app_ready", description="Get.")\n'
        '@tools.handler("demo.get")\n'
        "def get(ctx: ToolContext, params: dict[str, Any]) -> Any:\n"
        "    return 1\n"
    )
    (root / "lineup.toml").write_text(
        '[app]\nscope = "demo"\nname = "Demo"\nversion = "1.0.0"\n'
        'entry = "demo_app.tools"\ninclude = ["demo_app/**/*.py"]\n'
    )
    return root


def test_build_warns_schema_expensive(tmp_path: Path) -> None:
    result = build_project(_project(tmp_path / "p", chain(16)), dev_key=True)
    assert result.ok
    codes = [d.code for d in result.diagnostics]
    assert "schema_expensive" in codes and "schema_too_complex" not in codes


def test_build_refuses_schema_too_complex_with_a_hint(tmp_path: Path) -> None:
    result = build_project(_project(tmp_path / "p", chain(20)), dev_key=True)
    assert not result.ok
    found = [d for d in result.diagnostics if d.code == "schema_too_complex"]
    assert len(found) == 1 and found[0].hint and "$ref" in found[0].hint


def test_verify_refuses_a_bundle_past_the_static_bound(tmp_path: Path) -> None:
    bundle = too_complex_bundle(tmp_path / "deep.lineup")
    with pytest.raises(LineupError) as caught:
        verify_bundle(bundle, kit.trust())
    assert caught.value.code == "schema_too_complex"
    assert caught.value.hint and "$ref" in caught.value.hint
