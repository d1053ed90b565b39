"""The MCP server over a `Runtime`: `tools/list` from the Inventory, `tools/call` into
`Runtime.call`, receipts as progress, finals as results (SPEC 10). Built on the `mcp` SDK's
low-level server, which passes arguments through untouched."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp.types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from lineup_runtime_lite.serve._mapping import (
    CALL_ID_META,
    CONVERSATION_META,
    McpTool,
    call_result,
    catalog,
    progress_text,
)
from lineup_sdk import __version__
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_runtime_lite.runtime import Runtime

__all__ = ["Bridge", "ServeOptions"]

FINAL_KINDS = ("result", "error")


@dataclass(frozen=True)
class ServeOptions:
    """How the bridge maps names and ids, and how often it looks and speaks while waiting.

    Attributes:
        tool_names: `dotted` (method as is) or `dashed` (`.` → `-`).
        conversation: The conversation of calls whose `_meta` names none.
        heartbeat_s: Real seconds between repeated progress while a call waits (≤ 15).
        poll_s: The longest real pause between two looks at a waiting call's facts.
    """

    tool_names: str = "dotted"
    conversation: str = "mcp"
    heartbeat_s: float = 10.0
    poll_s: float = 0.2


class _Progress:
    """Progress for one request: strictly increasing values, sent only with a token."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx
        self.value = 0.0
        self.last_sent = time.monotonic()

    async def send(
        self, message: str, value: float | None = None, total: float | None = None
    ) -> None:
        self.value = max(self.value + 1, value if value is not None else 0.0)
        self.last_sent = time.monotonic()
        await self._ctx.session.report_progress(self.value, total, message)


class _Server(Server[Any]):
    """The SDK's low-level server, declaring task-augmented `tools/call` (2025-11-25) in
    every handshake — over stdio and over each streamable HTTP session."""

    def create_initialization_options(self, *args: Any, **kwargs: Any) -> InitializationOptions:
        options = super().create_initialization_options(*args, **kwargs)
        options.capabilities.tasks = mt.ServerTasksCapability(
            requests=mt.ServerTasksRequestsCapability(
                tools=mt.TasksToolsCapability(call=mt.TasksCallCapability())
            )
        )
        return options


