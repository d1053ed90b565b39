"""SPEC 10's mapping table as pure functions: Agent Inventory → MCP tools, AgentMessages →
MCP results and progress text. Plain JSON dicts in MCP's wire spelling; no `mcp` import."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lineup_sdk.errors import LineupError

__all__ = [
    "CALL_ID_META",
    "CONVERSATION_META",
    "ERROR_META",
    "MAX_TOOL_NAME",
    "McpTool",
    "call_result",
    "catalog",
    "error_text",
    "progress_text",
]

CALL_ID_META = "io.lineup/call_id"
CONVERSATION_META = "io.lineup/conversation_id"
ERROR_META = "io.lineup/error"
ACTIVATION_META = "io.lineup/activation"
LONG_RUNNING_META = "io.lineup/long_running"
#: MCP clients (and the SDK's name validation) refuse longer tool names.
MAX_TOOL_NAME = 64

_HINTS = {
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}


@dataclass(frozen=True)
class McpTool:
    """One Inventory tool as MCP sees it: its name, its method, and its `tools/list` entry."""

    name: str
    method: str
    long_running: bool
    object_result: bool
    entry: dict[str, Any]


def tool_name(method: str, style: str) -> str:
    """The MCP name of a method: as is (`dotted`) or with `.` → `-` (`dashed`)."""
    return method.replace(".", "-") if style == "dashed" else method


def output_schema(result_schema: Any) -> tuple[dict[str, Any], bool]:
    """`(outputSchema, is_object)`: an object schema as is; anything else wrapped as
    `{type: object, properties: {result: ...}, required: [result]}` (local `$defs` move to
    the wrapper's root so `#/$defs/...` references still resolve)."""
    if isinstance(result_schema, dict) and result_schema.get("type") == "object":
        return result_schema, True
    inner = dict(result_schema) if isinstance(result_schema, dict) else {}
    wrapper: dict[str, Any] = {"type": "object", "required": ["result"]}
    for key in ("$defs", "$schema"):
        if key in inner:
            wrapper[key] = inner.pop(key)
    wrapper["properties"] = {"result": inner if isinstance(result_schema, dict) else {}}
    return wrapper, False


def tool_annotations(hints: dict[str, Any]) -> dict[str, bool]:
    """MCP tool annotations from an Inventory entry's `hints` (only the set booleans)."""
    return {_HINTS[k]: bool(v) for k, v in sorted(hints.items()) if k in _HINTS and v is not None}


def mcp_tool(entry: dict[str, Any], style: str) -> McpTool:
    """The `tools/list` entry of one Agent Inventory entry."""
    name = tool_name(entry["method"], style)
    schema, is_object = output_schema(entry["result_schema"])
    wire: dict[str, Any] = {
        "name": name,
        "description": entry.get("description") or "",
        "inputSchema": entry["input_schema"],
        "outputSchema": schema,
        "_meta": {
            ACTIVATION_META: entry["activation"],
            LONG_RUNNING_META: bool(entry["long_running"]),
        },
    }
    notes = tool_annotations(entry.get("hints") or {})
    if notes:
        wire["annotations"] = notes
    if entry["long_running"]:
        wire["execution"] = {"taskSupport": "optional"}
    return McpTool(name, entry["method"], bool(entry["long_running"]), is_object, wire)


def catalog(inventory: list[dict[str, Any]], style: str = "dotted") -> dict[str, McpTool]:
    """Every Inventory tool by MCP name, in Inventory order.

    Raises:
        LineupError: `usage_invalid` for an unknown `style`; `tool_name_too_long` when a
            name exceeds 64 characters (clients would refuse the whole list).
    """
    if style not in ("dotted", "dashed"):
        raise LineupError(
            "usage_invalid", f"--tool-names {style!r} must be dotted or dashed", exit_code=2
        )
    tools = [mcp_tool(entry, style) for entry in inventory]
    long = [t.name for t in tools if len(t.name) > MAX_TOOL_NAME]
    if long:
        raise LineupError(
            "tool_name_too_long",
            f"{len(long)} tool name(s) exceed {MAX_TOOL_NAME} characters: {', '.join(long)}",
        )
    return {t.name: t for t in tools}


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def error_text(error: dict[str, Any], call_id: str) -> str:
    """What the model reads for a final error: code, message, hint and, for
    `invalid_params`, every problem with its JSON pointer, expectation and value."""
    lines = [f"error {error.get('code')}: {error.get('message')}"]
    if error.get("hint"):
        lines.append(f"hint: {error['hint']}")
    details = error.get("details")
    if error.get("code") == "invalid_params" and isinstance(details, list):
        lines.append("problems:")
        for p in details:
            if not isinstance(p, dict):
                continue
            where = p.get("path") or "(the arguments object)"
            parts = [f"- at {where}: {p.get('message')}"]
            if p.get("expected") is not None:
                parts.append(f"expected {p['expected']}")
            if "value" in p:
                parts.append(f"got {p['value']}")
            lines.append("; ".join(parts))
    elif details is not None:
        lines.append(f"details: {_dump(details)}")
    lines.append(f"call_id: {call_id}")
    return "\n".join(lines)


def call_result(tool: McpTool, message: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The `tools/call` result of a final AgentMessage (never of a receipt [TIS2-03])."""
    meta: dict[str, Any] = {CALL_ID_META: call_id}
    if message["kind"] == "result":
        value = message.get("result")
        structured = value if tool.object_result else {"result": value}
        return {
            "content": [{"type": "text", "text": _dump(structured)}],
            "structuredContent": structured,
            "isError": False,
            "_meta": meta,
        }
    if message["kind"] != "error":
        raise ValueError(f"{message.get('id')} is a receipt, not a final answer")
    error = message.get("error") or {}
    meta[ERROR_META] = error
    return {
        "content": [{"type": "text", "text": error_text(error, call_id)}],
        "isError": True,
        "_meta": meta,
    }


def progress_text(message: dict[str, Any]) -> str:
    """The progress message of a receipt: its stage, plus what that stage carries."""
    stage = str(message.get("stage"))
    extras = []
    if message.get("activation"):
        extras.append(f"activation {message['activation']}")
    if message.get("reason"):
        extras.append(f"reason {message['reason']}")
    if message.get("started_at"):
        extras.append(f"started_at {message['started_at']}")
    if message.get("ends_at"):
        extras.append(f"ends_at {message['ends_at']}")
    return f"{stage} ({', '.join(extras)})" if extras else stage
