"""SPEC 10's mapping table as pure functions: Agent Inventory → MCP tools, AgentMessages →
MCP results and progress text. Plain JSON dicts in MCP's wire spelling; no `mcp` import."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from lineup_sdk.errors import LineupError
from lineup_sdk.names import RESULT_TOOL as _RESULT_TOOL
from lineup_sdk.names import mcp_tool_name

__all__ = [
    "CALL_ID_META",
    "CONVERSATION_META",
    "ERROR_META",
    "MAX_TOOL_NAME",
    "RESULT_TOOL",
    "McpTool",
    "call_result",
    "catalog",
    "closest",
    "error_text",
    "other_spelling",
    "pending_result",
    "progress_text",
    "result_tool_entry",
]

CALL_ID_META = "io.lineup/call_id"
CONVERSATION_META = "io.lineup/conversation_id"
ERROR_META = "io.lineup/error"
ACTIVATION_META = "io.lineup/activation"
LONG_RUNNING_META = "io.lineup/long_running"
#: MCP clients (and the SDK's name validation) refuse longer tool names.
MAX_TOOL_NAME = 64
#: The toolchain's own tool (scope `lineup` is reserved for it), named so under both styles.
RESULT_TOOL = _RESULT_TOOL
#: fastmcp (and clients like it) unwrap `{"result": ...}` when the schema says so.
WRAP_MARKER = "x-fastmcp-wrap-result"

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
    """The MCP name of a method under `style` (`lineup_sdk.names.mcp_tool_name`)."""
    return mcp_tool_name(method, style)


def other_spelling(name: str) -> str:
    """The same method in the other style: method names never hold `-`, so `.` ↔ `-` is
    one-to-one and `tools/call` may take either spelling of a listed name."""
    return name.replace("-", ".") if "-" in name else name.replace(".", "-")


def closest(name: str, names: list[str]) -> str | None:
    """The listed name nearest to an unknown one (either spelling), for its error."""
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not found:
        found = difflib.get_close_matches(other_spelling(name), names, n=1, cutoff=0.6)
    return found[0] if found else None


def output_schema(result_schema: Any) -> tuple[dict[str, Any], bool]:
    """`(outputSchema, is_object)`: an object schema as is; anything else wrapped as
    `{type: object, properties: {result: ...}, required: [result]}`, marked for clients
    that unwrap it (`x-fastmcp-wrap-result`); local `$defs` move to the wrapper's root so
    `#/$defs/...` references still resolve."""
    if isinstance(result_schema, dict) and result_schema.get("type") == "object":
        return result_schema, True
    wrapper = _hoisted(result_schema, {"type": "object", "required": ["result"]})
    wrapper["properties"] = {"result": _inner(result_schema)}
    wrapper[WRAP_MARKER] = True
    return wrapper, False


def envelope_schema(result_schema: Any) -> dict[str, Any]:
    """A long-running tool's `outputSchema` (SPEC 13.2): one envelope for `tools/call`,
    `lineup-result` and task results. `pending` carries receipt fields only (the latest
    stage, `ends_at` for a started focus) and is not a business result [TIS2-03]; only
    `final` carries `result`, the tool's own result."""
    schema = _hoisted(
        result_schema,
        {"type": "object", "required": ["status", "call_id", "stage"]},
    )
    schema["properties"] = {
        "status": {"enum": ["final", "pending"]},
        "call_id": {"type": "string"},
        "stage": {"type": "string"},
        "ends_at": {"type": "string"},
        "result": _inner(result_schema),
    }
    schema["additionalProperties"] = False
    return schema


