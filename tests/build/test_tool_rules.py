"""One set of tool rules: the build's checks and verify's manifest checks agree on every rule.

Each bad tool is written once, as its manifest entry; the test derives the declaration the
build's extractor would have produced for it (a runtime tool's schemas come from the
catalog, what the author declared is kept beside them) and asks both paths.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from lineup_build import tool_rules
from lineup_build.checks import check_tools
from lineup_build.manifest import manifest_schema
from lineup_build.manifest_checks import schema_problems, tool_problems
from lineup_build.model import Manifest
from lineup_sdk.catalog import CATALOG
from tests.build.bundle_kit import make_manifest, runtime_tool, sdk_tool

ROOT = Path(__file__).resolve().parents[2]
SCOPE = "pomodoro"
OBJ = {"type": "object", "properties": {}, "additionalProperties": False}


def _declaration(tool: dict[str, Any]) -> dict[str, Any]:
    """What the extractor hands the build for the tool this manifest entry describes."""
    out = {**tool, "location": {"file": "app/tools.py", "line": 3}}
    if tool["delivery"] == "runtime":
        entry = CATALOG.get(tool["handler_key"])
        out["declared_input_schema"] = tool["input_schema"]
        out["declared_result_schema"] = tool["result_schema"]
        if entry is not None:
            out["input_schema"], out["result_schema"] = entry.input_schema, entry.result_schema
    return out


def _build_errors(tool: dict[str, Any]) -> list[tuple[str, str]]:
    diags = check_tools([_declaration(tool)], SCOPE)
    return sorted((d.code, d.message) for d in diags if d.severity == "error")


def _verify_errors(tool: dict[str, Any]) -> list[tuple[str, str]]:
    doc = make_manifest(tools=[tool], scope=SCOPE)
    assert schema_problems(doc) == []  # the rules under test, not the manifest schema
    return sorted((p.code, p.message) for p in tool_problems(Manifest.from_json(doc)))


START = "pomodoro.start"
CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("good-sdk-tool", sdk_tool("pomodoro.note"), []),
    ("good-runtime-tool", runtime_tool("pomodoro.start", START), []),
    ("outside-scope", sdk_tool("todo.add"), ["method_outside_scope"]),
    (
        "input-not-object",
        sdk_tool("pomodoro.note", input_schema={"type": "string"}),
        ["invalid_input_schema"],
    ),
    (
        "remote-ref",
        sdk_tool("pomodoro.note", input_schema={**OBJ, "$ref": "https://example.com/s"}),
        ["remote_ref"],
    ),
    (
        "forbidden-keyword",
        sdk_tool("pomodoro.note", result_schema={"$id": "urn:x", "type": "object"}),
        ["invalid_result_schema"],
    ),
    (
        "backtracking-pattern",
        sdk_tool(
            "pomodoro.note",
            input_schema={**OBJ, "properties": {"a": {"type": "string", "pattern": "(a+)+\\1"}}},
        ),
        ["invalid_input_schema"],
    ),
    (
        "runtime-activation",
        runtime_tool("pomodoro.start", START, activation="app_ready"),
        ["runtime_contract_mismatch"],
    ),
    (
        "runtime-long-running",
        runtime_tool("pomodoro.start", START, long_running=False),
        ["runtime_contract_mismatch"],
    ),
    (
        "runtime-input-schema",
        runtime_tool("pomodoro.start", START, input_schema=OBJ),
        ["runtime_contract_mismatch"],
    ),
    (
        "runtime-result-schema",
        runtime_tool("pomodoro.start", START, result_schema={"type": "object"}),
        ["runtime_contract_mismatch"],
    ),
    (
        "runtime-every-difference",
        runtime_tool(
            "pomodoro.start", START, activation="app_ready", input_schema=OBJ, result_schema=True
        ),
        ["runtime_contract_mismatch"] * 3,
    ),
    (
        "runtime-unknown-key",
        runtime_tool("pomodoro.start", START, handler_key="pomodoro.nope"),
        ["unknown_runtime_handler"],
    ),
]


@pytest.mark.parametrize(("tool", "codes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_build_and_verify_report_the_same_codes(tool: dict[str, Any], codes: list[str]) -> None:
    build, verify = _build_errors(tool), _verify_errors(tool)
    assert [c for c, _ in build] == sorted(codes)
    assert [c for c, _ in verify] == sorted(codes)


@pytest.mark.parametrize(
    "tool",
    [c[1] for c in CASES if c[0] in ("input-not-object", "remote-ref", "forbidden-keyword")],
    ids=["input-not-object", "remote-ref", "forbidden-keyword"],
)
def test_schema_findings_are_worded_alike(tool: dict[str, Any]) -> None:
    assert _build_errors(tool) == _verify_errors(tool)


def test_a_runtime_key_of_another_scope_fails_both_paths() -> None:
    tool = runtime_tool("todo.start", START)
    build = check_tools([_declaration(tool)], "todo")
    doc = make_manifest(tools=[tool], scope="todo")
    verify = tool_problems(Manifest.from_json(doc))
    assert [d.code for d in build if d.severity == "error"] == ["runtime_contract_mismatch"]
    assert [p.code for p in verify] == ["runtime_contract_mismatch"]


def test_field_bounds_are_the_manifest_schemas() -> None:
    sdk = manifest_schema()["$defs"]["sdk_tool"]["properties"]
    assert sdk["description"]["maxLength"] == tool_rules.MAX_DESCRIPTION
    assert sdk["timeout_s"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": tool_rules.MAX_TIMEOUT_S,
    }
    assert tool_rules.timeout_ok(tool_rules.MAX_TIMEOUT_S)
    assert not tool_rules.timeout_ok(tool_rules.MAX_TIMEOUT_S + 0.5)
    assert not tool_rules.timeout_ok(0) and not tool_rules.timeout_ok(True)


def _imported_names(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("module", ["checks.py", "manifest_checks.py"])
def test_the_rules_live_only_in_tool_rules(module: str) -> None:
    names = _imported_names(ROOT / "lineup_build" / module)
    for rule_source in (
        "lineup_build.schemas.check_schema",
        "lineup_sdk.catalog.CATALOG",
        "lineup_sdk.catalog.key_allowed_for_scope",
        "lineup_sdk.names.method_name_problem",
    ):
        assert rule_source not in names, f"{module} applies {rule_source} itself"
