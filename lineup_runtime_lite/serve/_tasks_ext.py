"""The tasks extension `io.modelcontextprotocol/tasks` (SEP-2663) on protocol 2026-07-28,
where tasks left the core: a long-running `tools/call` from a request that declares the
extension answers a task (`resultType: "task"`) whose id is the `call_id` and whose state is
the runtime's persisted receipts, so `tasks/get` keeps answering across server restarts.

Built on the SDK's extension surface: an `Extension` subclass (identifier, settings, its
`tools/call` interceptor, its methods as `MethodBinding`s) that the low-level server
advertises under `ServerCapabilities.extensions` (`server/discover`; the 2025-11-25
handshake sieves `extensions` out) and whose interceptor is folded around the registered
`tools/call` handler with `compose_tool_call_handler`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio.to_thread
import mcp.types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from lineup_runtime_lite.serve._mapping import (
    CALL_ID_META,
    RESULT_TOOL,
    McpTool,
    call_result,
    progress_text,
)
from lineup_runtime_lite.serve._taskhost import TaskHost

__all__ = ["EXTENSION", "EXTENSION_VERSIONS", "TasksExtension", "declared", "install", "task_view"]

EXTENSION = "io.modelcontextprotocol/tasks"
#: The protocol revisions that carry the extension (2025-11-25 has core tasks instead).
EXTENSION_VERSIONS = frozenset({"2026-07-28"})
#: "Missing Required Client Capability": the extension's answer to `tasks/*` from a request
#: that did not declare it (SEP-2663 error handling; not the SDK's core -32021).
MISSING_CLIENT_CAPABILITY = -32003
POLL_INTERVAL_MS = 1000
FINAL_KINDS = ("result", "error")


class UpdateTaskParams(mt.RequestParams):
    """`tasks/update` params: the task and the responses to its input requests."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] | None = Field(default=None, alias="inputResponses")


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's `_meta["io.modelcontextprotocol/clientCapabilities"]` lists
    the extension (on 2026-07-28 every request carries its own capabilities)."""
    if ctx.protocol_version not in EXTENSION_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    extensions = caps.extensions if caps is not None else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def task_view(record: dict[str, Any], tool: McpTool | None) -> dict[str, Any]:
    """The extension's detailed task of a persisted call: `working` with the latest stage,
    then `completed` with the `tools/call` result inline — a final error too, as a result
    with `isError: true` (`failed` is for protocol errors, which a stored final never is)."""
    messages = record["messages"]
    latest = messages[-1]
    task: dict[str, Any] = {
        "taskId": record["call_id"],
        "status": "working",
        "statusMessage": progress_text(latest),
        "createdAt": messages[0]["at"],
        "lastUpdatedAt": latest["at"],
        "ttlMs": None,  # kept as long as the database keeps the call
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if latest["kind"] in FINAL_KINDS:
        if tool is None:  # the app was uninstalled since: still answer with the stored final
            tool = McpTool(record["method"], record["method"], True, True, {})
        result = call_result(tool, latest, record["call_id"])
        task["status"] = "completed"
        task["statusMessage"] = "error" if result.get("isError") else "result"
        task["result"] = {"resultType": "complete", **result}
    return task


class TasksExtension(Extension):
    """The server side of SEP-2663 for one bridge: task creation in `tools/call` (opted-in
    requests, long-running tools) and `tasks/get`, `tasks/update`, `tasks/cancel`."""

    identifier = EXTENSION

    def __init__(self, bridge: TaskHost) -> None:
        self._bridge = bridge

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", mt.GetTaskRequestParams, self._get, EXTENSION_VERSIONS),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, EXTENSION_VERSIONS),
            MethodBinding(
                "tasks/cancel", mt.CancelTaskRequestParams, self._cancel, EXTENSION_VERSIONS
            ),
        )

    async def intercept_tool_call(
        self,
        params: mt.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """A task for an opted-in call of a long-running tool; anything else goes on to the
        plain `tools/call` (a request that did not opt in never gets a `CreateTaskResult`)."""
        if not declared(ctx) or params.name == RESULT_TOOL:  # the toolchain's tool: never a task
            return await call_next(ctx)
        if self._bridge.answers_at_acceptance(ctx, params.name):  # SPEC 18.2: no task here
            return await call_next(ctx)
        bridge = self._bridge
        tool = bridge.tool(params.name)
        if not tool.long_running:
            return await call_next(ctx)
        call_id, conversation = bridge.ids(params.meta)
        args = params.arguments if params.arguments is not None else {}
        msg = await bridge.send(call_id, conversation, tool.method, args)
        record = await anyio.to_thread.run_sync(bridge.rt.call_record, str(call_id))
        if record is None or msg not in record["messages"]:
            # rejected before anything was persisted (bad params, a call_id conflict): no
            # task to poll, so the answer is the plain error result
            return {"resultType": "complete", **call_result(tool, msg, str(call_id))}
        await bridge.mark_task(str(call_id))
        task = task_view(record, tool)
        task.pop("result", None)  # a CreateTaskResult never carries the result
        return {"resultType": "task", **task, "_meta": {CALL_ID_META: str(call_id)}}

    def _gate(self, ctx: ServerRequestContext[Any, Any]) -> None:
        if not declared(ctx):
            raise MCPError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: declare the {EXTENSION} extension in "
                "_meta['io.modelcontextprotocol/clientCapabilities'].extensions",
                {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )

    async def _record(self, task_id: str, meta: Any) -> dict[str, Any]:
        # only a task a request of this conversation created, of an app served here
        record = await self._bridge.task_record(task_id, meta)
        if record is None:
            raise MCPError(mt.INVALID_PARAMS, f"Unknown task: {task_id} (task not found)")
        return record

    async def _get(
        self, ctx: ServerRequestContext[Any, Any], params: mt.GetTaskRequestParams
    ) -> dict[str, Any]:
        self._gate(ctx)
        record = await self._record(params.task_id, params.meta)
        return {
            "resultType": "complete",
            **task_view(record, self._bridge.tool_of_method(record["method"])),
        }

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        self._gate(ctx)
        await self._record(params.task_id, params.meta)
        raise MCPError(
            mt.INVALID_PARAMS,
            "LineUp tasks never ask for input (no input_required state): nothing to update",
        )

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CancelTaskRequestParams
    ) -> dict[str, Any]:
        self._gate(ctx)
        await self._record(params.task_id, params.meta)
        raise MCPError(
            mt.INVALID_PARAMS,
            "tasks cannot be cancelled here: Agent-side cancellation is out of scope; "
            "call the app's interrupt tool (e.g. pomodoro-interrupt) instead",
        )


def install(bridge: TaskHost) -> dict[str, MethodBinding]:
    """Advertise the extension, fold its interceptor around the registered `tools/call`
    handler, and return its methods for the caller to route by protocol revision (the
    low-level server keeps one handler per method name; 2025-11-25 has its own `tasks/*`)."""
    ext = TasksExtension(bridge)
    server = bridge.server
    server.extensions[ext.identifier] = ext.settings()
    entry = server.get_request_handler("tools/call")
    assert entry is not None, "the bridge registers tools/call before its extensions"
    server.add_request_handler(
        "tools/call", mt.CallToolRequestParams, compose_tool_call_handler([ext], entry.handler)
    )
    return {binding.method: binding for binding in ext.methods()}