def _hoisted(result_schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    if isinstance(result_schema, dict):
        for key in ("$defs", "$schema"):
            if key in result_schema:
                root[key] = result_schema[key]
    return root


def _inner(result_schema: Any) -> dict[str, Any]:
    if not isinstance(result_schema, dict):
        return {}
    return {k: v for k, v in result_schema.items() if k not in ("$defs", "$schema")}


def tool_annotations(hints: dict[str, Any]) -> dict[str, bool]:
    """MCP tool annotations from an Inventory entry's `hints` (only the set booleans)."""
    return {_HINTS[k]: bool(v) for k, v in sorted(hints.items()) if k in _HINTS and v is not None}


def mcp_tool(entry: dict[str, Any], style: str) -> McpTool:
    """The `tools/list` entry of one Agent Inventory entry."""
    name = tool_name(entry["method"], style)
    if entry["long_running"]:
        schema, is_object = envelope_schema(entry["result_schema"]), True
    else:
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


def catalog(inventory: list[dict[str, Any]], style: str = "dashed") -> dict[str, McpTool]:
    """Every Inventory tool by MCP name, in Inventory order.

    Raises:
        LineupError: `usage_invalid` for an unknown `style`; `scope_reserved` for an app of
            the toolchain's scope `lineup`; `tool_name_too_long` when a name exceeds 64
            characters (clients would refuse the whole list).
    """
    from lineup_sdk.names import RESERVED_SCOPES

    if style not in ("dotted", "dashed"):
        raise LineupError(
            "usage_invalid", f"--tool-names {style!r} must be dotted or dashed", exit_code=2
        )
    reserved = sorted(
        {e["method"] for e in inventory if e["method"].split(".")[0] in RESERVED_SCOPES}
    )
    if reserved:
        raise LineupError(
            "scope_reserved",
            f"an installed app uses the scope reserved for the toolchain's own tools: "
            f"{', '.join(reserved)}",
            hint="uninstall that app or rebuild it with another scope",
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


def result_tool_entry(max_wait_s: float) -> dict[str, Any]:
    """The `tools/list` entry of `lineup-result`: a call's stored final by its call_id."""
    return {
        "name": RESULT_TOOL,
        "description": (
            "Fetch the final answer of an earlier tool call of this conversation that was "
            "answered `pending` (or `call_pending`) because it was still running: pass its "
            "call_id. Waits up to wait_s seconds for the final, then answers pending again."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "call_id": {"type": "string", "minLength": 1, "maxLength": 200},
                "wait_s": {"type": "number", "minimum": 0, "maximum": max_wait_s},
            },
            "required": ["call_id"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    }


def _meta_of(call_id: str) -> dict[str, Any]:
    return {CALL_ID_META: call_id}


def call_result(tool: McpTool, message: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The `tools/call` result of a final AgentMessage (never of a receipt [TIS2-03]); a
    long-running tool's final result is its envelope with `status: final`."""
    meta: dict[str, Any] = _meta_of(call_id)
    if message["kind"] == "result":
        value = message.get("result")
        structured: Any
        if tool.long_running:
            structured = {"status": "final", "call_id": call_id, "stage": "result"}
            structured["result"] = value
        else:
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


def pending_result(tool: McpTool, latest: dict[str, Any] | None, call_id: str) -> dict[str, Any]:
    """The answer to a call still running when the server stops holding its request
    (`--max-wait`, SPEC 13.2): a long-running tool's `pending` envelope (receipt fields
    only, never a business result [TIS2-03]); any other tool's `call_pending` error, which
    tells the model to fetch the final with `lineup-result`."""
    stage = str(latest["stage"]) if latest else "accepted"
    meta = _meta_of(call_id)
    if tool.long_running:
        structured: dict[str, Any] = {"status": "pending", "call_id": call_id, "stage": stage}
        if latest and latest.get("stage") == "started" and latest.get("ends_at"):
            structured["ends_at"] = latest["ends_at"]
        text = (
            f"{_dump(structured)}\nstill running: call {RESULT_TOOL} with "
            f'{{"call_id": "{call_id}"}} for its final answer'
        )
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": False,
            "_meta": meta,
        }
    error = {
        "code": "call_pending",
        "message": f"the call is still running (stage {stage}); its answer is not ready yet",
        "hint": f'call {RESULT_TOOL} with {{"call_id": "{call_id}"}} to fetch its final answer',
        "details": {"call_id": call_id, "stage": stage},
    }
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
