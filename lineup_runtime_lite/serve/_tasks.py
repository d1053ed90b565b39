"""MCP tasks (protocol revision 2025-11-25) for long-running tools: a task is the call,
its id the `call_id`, its state the runtime's persisted receipts — so it survives restarts.
On 2026-07-28 the same methods route to the tasks extension (`_tasks_ext`).

The SDK carries the wire types but serves none of `tasks/*`, and its `tools/call` result
check knows only `CallToolResult`; a task-augmented call is therefore answered by a
middleware before that check, and `tasks/get|result|cancel` are added as request methods.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import mcp.types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from lineup_runtime_lite.serve import _tasks_ext
from lineup_runtime_lite.serve._mapping import (
    CALL_ID_META,
    RESULT_TOOL,
    McpTool,
    call_result,
    progress_text,
)
from lineup_runtime_lite.serve._taskhost import TaskHost

__all__ = ["install", "task_of"]

RELATED_TASK_META = "io.modelcontextprotocol/related-task"
#: A suggested polling interval; progress of a focus moves in seconds, not milliseconds.
POLL_INTERVAL_MS = 1000
#: Tasks are core only in this protocol revision (they left the core in 2026-07-28).
TASKS_VERSION = "2025-11-25"


def task_of(record: dict[str, Any]) -> dict[str, Any]:
    """The MCP task of a persisted call: `working` with the latest stage until its final,
    then `completed` — or `failed` for a final error (`isError: true`), as 2025-11-25 says."""
    messages = record["messages"]
    latest = messages[-1]
    done = latest["kind"] in ("result", "error")
    if not done:
        status_message = progress_text(latest)
    elif latest["kind"] == "error":
        status_message = f"error {latest.get('error', {}).get('code')}"
    else:
        status_message = "result"
    return {
        "taskId": record["call_id"],
        "status": ("failed" if latest["kind"] == "error" else "completed") if done else "working",
        "statusMessage": status_message,
        "createdAt": messages[0]["at"],
        "lastUpdatedAt": latest["at"],
        "ttl": None,
        "pollInterval": POLL_INTERVAL_MS,
    }


def install(bridge: TaskHost) -> None:
    """Serve task-augmented `tools/call` and `tasks/get`, `tasks/result`, `tasks/list`,
    `tasks/cancel` on 2025-11-25 (each only for tasks of the asking conversation), and the tasks extension's `tasks/get|update|cancel` on 2026-07-28."""
    modern = _tasks_ext.install(bridge)

    def gate(ctx: ServerRequestContext[Any, Any]) -> None:
        if ctx.protocol_version != TASKS_VERSION:
            raise MCPError(mt.METHOD_NOT_FOUND, "Method not found", ctx.method)

    async def record_of(task_id: str, meta: Any) -> dict[str, Any]:
        # only a task a request of this conversation created, of an app served here: any
        # other call_id is not found, as lineup-result answers (SPEC 16.3)
        record = await bridge.task_record(task_id, meta)
        if record is None:
            raise MCPError(mt.INVALID_PARAMS, f"Unknown task: {task_id} (task not found)")
        return record

    async def create(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        params = mt.CallToolRequestParams.model_validate(ctx.params or {}, by_name=False)
        if params.name == RESULT_TOOL:
            raise MCPError(
                mt.METHOD_NOT_FOUND, f"{params.name} does not run as a task (taskSupport forbidden)"
            )
        tool = bridge.tool(params.name)
        if not tool.long_running:
            raise MCPError(
                mt.METHOD_NOT_FOUND, f"{params.name} does not run as a task (taskSupport forbidden)"
            )
        call_id, conversation = bridge.ids(params.meta)
        args = params.arguments if params.arguments is not None else {}
        msg = await bridge.send(call_id, conversation, tool.method, args)
        record = await anyio.to_thread.run_sync(bridge.rt.call_record, str(call_id))
        if record is None or msg not in record["messages"]:
            # rejected before anything was persisted (bad params, a call_id conflict):
            # there is no task to poll, so the answer is the plain error result
            return call_result(tool, msg, str(call_id))
        await bridge.mark_task(str(call_id))
        return {"task": task_of(record), "_meta": {CALL_ID_META: str(call_id)}}

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if (
            ctx.method == "tools/call"
            and ctx.protocol_version == TASKS_VERSION
            and isinstance(ctx.params, dict)
            and ctx.params.get("task") is not None
            # a linked long-running tool answers at acceptance for a UI client (SPEC 18.2)
            and not bridge.answers_at_acceptance(ctx, str(ctx.params.get("name")))
        ):
            return await create(ctx)
        return await call_next(ctx)

    async def get(
        ctx: ServerRequestContext[Any, Any], params: mt.GetTaskRequestParams
    ) -> dict[str, Any]:
        gate(ctx)
        return task_of(await record_of(params.task_id, params.meta))

    async def result(
        ctx: ServerRequestContext[Any, Any], params: mt.GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        gate(ctx)
        record = await record_of(params.task_id, params.meta)
        final = await bridge.wait_final(params.task_id)
        tool = bridge.tool_of_method(record["method"])
        if tool is None:  # the app was uninstalled since: still answer with the stored final
            tool = McpTool(record["method"], record["method"], True, True, {})
        out = call_result(tool, final, params.task_id)
        out["_meta"][RELATED_TASK_META] = {"taskId": params.task_id}
        return out

    async def cancel(
        ctx: ServerRequestContext[Any, Any], params: mt.CancelTaskRequestParams
    ) -> dict[str, Any]:
        gate(ctx)
        await record_of(params.task_id, params.meta)
        raise MCPError(
            mt.INVALID_PARAMS,
            "tasks cannot be cancelled here: Agent-side cancellation is out of scope; "
            "call the app's interrupt tool (e.g. pomodoro.interrupt) instead",
        )

    async def listing(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> dict[str, Any]:
        gate(ctx)
        meta = params.meta if params is not None else None
        cursor = params.cursor if params is not None else None
        records, after = await bridge.own_tasks(meta, cursor)
        page: dict[str, Any] = {"tasks": [task_of(r) for r in records]}
        if after is not None:  # a page at a time (MCP pagination), never every task at once
            page["nextCursor"] = after
        return page

    async def no_update(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        raise MCPError(mt.METHOD_NOT_FOUND, "Method not found", ctx.method)

    def route(method: str, legacy: Any) -> Any:
        """One handler per method name: the extension's on its revisions, else `legacy`."""
        binding = modern[method]
        versions = binding.protocol_versions or frozenset()

        async def handler(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            if ctx.protocol_version in versions:
                return await binding.handler(ctx, params)
            return await legacy(ctx, params)

        return handler

    bridge.add_middleware(middleware)
    bridge.server.add_request_handler("tasks/get", mt.GetTaskRequestParams, route("tasks/get", get))
    bridge.server.add_request_handler("tasks/result", mt.GetTaskPayloadRequestParams, result)
    bridge.server.add_request_handler("tasks/list", mt.PaginatedRequestParams, listing)
    bridge.server.add_request_handler(
        "tasks/cancel", mt.CancelTaskRequestParams, route("tasks/cancel", cancel)
    )
    bridge.server.add_request_handler(
        "tasks/update", modern["tasks/update"].params_type, route("tasks/update", no_update)
    )
