"""How to call one tool, and what can go wrong: the example call, the tool as an MCP client
meets it under `lineup serve` (its name, its result, the long-running envelope, reading a
final with `lineup-result`), and the errors the call can answer."""

from __future__ import annotations

import json
from typing import Any

from lineup_build.docs._example import example_params
from lineup_build.docs._text import code
from lineup_build.model import MINIAPP_SDK, Tool, UiAction
from lineup_sdk.names import RESULT_TOOL, mcp_tool_name

__all__ = ["action_example_section", "errors_section", "example_section", "mcp_section"]

#: Errors a runtime catalog handler answers beyond the common ones (SPEC 5).
_RUNTIME_ERRORS = {
    "pomodoro.start": [
        ("pomodoro_already_active", "a focus is already starting or running here."),
    ],
}


def fenced(value: Any) -> list[str]:
    """A JSON value as a fenced block."""
    return _fence([json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)])


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _fence(texts: list[str]) -> list[str]:
    """Lines of JSON as one fenced block, its fence longer than any backtick run inside
    (author examples are text of any kind)."""
    longest = run = 0
    for ch in "\n".join(texts):
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}json", *texts, fence]


def example_section(tool: Tool | UiAction, title: str = "Example call") -> list[str]:
    example = example_params(tool.input_schema)
    lines = [f"### {title}", ""]
    if example.source == "author":
        lines.append("Params, from the author's `examples`:")
    elif example.source == "mixed":
        lines.append(
            "Params: the author's `examples` and defaults where given, the other required "
            "fields generated from the schema:"
        )
    else:
        lines.append("Params, generated from the schema (the required fields only):")
    lines += ["", *fenced(example.params), ""]
    if example.unsolved:
        where = ", ".join(code(p) for p in example.unsolved)
        lines += [f"Replace the placeholder at {where}: it must match the field's pattern.", ""]
    return lines


def mcp_section(tool: Tool) -> list[str]:
    name = mcp_tool_name(tool.method)
    params = example_params(tool.input_schema).params
    lines = [
        "### Over MCP (`lineup serve`)",
        "",
        f"- **Name:** {code(name)} (`--tool-names dotted` serves it as {code(tool.method)}; "
        "`tools/call` takes either spelling).",
    ]
    if tool.long_running:
        lines += [
            "- **Answer:** an envelope. While the operation runs the call holds with "
            "progress notifications (or, on protocol 2025-11-25, as a task whose id is the "
            'call_id); an answer given before the end is `{"status": "pending", "call_id", '
            '"stage"}` (plus `ends_at` once started) and is never the result. The final is '
            '`{"status": "final", "call_id", "stage": "result", "result": ...}` with the '
            "result described above.",
        ]
    else:
        wrapped = _object_result(tool.result_schema)
        lines.append(
            "- **Answer:** `structuredContent` is the result"
            + ("." if wrapped else ', wrapped as `{"result": ...}` (it is not an object).')
            + " An error is a result with `isError: true`: its text names the code, message "
            "and hint."
        )
    lines += [
        "- **Reading a final:** every answer carries its call_id in "
        '`_meta["io.lineup/call_id"]`. A call still running when the server stops waiting '
        "(`--max-wait`) answers "
        + ("`pending`" if tool.long_running else "`call_pending`")
        + f"; call {code(RESULT_TOOL)} with that call_id for the final (sending the same "
        "call_id again replays the stored answer, never a second call).",
        "",
        "The `tools/call` params of that call, then of reading its final:",
        "",
        *_fence(
            [
                _compact({"name": name, "arguments": params}),
                _compact({"name": RESULT_TOOL, "arguments": {"call_id": "<call_id>"}}),
            ]
        ),
        "",
    ]
    return lines


def _object_result(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def errors_section(tool: Tool) -> list[str]:
    rows: list[tuple[str, str]] = [
        (
            "invalid_params",
            "the params do not match the schema above; `details` lists each "
            "problem with its JSON pointer.",
        ),
        ("call_id_conflict", "a call_id already used for a different call."),
    ]
    if tool.activation == "app_ready":
        rows.append(("activation_failed", "the MiniApp could not start (`details.reason`)."))
        rows.append(("activation_cancelled", "its start was cancelled before the call ran."))
    elif tool.activation == "foreground_required":
        rows.append(
            (
                "activation_failed",
                "the MiniApp could not start or reach the foreground "
                "(`details.reason`: `host_failed`, `timeout`, ...).",
            )
        )
        rows.append(
            (
                "activation_cancelled",
                "the user left or declined before the call ran (`details.reason`).",
            )
        )
    elif tool.delivery == MINIAPP_SDK:
        rows.append(("app_not_running", "the MiniApp is not running in this conversation."))
    if tool.delivery == MINIAPP_SDK:
        timeout = f" ({tool.timeout_s:g} s)" if tool.timeout_s is not None else ""
        rows += [
            ("handler_timeout", f"the handler ran past its `timeout_s`{timeout}."),
            ("handler_failed", "the handler raised an unexpected exception."),
            ("handler_result_invalid", "the handler returned a value outside the result schema."),
            ("delivery_interrupted", "the worker stopped mid-call; check before retrying."),
        ]
    for key, more in _RUNTIME_ERRORS.get(tool.handler_key or "", []):
        rows.append((key, more))
    lines = ["### Errors", "", "| code | when |", "|---|---|"]
    lines += [f"| {code(c)} | {when} |" for c, when in rows]
    lines.append("")
    if tool.delivery == MINIAPP_SDK:
        lines += [
            "The handler's own refusals (`ToolError`) arrive as `app.<code>`; the manifest "
            "does not list them, so read the tool's description for them.",
            "",
        ]
    return lines


def action_example_section(action: UiAction) -> list[str]:
    """Example params of a UI Action, and the errors its Surface can meet."""
    lines = example_section(action, "Example params")
    lines += [
        "Besides the handler's own refusals (`app.<code>`), the action can answer "
        "`invalid_params`, `app_not_running` (no running App session), `unknown_action` "
        "(a rebuilt app no longer declares it), `handler_timeout` and `action_pending` "
        "(its outcome is not in yet: send the same action again to read it).",
        "",
    ]
    return lines
