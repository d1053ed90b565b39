"""The MCP server over a `Runtime`: `tools/list` from the Inventory, `tools/call` into
`Runtime.call`, receipts as progress, finals as results (SPEC 10). Built on the `mcp` SDK's
low-level server, which passes arguments through untouched."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp.types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from lineup_runtime_lite.core.messages import plain
from lineup_runtime_lite.serve._mapping import (
    CALL_ID_META,
    CONVERSATION_META,
    ERROR_META,
    RESULT_TOOL,
    McpTool,
    call_result,
    catalog,
    closest,
    error_text,
    other_spelling,
    pending_result,
    progress_text,
    result_tool_entry,
)
from lineup_runtime_lite.serve._mcpapps import (
    ACTION_ENTRY,
    APP_TOOLS,
    EXTENSION,
    SERVER_SETTINGS,
    SURFACE_META,
    SYNC_ENTRY,
    McpApps,
    linked_entry,
    ui_declared,
)
from lineup_runtime_lite.serve._resources import Resources
from lineup_runtime_lite.serve._resume import SCOPE_CALL_ID, SCOPE_STREAMS, CallStreams, OpenCall
from lineup_sdk import __version__
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_runtime_lite.api.runtime import Runtime

__all__ = ["TASK_MARK", "Bridge", "ServeOptions"]

FINAL_KINDS = ("result", "error")
#: How often (seconds) a UI client's `tools/list` looks whether a served document changed.
UI_RECHECK_S = 1.0
#: The runtime's mark on a call that a request created as an MCP task (it opted in).
TASK_MARK = "mcp_task"
#: Tasks one `tasks/list` answer lists (its `nextCursor` names the next page).
TASKS_PAGE = 100


@dataclass(frozen=True)
class ServeOptions:
    """How the bridge maps names and ids, and how often it looks and speaks while waiting.

    Attributes:
        tool_names: `dashed` (`.` → `-`, the default) or `dotted` (method as is).
        conversation: The conversation of calls whose `_meta` names none.
        heartbeat_s: Real seconds between repeated progress while a call waits (≤ 15).
        poll_s: The longest real pause between two looks at a waiting call's facts.
        max_wait_s: The longest a request without a progress token is held (real seconds;
            0 = answer right after acceptance); then it answers `pending`/`call_pending`
            and `lineup-result` fetches the final (SPEC 13.2).
    """

    tool_names: str = "dashed"
    conversation: str = "mcp"
    heartbeat_s: float = 10.0
    poll_s: float = 0.2
    max_wait_s: float = 45.0


class _Progress:
    """Progress for one request: strictly increasing values, sent only with a token. The
    first notification names the call_id in its `_meta` and its text (sent raw: Python
    clients drop notification `_meta`), so a client that timed out can find its call."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], call_id: str, stream: OpenCall | None = None
    ) -> None:
        self._ctx = ctx
        self.call_id = call_id
        self.token = _progress_token(ctx)
        self.value = 0.0
        self.last_sent = time.monotonic()
        self._first = True
        #: the position (1-based) of the latest stored message of the call read so far
        self.index = 0
        #: the request's resumable stream (streamable HTTP), told what each event covers
        self.stream = stream
        if stream is not None:
            stream.token = self.token

    async def send(
        self, message: str, value: float | None = None, total: float | None = None
    ) -> None:
        self.value = max(self.value + 1, value if value is not None else 0.0)
        self.last_sent = time.monotonic()
        if self.token is None:
            return
        if self.stream is not None:
            self.stream.sent.append(self.index)
            self.stream.value = self.value
        if not self._first:
            await self._ctx.session.report_progress(self.value, total, message)
            return
        self._first = False
        note = mt.ProgressNotification(
            params=mt.ProgressNotificationParams(
                progress_token=self.token,
                progress=self.value,
                total=total,
                message=f"{message} · call_id {self.call_id}",
                _meta={CALL_ID_META: self.call_id},
            )
        )
        await self._ctx.session.send_notification(note, related_request_id=self._ctx.request_id)