class Bridge:
    """One runtime behind one MCP server; `run(read, write)` serves one connection."""

    def __init__(self, rt: Runtime, options: ServeOptions | None = None) -> None:
        from lineup_runtime_lite.serve import _tasks

        self.rt = rt
        self.options = options or ServeOptions()
        self.tools: dict[str, McpTool] = catalog(rt.inventory(), self.options.tool_names)
        self._by_method = {t.method: t for t in self.tools.values()}
        # wire dicts built once, over the SDK's own defaults for the envelope fields that
        # 2026-07-28 requires (`resultType`, cache hints); older revisions sieve them out
        listing = mt.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json")
        self._listing: dict[str, Any] = {
            **{k: v for k, v in listing.items() if v is not None},
            "tools": [t.entry for t in self.tools.values()],
        }
        self.server: Server[Any] = _Server(
            "lineup",
            version=__version__,
            instructions=(
                "LineUp MiniApp tools. Pass _meta['io.lineup/call_id'] to make a call "
                "idempotent; repeating it answers with the stored result."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._wire_listing: dict[str, dict[str, Any]] = {}
        self.add_middleware(self._cached_listing)
        _tasks.install(self)

    def initialization_options(self) -> InitializationOptions:
        """The handshake's capabilities: tools, plus task-augmented `tools/call`."""
        return self.server.create_initialization_options()

    async def run(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one MCP connection until its read side closes."""
        await self.server.run(read_stream, write_stream, self.initialization_options())

    def add_middleware(
        self, fn: Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[HandlerResult]]
    ) -> None:
        """Wrap every inbound request (the tasks part intercepts task-augmented calls)."""

        class _Wrap:
            async def __call__(
                self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
            ) -> HandlerResult:
                return await fn(ctx, call_next)

        self.server.middleware.append(_Wrap())

    # -- tools/list ----------------------------------------------------------------------
    async def _cached_listing(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """The tool list never changes while serving: the first `tools/list` per protocol
        revision goes through the SDK (validated, shaped, stamped), later ones reuse it."""
        if ctx.method != "tools/list":
            return await call_next(ctx)
        cached = self._wire_listing.get(ctx.protocol_version)
        if cached is not None:
            return dict(cached)
        result = await call_next(ctx)
        if isinstance(result, dict):
            self._wire_listing[ctx.protocol_version] = dict(result)
        return result

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> Any:
        # the wire dicts are built once; the SDK validates and dumps them per request
        return self._listing

    # -- tools/call ----------------------------------------------------------------------
    def tool(self, name: str) -> McpTool:
        """The tool an MCP name denotes; an unknown name is a JSON-RPC error (SPEC 10)."""
        tool = self.tools.get(name)
        if tool is None:
            raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {name}")
        return tool

    def tool_of_method(self, method: str) -> McpTool | None:
        return self._by_method.get(method)

    def ids(self, meta: Any) -> tuple[str, str]:
        """`(call_id, conversation_id)` from the request's `_meta`, else minted / default."""
        meta = meta if isinstance(meta, dict) else {}
        call_id = meta.get(CALL_ID_META)
        conversation = meta.get(CONVERSATION_META)
        if call_id is None:
            call_id = f"mcp_{secrets.token_hex(12)}"
        if conversation is None:
            conversation = self.options.conversation
        return call_id, conversation

    async def send(self, call_id: Any, conversation: Any, method: str, args: Any) -> dict[str, Any]:
        """`Runtime.acall` (no thread hop); a runtime failure becomes a final error."""
        try:
            return await self.rt.acall(call_id, conversation, method, args)
        except LineupError as exc:
            return {
                "id": f"{call_id}:error",
                "call_id": call_id,
                "kind": "error",
                "stage": "error",
                "error": exc.to_dict(),
            }

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> Any:
        tool = self.tool(params.name)
        call_id, conversation = self.ids(params.meta)
        args = params.arguments if params.arguments is not None else {}
        msg = await self.send(call_id, conversation, tool.method, args)
        if msg["kind"] not in FINAL_KINDS:
            msg = await self.wait_final(str(call_id), _Progress(ctx))
        return {"resultType": "complete", **call_result(tool, msg, str(call_id))}

    async def wait_final(self, call_id: str, progress: _Progress | None = None) -> dict[str, Any]:
        """Wait for a call's persisted final, relaying each new receipt as progress and
        repeating progress every `heartbeat_s` while nothing changes."""
        sent: set[str] = set()
        delay = 0.002
        latest: dict[str, Any] | None = None
        while True:
            record = await anyio.to_thread.run_sync(self.rt.call_record, call_id)
            messages: list[dict[str, Any]] = record["messages"] if record else []
            for m in messages:
                if m["kind"] in FINAL_KINDS:
                    return m
                latest = m
                if progress is not None and m["id"] not in sent:
                    sent.add(m["id"])
                    await progress.send(progress_text(m), *self._focus(m))
            if (
                progress is not None
                and latest is not None
                and time.monotonic() - progress.last_sent >= self.options.heartbeat_s
            ):
                await progress.send(self._waiting_text(latest), *self._focus(latest))
            await anyio.sleep(delay)
            delay = min(delay * 2, self.options.poll_s)

    def _focus(self, m: dict[str, Any]) -> tuple[float | None, float | None]:
        """For a started focus: (elapsed seconds, its total seconds) on the runtime clock."""
        if m.get("stage") != "started" or not m.get("started_at") or not m.get("ends_at"):
            return None, None
        start, end = _ms(m["started_at"]), _ms(m["ends_at"])
        elapsed = max(0, min(self.rt.clock.now_ms(), end) - start) / 1000
        return elapsed, (end - start) / 1000

    def _waiting_text(self, latest: dict[str, Any]) -> str:
        elapsed, total = self._focus(latest)
        if elapsed is not None and total is not None:
            return f"focusing: {elapsed:.0f} s of {total:.0f} s"
        return f"waiting: {progress_text(latest)}"


def _ms(ts: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
