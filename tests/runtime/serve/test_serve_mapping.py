"""SPEC 10's mapping table on hand-made Inventory entries and AgentMessages (pure; no I/O)."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from lineup_runtime_lite.internals import (
    RESULT_TOOL,
    closest,
    other_spelling,
    output_schema,
    pending_result,
    progress_text,
    result_tool_entry,
)
from lineup_runtime_lite.serve import call_result, catalog, error_text
from lineup_sdk.errors import LineupError


def entry(method: str = "demo.get", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "method": method,
        "app_scope": method.split(".")[0],
        "description": "Get it.",
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "result_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "activation": "app_ready",
        "long_running": False,
    }
    out.update(extra)
    return out


@pytest.mark.parametrize(
    ("hints", "annotations"),
    [
        ({}, None),
        ({"read_only": True}, {"readOnlyHint": True}),
        (
            {"read_only": False, "destructive": True, "idempotent": True, "open_world": False},
            {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": True,
                "openWorldHint": False,
            },
        ),
    ],
    ids=["none", "read-only", "all-four"],
)
def test_hints_become_annotations(
    hints: dict[str, bool], annotations: dict[str, bool] | None
) -> None:
    tool = catalog([entry(hints=hints)])["demo-get"]
    assert tool.entry.get("annotations") == annotations


def test_an_entry_without_hints_has_no_annotations() -> None:
    tool = catalog([entry()])["demo-get"]
    assert "annotations" not in tool.entry
    assert tool.entry["_meta"] == {
        "io.lineup/activation": "app_ready",
        "io.lineup/long_running": False,
    }
    assert "execution" not in tool.entry


def test_long_running_tools_offer_tasks() -> None:
    tool = catalog([entry(long_running=True, activation="foreground_required")])["demo-get"]
    assert tool.entry["execution"] == {"taskSupport": "optional"}
    assert tool.entry["_meta"]["io.lineup/long_running"] is True


@pytest.mark.parametrize(
    ("schema", "wrapped"),
    [
        (
            {"type": "string"},
            {
                "type": "object",
                "required": ["result"],
                "properties": {"result": {"type": "string"}},
                "x-fastmcp-wrap-result": True,
            },
        ),
        (
            {
                "type": "array",
                "items": {"$ref": "#/$defs/Item"},
                "$defs": {"Item": {"type": "object"}},
            },
            {
                "type": "object",
                "required": ["result"],
                "$defs": {"Item": {"type": "object"}},
                "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
                "x-fastmcp-wrap-result": True,
            },
        ),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, None),
    ],
    ids=["string", "array-with-defs", "union"],
)
def test_non_object_results_are_wrapped(
    schema: dict[str, Any], wrapped: dict[str, Any] | None
) -> None:
    out, is_object = output_schema(schema)
    assert not is_object
    if wrapped is not None:
        assert out == wrapped
    assert out["type"] == "object" and out["required"] == ["result"]
    tool = catalog([entry(result_schema=schema)])["demo-get"]
    msg = {"id": "c:result", "call_id": "c", "kind": "result", "stage": "result", "result": [1]}
    res = call_result(tool, msg, "c")
    assert res["structuredContent"] == {"result": [1]}
    assert json.loads(res["content"][0]["text"]) == {"result": [1]}


def test_object_results_are_kept_as_is() -> None:
    tool = catalog([entry()])["demo-get"]
    msg = {
        "id": "c:result",
        "call_id": "c",
        "kind": "result",
        "stage": "result",
        "result": {"n": 1},
    }
    res = call_result(tool, msg, "c")
    assert res == {
        "content": [{"type": "text", "text": '{"n": 1}'}],
        "structuredContent": {"n": 1},
        "isError": False,
        "_meta": {"io.lineup/call_id": "c"},
    }
    assert tool.entry["outputSchema"] == entry()["result_schema"]


def test_dashed_names() -> None:
    tools = catalog([entry("demo.get_all")], "dashed")
    assert list(tools) == ["demo-get_all"]
    assert tools["demo-get_all"].method == "demo.get_all"


NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # Claude Desktop, OpenAI-compatible clients


def test_dashed_is_the_default_and_every_name_passes_claude_desktops_rule() -> None:
    methods = ["demo.get", "demo.items.add_one", "demo." + "x" * 59]
    tools = catalog([entry(m) for m in methods])
    assert list(tools) == [m.replace(".", "-") for m in methods]
    assert all(NAME_RULE.match(name) for name in [*tools, RESULT_TOOL])
    assert catalog([entry()], "dotted").keys() == {"demo.get"}  # the opt-out


def test_the_other_spelling_and_the_closest_name() -> None:
    assert other_spelling("todo-add") == "todo.add"
    assert other_spelling("todo.add") == "todo-add"
    assert other_spelling("todo.items.add") == "todo-items-add"
    listed = ["todo-add", "todo-list", "todo-complete", RESULT_TOOL]
    assert closest("todo-ad", listed) == "todo-add"
    assert closest("todo.lst", listed) == "todo-list"  # an old dotted, misspelled name
    assert closest("weather-today", listed) is None


def test_an_app_of_the_reserved_scope_refuses_to_start() -> None:
    with pytest.raises(LineupError) as exc:
        catalog([entry(), entry("lineup.result")])
    assert exc.value.code == "scope_reserved" and "lineup.result" in exc.value.message


def test_a_long_running_tool_answers_an_envelope() -> None:
    result_schema = {
        "type": "object",
        "properties": {"status": {"type": "string"}, "x": {"$ref": "#/$defs/X"}},
        "$defs": {"X": {"type": "integer"}},
    }
    tool = catalog([entry(long_running=True, result_schema=result_schema)])["demo-get"]
    schema = tool.entry["outputSchema"]
    assert schema["required"] == ["status", "call_id", "stage"]
    assert schema["properties"]["status"] == {"enum": ["final", "pending"]}
    assert schema["properties"]["result"] == {
        "type": "object",
        "properties": {"status": {"type": "string"}, "x": {"$ref": "#/$defs/X"}},
    }
    assert schema["$defs"] == {"X": {"type": "integer"}}  # references still resolve
    assert "x-fastmcp-wrap-result" not in schema  # nothing to unwrap
    final = {"id": "c:result", "call_id": "c", "kind": "result", "stage": "result"}
    res = call_result(tool, {**final, "result": {"status": "completed"}}, "c")
    assert res["structuredContent"] == {
        "status": "final",
        "call_id": "c",
        "stage": "result",
        "result": {"status": "completed"},
    }
    jsonschema.validate(res["structuredContent"], schema)
    started = {
        "id": "c:started",
        "call_id": "c",
        "kind": "receipt",
        "stage": "started",
        "started_at": "2026-01-01T00:00:00.000Z",
        "ends_at": "2026-01-01T00:25:00.000Z",
    }
    pending = pending_result(tool, started, "c")
    assert pending["isError"] is False and pending["_meta"] == {"io.lineup/call_id": "c"}
    # receipt fields only: never a business result [TIS2-03]
    assert pending["structuredContent"] == {
        "status": "pending",
        "call_id": "c",
        "stage": "started",
        "ends_at": "2026-01-01T00:25:00.000Z",
    }
    jsonschema.validate(pending["structuredContent"], schema)
    assert RESULT_TOOL in pending["content"][0]["text"]


def test_any_other_tool_still_running_answers_call_pending() -> None:
    tool = catalog([entry()])["demo-get"]
    accepted = {"id": "c:accepted", "call_id": "c", "kind": "receipt", "stage": "accepted"}
    res = pending_result(tool, accepted, "c")
    assert res["isError"] is True
    error = res["_meta"]["io.lineup/error"]
    assert error["code"] == "call_pending"
    assert error["details"] == {"call_id": "c", "stage": "accepted"}
    assert RESULT_TOOL in res["content"][0]["text"]  # the model is told what to do
    assert tool.entry["outputSchema"] == entry()["result_schema"]  # the business schema


def test_the_result_tool_entry() -> None:
    entry_ = result_tool_entry(45)
    assert entry_["name"] == RESULT_TOOL
    assert entry_["inputSchema"]["required"] == ["call_id"]
    assert entry_["inputSchema"]["properties"]["wait_s"]["maximum"] == 45


def test_a_name_over_64_characters_refuses_to_start() -> None:
    long = "demo." + "x" * 60
    with pytest.raises(LineupError) as exc:
        catalog([entry(long)])
    assert exc.value.code == "tool_name_too_long"
    assert long.replace(".", "-") in exc.value.message
    assert list(catalog([entry("demo." + "x" * 59)]))  # exactly 64 is fine


def test_an_unknown_name_style_is_a_usage_error() -> None:
    with pytest.raises(LineupError) as exc:
        catalog([entry()], "underscore")
    assert exc.value.code == "usage_invalid" and exc.value.exit_code == 2


def test_an_error_text_carries_everything_a_model_needs() -> None:
    error = {
        "code": "invalid_params",
        "message": "params of demo.get do not match its input schema",
        "hint": "Correct the params.",
        "details": [
            {
                "path": "/n",
                "message": "'x' is not of type 'integer'",
                "expected": 'type "integer"',
                "value": '"x"',
            },
            {
                "path": "",
                "message": "'n' is a required property",
                "expected": "required n",
                "value": "{}",
            },
        ],
    }
    text = error_text(error, "c1")
    assert text.splitlines() == [
        "error invalid_params: params of demo.get do not match its input schema",
        "hint: Correct the params.",
        "problems:",
        """- at /n: 'x' is not of type 'integer'; expected type "integer"; got "x\"""",
        "- at (the arguments object): 'n' is a required property; expected required n; got {}",
        "call_id: c1",
    ]
    tool = catalog([entry()])["demo-get"]
    res = call_result(
        tool,
        {"id": "c1:error", "call_id": "c1", "kind": "error", "stage": "error", "error": error},
        "c1",
    )
    assert res["isError"] is True and "structuredContent" not in res
    assert res["_meta"] == {"io.lineup/call_id": "c1", "io.lineup/error": error}


def test_a_receipt_is_never_a_result() -> None:
    tool = catalog([entry()])["demo-get"]
    with pytest.raises(ValueError):
        call_result(tool, {"id": "c:accepted", "kind": "receipt", "stage": "accepted"}, "c")


@pytest.mark.parametrize(
    ("msg", "text"),
    [
        ({"stage": "accepted", "activation": "queued"}, "accepted (activation queued)"),
        ({"stage": "activation_ready"}, "activation_ready"),
        ({"stage": "activation_failed", "reason": "timeout"}, "activation_failed (reason timeout)"),
        (
            {"stage": "started", "started_at": "A", "ends_at": "B"},
            "started (started_at A, ends_at B)",
        ),
    ],
    ids=["queued", "ready", "failed", "started"],
)
def test_progress_text(msg: dict[str, Any], text: str) -> None:
    assert progress_text(msg) == text