class _Server(Server[Any]):
    """The SDK's low-level server, declaring task-augmented `tools/call` (2025-11-25) in
    every handshake — over stdio and over each streamable HTTP session."""

    def create_initialization_options(self, *args: Any, **kwargs: Any) -> InitializationOptions:
        options = super().create_initialization_options(*args, **kwargs)
        options.capabilities.tasks = mt.ServerTasksCapability(
            list=mt.TasksListCapability(),
            requests=mt.ServerTasksRequestsCapability(
                tools=mt.TasksToolsCapability(call=mt.TasksCallCapability())
            ),
        )
        return options


class Bridge:
    """One runtime behind one MCP server; `run(read, write)` serves one connection.

    `scopes`: the apps it serves (SPEC 16.5); None serves every installed app. An app
    installed in the same state and not served is neither listed nor callable, and its
    calls are `call_not_found` / "task not found" here (the runtime still does its duties).
    """

    def __init__(
        self,
        rt: Runtime,
        options: ServeOptions | None = None,
        *,
        scopes: Iterable[str] | None = None,
    ) -> None:
        from lineup_runtime_lite.serve import _tasks

        self.rt = rt
        self.options = options or ServeOptions()
        #: Hears each call's first answer (`answer, conversation, method`), on the server's
        #: loop; it must not block (`lineup dev` queues it for its timeline).
        self.on_answer: Callable[[dict[str, Any], Any, str], None] | None = None
        self.resources = Resources(rt, self.serves_scope)
        self.scopes: frozenset[str] | None = frozenset(scopes) if scopes is not None else None
        inventory = [e for e in rt.inventory() if self.serves(e["method"])]
        self.tools: dict[str, McpTool] = catalog(inventory, self.options.tool_names)
        self._by_method = {t.method: t for t in self.tools.values()}
        # wire dicts built once, over the SDK's own defaults for the envelope fields that
        # 2026-07-28 requires (`resultType`, cache hints); older revisions sieve them out
        listing = mt.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json")
        self._listing: dict[str, Any] = {
            **{k: v for k, v in listing.items() if v is not None},
            "tools": [
                *(t.entry for t in self.tools.values()),
                result_tool_entry(self.options.max_wait_s),
            ],
        }
        self.server: Server[Any] = _Server(
            "lineup",
            version=__version__,
            instructions=(
                "LineUp MiniApp tools. Pass _meta['io.lineup/call_id'] to make a call "
                "idempotent; repeating it answers with the stored result. A call still "
                f"running after a while answers pending; {RESULT_TOOL} fetches its final."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
        )
        self._wire_listing: dict[tuple[str, bool], dict[str, Any]] = {}
        self._ui_listing: tuple[tuple[str, ...], dict[str, Any]] | None = None
        self._ui_checked = -UI_RECHECK_S
        self.add_middleware(self._cached_listing)
        # MCP Apps (SPEC 18.2): advertised in `extensions` on 2026-07-28, added to the raw
        # `initialize` result on the handshake revisions
        self.apps = McpApps(rt, self.serves_scope, self.options.conversation)
        self.server.extensions[EXTENSION] = dict(SERVER_SETTINGS)
        self.add_middleware(McpApps.declare_on_initialize)
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
        revision and MCP Apps declaration goes through the SDK (validated, shaped,
        stamped), later ones reuse it."""
        if ctx.method != "tools/list":
            return await call_next(ctx)
        declared = ui_declared(ctx)
        if declared and time.monotonic() - self._ui_checked >= UI_RECHECK_S:
            # a served document's version may change (`lineup dev` rebuilds): looked at
            # most once a second, so the cached list stays as cheap as the plain one
            await self._ui_tools()
            self._ui_checked = time.monotonic()
        key = (ctx.protocol_version, declared)
        cached = self._wire_listing.get(key)
        if cached is not None:
            return dict(cached)
        result = await call_next(ctx)
        if isinstance(result, dict):
            self._wire_listing[key] = dict(result)
        return result

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> Any:
        # the wire dicts are built once; the SDK validates and dumps them per request
        if ui_declared(ctx):
            return self._ui_listing[1] if self._ui_listing else await self._ui_tools()
        return self._listing

    async def _ui_tools(self) -> dict[str, Any]:
        """The listing for a client that declared MCP Apps: linked tools with
        `_meta.ui.resourceUri` (their app's served document), then the app-only tools."""
        docs = await self.resources.documents()
        uris = tuple(sorted(docs))
        if self._ui_listing is not None and self._ui_listing[0] == uris:
            return self._ui_listing[1]
        by_scope = {uri.split("/")[3]: uri for uri in uris}
        tools = []
        for t in self.tools.values():
            uri = by_scope.get(t.method.split(".", 1)[0]) if t.surface else None
            tools.append(linked_entry(t, uri) if uri is not None else t.entry)
        listing = {**self._listing, "tools": [*tools, *self._listing["tools"][len(tools) :]]}
        listing["tools"] += [SYNC_ENTRY, ACTION_ENTRY]
        if self._ui_listing is not None:  # another served version: list it afresh
            self._wire_listing = {k: v for k, v in self._wire_listing.items() if not k[1]}
        self._ui_listing = (uris, listing)
        return listing

    def answers_at_acceptance(self, ctx: ServerRequestContext[Any, Any], name: str) -> bool:
        """Whether a `tools/call` of `name` answers as soon as it is accepted whatever the
        request asks (progress, a task): a linked long-running tool for a client that
        declared MCP Apps, so its View follows at once (SPEC 18.2)."""
        tool = self.tools.get(name) or self.tools.get(other_spelling(name))
        return tool is not None and tool.surface and tool.long_running and ui_declared(ctx)

    # -- resources (SPEC 18.1) -------------------------------------------------------------
    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> Any:
        return await self.resources.list(ctx.protocol_version)

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> Any:
        return self.resources.templates()

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> Any:
        return await self.resources.read(str(params.uri), ctx.protocol_version)

    # -- tools/call ----------------------------------------------------------------------
    def tool(self, name: str) -> McpTool:
        """The tool an MCP name denotes, in either spelling (the mapping is one-to-one); an
        unknown name is a JSON-RPC error (SPEC 10) naming the closest listed one."""
        tool = self.tools.get(name) or self.tools.get(other_spelling(name))
        if tool is None:
            listed = [*self.tools, RESULT_TOOL]
            near = closest(name, listed)
            hint = f"; did you mean {near!r}?" if near else "; tools/list names every tool"
            raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {name}{hint}")
        return tool

    def tool_of_method(self, method: str) -> McpTool | None:
        return self._by_method.get(method)

    def serves(self, method: str) -> bool:
        """Whether a method belongs to an app this server serves (its scope is the part
        before the first dot)."""
        return self.serves_scope(method.split(".", 1)[0])

    def serves_scope(self, scope: str) -> bool:
        """Whether this server serves the app `scope`."""
        return self.scopes is None or scope in self.scopes

    def served_apps(self) -> list[dict[str, Any]]:
        """Each installed app this server serves: `scope`, `version` (current) and `tools`
        (how many tools it lists), by scope."""
        counts: dict[str, int] = {}
        for t in self.tools.values():
            scope = t.method.split(".", 1)[0]
            counts[scope] = counts.get(scope, 0) + 1
        return [
            {"scope": a["scope"], "version": a["version"], "tools": counts.get(a["scope"], 0)}
            for a in self.rt.apps()
            if self.serves_scope(a["scope"])
        ]

    async def own_call(self, call_id: str, meta: Any) -> dict[str, Any] | None:
        """The record of a call of an app served here, made in the conversation a request
        with `meta` resolves to (`_meta`, else `--conversation`); None for any other."""
        _, conversation = self.ids(meta)
        record = await anyio.to_thread.run_sync(self.rt.call_record, call_id)
        if (
            record is None
            or not record["messages"]
            or record["conversation_id"] != conversation
            or not self.serves(record["method"])
        ):
            return None
        return record

    async def task_record(self, task_id: str, meta: Any) -> dict[str, Any] | None:
        """The record of a task a request with `meta` may see: a call created by a request
        that opted in to tasks, of its conversation and of an app served here (SPEC 16.3)."""
        record = await self.own_call(task_id, meta)
        if record is None:
            return None
        if not await anyio.to_thread.run_sync(self.rt.marks.has, task_id, TASK_MARK):
            return None
        return record

    async def mark_task(self, call_id: str) -> None:
        """Remember that a request created this call as a task (kept with the call)."""
        await anyio.to_thread.run_sync(self.rt.marks.add, call_id, TASK_MARK)

    async def own_tasks(
        self, meta: Any, cursor: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the records of the tasks a request with `meta` may see, oldest first,
        after the task `cursor` names, and the cursor of the next page (None: the last):
        the conversation's marks through their index, never every task ever created."""
        _, conversation = self.ids(meta)
        if cursor is not None and not await anyio.to_thread.run_sync(
            self.rt.marks.has, cursor, TASK_MARK
        ):
            raise MCPError(mt.INVALID_PARAMS, "Invalid cursor: it names no task")
        ids = await anyio.to_thread.run_sync(
            lambda: self.rt.marks.calls(
                TASK_MARK, str(conversation), after=cursor, limit=TASKS_PAGE
            )
        )
        out = []
        for call_id in ids:
            record = await self.own_call(call_id, meta)
            if record is not None:
                out.append(record)
        out.sort(key=lambda r: (r["messages"][0]["at"], r["call_id"]))
        return out, (ids[-1] if len(ids) == TASKS_PAGE else None)

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
            answer = plain(await self.rt.acall(call_id, conversation, method, args))
        except LineupError as exc:
            answer = {
                "id": f"{call_id}:error",
                "call_id": call_id,
                "kind": "error",
                "stage": "error",
                "error": exc.to_dict(),
            }
        if self.on_answer is not None:
            self.on_answer(answer, conversation, method)
        return answer

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> Any:
        if params.name == RESULT_TOOL:
            return {"resultType": "complete", **await self._result_tool(params)}
        declared = ui_declared(ctx)
        if declared and params.name in APP_TOOLS:
            app_answer = await self.apps.call(params.name, params.arguments, params.meta)
            return {"resultType": "complete", **app_answer}
        tool = self.tool(params.name)
        at_acceptance = declared and tool.surface and tool.long_running
        streams, minted = _http_streams(ctx)
        meta: Any = params.meta
        if minted is not None and not (isinstance(meta, dict) and CALL_ID_META in meta):
            meta = {**(meta or {}), CALL_ID_META: minted}  # minted where the stream began
        call_id, conversation = self.ids(meta)
        stream = streams.call(str(ctx.request_id)) if streams is not None else None
        if stream is not None and stream.call_id != call_id:
            stream = None
        args = params.arguments if params.arguments is not None else {}
        msg = await self.send(call_id, conversation, tool.method, args)
        progress = _Progress(ctx, str(call_id), stream)
        answer: dict[str, Any]
        if msg["kind"] not in FINAL_KINDS:
            # held with progress until the final when the client asked for progress; else
            # at most max_wait_s, so no client's own timeout ends the call unanswered
            limit = None if progress.token is not None else self.options.max_wait_s
            if at_acceptance:  # a linked long-running tool, for a UI client (SPEC 18.2)
                limit = 0
            final, latest = await self.wait_final_within(str(call_id), limit, progress, msg)
            if final is None:
                answer = {"resultType": "complete", **pending_result(tool, latest, str(call_id))}
            else:
                answer = {"resultType": "complete", **call_result(tool, final, str(call_id))}
        else:
            answer = {"resultType": "complete", **call_result(tool, msg, str(call_id))}
            if stream is not None:
                record = await anyio.to_thread.run_sync(self.rt.call_record, str(call_id))
                progress.index = len(record["messages"]) if record else 0
        if stream is not None:  # the answer's event covers the messages read so far
            stream.answer_index = progress.index
        if declared and tool.surface:
            view = await self.apps.surface_meta(tool.method.split(".", 1)[0], str(conversation))
            if view is not None:
                answer["_meta"] = {**answer.get("_meta", {}), SURFACE_META: view}
        return answer

    async def _result_tool(self, params: mt.CallToolRequestParams) -> dict[str, Any]:
        """`lineup-result`: the stored final of a call of the asking conversation, at once,
        or after up to `wait_s` (≤ `max_wait_s`) its pending answer again."""
        args = params.arguments if isinstance(params.arguments, dict) else {}
        call_id = args.get("call_id")
        wait_s = args.get("wait_s", 0)
        if (
            not isinstance(call_id, str)
            or not 1 <= len(call_id) <= 200
            or isinstance(wait_s, bool)
            or not isinstance(wait_s, int | float)
            or not 0 <= wait_s <= self.options.max_wait_s
            or set(args) - {"call_id", "wait_s"}
        ):
            return _error_answer(
                "invalid_params",
                f"{RESULT_TOOL} takes call_id (a string of 1–200 characters) and optionally "
                f"wait_s (0 to {self.options.max_wait_s:g} seconds)",
                str(call_id) if isinstance(call_id, str) else "",
            )
        record = await self.own_call(call_id, params.meta)
        if record is None:  # another conversation's, or an app this server does not serve
            return _error_answer(
                "call_not_found",
                f"this conversation made no call {call_id!r}",
                call_id,
                hint="pass the call_id of an earlier call of this conversation (its answer's "
                "_meta['io.lineup/call_id'])",
            )
        tool = self.tool_of_method(record["method"]) or McpTool(
            record["method"], record["method"], True, True, {}
        )
        final, latest = await self.wait_final_within(call_id, float(wait_s))
        if final is None:
            return pending_result(tool, latest, call_id)
        return call_result(tool, final, call_id)

    async def wait_final_within(
        self,
        call_id: str,
        limit_s: float | None,
        progress: _Progress | None = None,
        first: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """`(final, None)` once the call's final is stored, or `(None, latest receipt)` when
        `limit_s` real seconds passed first (None: no limit)."""
        latest: list[dict[str, Any]] = [first] if first is not None else []
        if limit_s is None:
            return await self.wait_final(call_id, progress, latest), None
        with anyio.move_on_after(limit_s):
            return await self.wait_final(call_id, progress, latest), None
        record = await anyio.to_thread.run_sync(self.rt.call_record, call_id)
        messages: list[dict[str, Any]] = record["messages"] if record else []
        if progress is not None and messages:
            progress.index = len(messages)
        if messages and messages[-1]["kind"] in FINAL_KINDS:  # it ended as time ran out
            return messages[-1], None
        return None, (messages[-1] if messages else latest[-1] if latest else None)

    async def wait_final(
        self,
        call_id: str,
        progress: _Progress | None = None,
        seen: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Wait for a call's persisted final, relaying each new receipt as progress and
        repeating progress every `heartbeat_s` while nothing changes (`seen` collects the
        receipts read so far)."""
        sent: set[str] = set()
        delay = 0.002
        latest: dict[str, Any] | None = None
        while True:
            record = await anyio.to_thread.run_sync(self.rt.call_record, call_id)
            messages: list[dict[str, Any]] = record["messages"] if record else []
            for position, m in enumerate(messages, 1):
                if progress is not None:
                    progress.index = position
                if m["kind"] in FINAL_KINDS:
                    return m
                latest = m
                if seen is not None:
                    seen[:] = [m]  # the latest receipt, for a pending answer
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


def _http_streams(ctx: ServerRequestContext[Any, Any]) -> tuple[CallStreams | None, str | None]:
    """The request's session `CallStreams` and the call_id minted for it where its stream
    began (streamable HTTP only; `(None, None)` elsewhere)."""
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):
        return None, None
    streams = scope.get(SCOPE_STREAMS)
    minted = scope.get(SCOPE_CALL_ID)
    return (
        streams if isinstance(streams, CallStreams) else None,
        minted if isinstance(minted, str) else None,
    )


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> str | int | None:
    """The request's `_meta.progressToken` (a bool is no token: it would alias 1)."""
    raw = ctx.params.get("_meta") if isinstance(ctx.params, dict) else None
    token = raw.get("progressToken") if isinstance(raw, dict) else None
    if token is None and isinstance(ctx.meta, dict):
        token = ctx.meta.get("progress_token")
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def _error_answer(
    code: str, message: str, call_id: str, *, hint: str | None = None
) -> dict[str, Any]:
    """A `tools/call` error result of the toolchain's own tool (`isError`, the error in the
    text and in `_meta`)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if hint:
        error["hint"] = hint
    return {
        "content": [{"type": "text", "text": error_text(error, call_id)}],
        "isError": True,
        "_meta": {CALL_ID_META: call_id, ERROR_META: error},
    }


def _ms(ts: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
