"""The Surface as an MCP App (SPEC 18.2) for clients that declare the extension
`io.modelcontextprotocol/ui` with the `text/html;profile=mcp-app` MIME type: negotiation on
both revisions, linked tools (`_meta.ui.resourceUri`, the `view` capability in their
answers), and the app-only toolchain tools `lineup-surface-sync` and `lineup-ui-action`.

A client that does not declare the extension sees none of this: its `tools/list` and its
answers are today's."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from lineup_runtime_lite.core.messages import plain
from lineup_runtime_lite.serve._mapping import CONVERSATION_META, ERROR_META, McpTool
from lineup_runtime_lite.serve._resources import MIME_TYPE
from lineup_runtime_lite.serve._views import VIEW_TTL_MS, View, mint, verify
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from lineup_runtime_lite.api.runtime import Runtime

__all__ = [
    "ACTION_TOOL",
    "APP_TOOLS",
    "EXTENSION",
    "MAX_SYNC_WAIT_S",
    "SERVER_SETTINGS",
    "SURFACE_META",
    "SYNC_TOOL",
    "McpApps",
    "declares",
    "ui_declared",
]

EXTENSION = "io.modelcontextprotocol/ui"
#: What `serve` declares of the extension (both revisions).
SERVER_SETTINGS: dict[str, Any] = {"mimeTypes": [MIME_TYPE]}
#: The revisions whose capabilities travel per request (no `initialize`).
MODERN = frozenset({"2026-07-28"})
#: The flat key of the extension's preview drafts (ext-apps still writes both).
LEGACY_URI_META = "ui/resourceUri"
#: The key of a linked tool's answer `_meta` that only the View reads.
SURFACE_META = "io.lineup/surface"
SYNC_TOOL = "lineup-surface-sync"
ACTION_TOOL = "lineup-ui-action"
APP_TOOLS = (SYNC_TOOL, ACTION_TOOL)
#: `lineup-surface-sync` holds a request at most this long (`wait_s` is clamped to it).
MAX_SYNC_WAIT_S = 25.0
#: The app-only tools' argument protocols this runtime answers.
PROTOCOLS = (1,)
#: How often (seconds) a waiting sync looks at the operation facts (session data wakes it).
SYNC_POLL_S = 0.25


def declares(settings: Any) -> bool:
    """Whether extension settings declare MCP Apps: they list `text/html;profile=mcp-app`
    in `mimeTypes` (any other declaration counts as none, as the official SDK's
    `client_supports_apps` judges)."""
    if not isinstance(settings, Mapping):
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list | tuple) and MIME_TYPE in mime_types


def ui_declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client of this request declared the extension: on 2026-07-28 in the
    request's `capabilities.extensions`; on the handshake revisions in the `initialize`
    params' `capabilities.extensions` or `capabilities.experimental` (the SDK keeps both as
    sent, though its 2025-11-25 handshake has no such field)."""
    caps = ctx.session.client_capabilities
    if caps is None:
        return False
    if declares((caps.extensions or {}).get(EXTENSION)):
        return True
    if ctx.protocol_version in MODERN:
        return False
    return declares((caps.experimental or {}).get(EXTENSION))


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _view_error(message: str) -> dict[str, Any]:
    error = {
        "code": "view_invalid",
        "message": message,
        "hint": "reload the View: its host passes a fresh view with the next tool result",
    }
    return _error(error)


def _error(error: dict[str, Any]) -> dict[str, Any]:
    text = f"error {error['code']}: {error['message']}"
    if error.get("hint"):
        text += f"\nhint: {error['hint']}"
    if error.get("details") is not None:
        text += f"\ndetails: {_dump(error['details'])}"
    return {
        "content": [{"type": "text", "text": text}],
        "isError": True,
        "_meta": {ERROR_META: error},
    }


def _invalid(message: str) -> dict[str, Any]:
    return _error({"code": "invalid_params", "message": message})


def _answer(structured: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": _dump(structured)}],
        "structuredContent": structured,
        "isError": False,
        "_meta": meta,
    }


def _app_only(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "view": {"type": "string", "minLength": 1},
                "protocol": {"enum": list(PROTOCOLS)},
                **properties,
            },
            "required": ["view", "protocol", *required],
            "additionalProperties": False,
        },
        "_meta": {"ui": {"visibility": ["app"]}},
    }


SYNC_ENTRY: dict[str, Any] = _app_only(
    SYNC_TOOL,
    "For a LineUp Surface View only (not for the model): the App session's data and "
    "Runtime operation facts once they change past what the View has, or `unchanged` after "
    "wait_s seconds (at most 25).",
    {
        "after_revision": {"type": "integer", "minimum": -1},
        "after_operations": {"type": "string", "maxLength": 128},
        "wait_s": {"type": "number", "minimum": 0},
    },
    ["after_revision"],
)
ACTION_ENTRY: dict[str, Any] = _app_only(
    ACTION_TOOL,
    "For a LineUp Surface View only (not for the model): one UI Action of the App session "
    "(SPEC 17), answered with its outcome.",
    {
        "client_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "seq": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "params": {"type": "object"},
    },
    ["client_id", "seq", "name", "params"],
)


def linked_entry(tool: McpTool, uri: str) -> dict[str, Any]:
    """A linked tool's `tools/list` entry for a UI client: `_meta.ui.resourceUri`, and no
    task support for a long-running one (it answers at acceptance there)."""
    entry = copy.deepcopy(tool.entry)
    entry["_meta"]["ui"] = {"resourceUri": uri}
    entry["_meta"][LEGACY_URI_META] = uri  # hosts of the extension's preview read this key
    if tool.long_running:
        entry.pop("execution", None)
    return entry


def operations_version(operations: list[dict[str, Any]]) -> str:
    """An opaque version of a session's operation facts (changes when any of them does)."""
    return hashlib.sha256(_dump(operations).encode()).hexdigest()[:32]


class McpApps:
    """The extension's part of one bridge: the view key, linked answers, the app-only
    tools. `rt` and `serves_scope` are the bridge's."""

    def __init__(self, rt: Runtime, serves_scope: Any, conversation: str) -> None:
        self._rt = rt
        self._serves_scope = serves_scope
        self._conversation = conversation
        self._key: bytes | None = None

    async def key(self) -> bytes:
        if self._key is None:
            self._key = await anyio.to_thread.run_sync(self._rt.surface_view_key)
        return self._key

    # -- handshake -----------------------------------------------------------------------
    @staticmethod
    async def declare_on_initialize(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """On the handshake revisions, where the SDK's server capabilities carry no
        `extensions`, add the server's declaration to the raw `initialize` result."""
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            caps = result.get("capabilities")
            if isinstance(caps, dict):
                caps["extensions"] = {**(caps.get("extensions") or {}), EXTENSION: SERVER_SETTINGS}
        return result

    # -- linked tools --------------------------------------------------------------------
    async def surface_meta(self, scope: str, conversation: str) -> dict[str, Any] | None:
        """`{view, revision, version}` for the View of a conversation's App session of
        `scope`; None when no call reached an App session."""
        rt = self._rt
        session = await anyio.to_thread.run_sync(rt.app_session, conversation, scope)
        if session is None:
            return None
        snap = await anyio.to_thread.run_sync(lambda: rt.surface(conversation, scope).get())
        view = View(
            scope,
            session["app_session_id"],
            conversation,
            session["version"],
            rt.clock.now_ms() + VIEW_TTL_MS,
        )
        return {
            "view": mint(await self.key(), view),
            "revision": snap.revision,
            "version": session["version"],
            "scope": scope,
        }

    # -- app-only tools ------------------------------------------------------------------
    async def _view(self, args: Mapping[str, Any], meta: Any) -> View | dict[str, Any]:
        """The request's view, or its `view_invalid` answer: checked before anything else
        of the arguments; the conversation only when the request names one."""
        token = args.get("view")
        if token is None:
            return _view_error("the request carries no view")
        view = verify(await self.key(), token, self._rt.clock.now_ms())
        if view is None:
            return _view_error("the view is not one this runtime signed, or it expired")
        named = meta.get(CONVERSATION_META) if isinstance(meta, Mapping) else None
        if named is not None and named != view.conversation_id:
            return _view_error("the view belongs to another conversation than the request's")
        if not self._serves_scope(view.scope):
            return _view_error("the view names an app this server does not serve")
        return view

    async def call(self, name: str, arguments: Any, meta: Any) -> dict[str, Any]:
        """`lineup-surface-sync` or `lineup-ui-action` (no call_id, no AgentMessage, no
        outbox item; `--max-wait` does not apply)."""
        args = arguments if isinstance(arguments, Mapping) else {}
        view = await self._view(args, meta)
        if not isinstance(view, View):
            return view
        if args.get("protocol") not in PROTOCOLS or isinstance(args.get("protocol"), bool):
            return _invalid(
                f"{name} takes protocol: one of {list(PROTOCOLS)} (this runtime's protocols)"
            )
        if name == SYNC_TOOL:
            return await self._sync(view, args)
        return await self._action(view, args)

    async def _sync(self, view: View, args: Mapping[str, Any]) -> dict[str, Any]:
        after = args.get("after_revision")
        after_ops = args.get("after_operations")
        wait_s = args.get("wait_s", 0)
        if (
            type(after) is not int
            or after < -1
            or (after_ops is not None and (not isinstance(after_ops, str) or len(after_ops) > 128))
            or isinstance(wait_s, bool)
            or not isinstance(wait_s, int | float)
            or not 0 <= wait_s < float("inf")
            or set(args) - {"view", "protocol", "after_revision", "after_operations", "wait_s"}
        ):
            return _invalid(
                f"{SYNC_TOOL} takes view, protocol, after_revision (an integer ≥ -1), "
                "optionally after_operations (the last operations_version) and wait_s "
                f"(seconds ≥ 0, at most {MAX_SYNC_WAIT_S:g} used)"
            )
        rt = self._rt
        surface = rt.surface(view.conversation_id, view.scope)

        def look() -> tuple[Any, list[dict[str, Any]]]:
            return surface.get(), surface.operations()

        limit = min(float(wait_s), MAX_SYNC_WAIT_S)
        if limit > 0:
            answer = await self._wait(view, surface, look, after, after_ops, limit)
            if answer is not None:
                return answer
        snap, ops = await anyio.to_thread.run_sync(look)
        ops_version = operations_version(ops)
        if snap.revision > after or after_ops != ops_version:
            return await self._changed(view, snap, ops, ops_version)
        structured = {"status": "unchanged", "revision": snap.revision}
        structured["operations_version"] = ops_version
        return _answer(structured, {SURFACE_META: await self._fresh(view, snap.revision)})

    async def _wait(
        self,
        view: View,
        surface: Any,
        look: Any,
        after: int,
        after_ops: Any,
        limit: float,
    ) -> dict[str, Any] | None:
        """Hold a sync up to `limit` seconds: woken by the session data's subscription
        (no polling for data), looking at the operation facts every `SYNC_POLL_S`."""
        token = anyio.lowlevel.current_token()
        wake = [anyio.Event()]

        def on_frame(kind: str, snap: Any) -> None:  # on the subscription's thread
            with contextlib.suppress(RuntimeError):  # the request is gone: nothing to wake
                anyio.from_thread.run_sync(wake[0].set, token=token)

        off = await anyio.to_thread.run_sync(surface.subscribe, on_frame)
        try:
            with anyio.move_on_after(limit):
                while True:
                    wake[0] = anyio.Event()  # before looking: a change after the look wakes
                    snap, ops = await anyio.to_thread.run_sync(look)
                    ops_version = operations_version(ops)
                    if snap.revision > after or after_ops != ops_version:
                        return await self._changed(view, snap, ops, ops_version)
                    with anyio.move_on_after(SYNC_POLL_S):
                        await wake[0].wait()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(off)
        return None

    async def _changed(
        self, view: View, snap: Any, ops: list[dict[str, Any]], ops_version: str
    ) -> dict[str, Any]:
        served = await anyio.to_thread.run_sync(self._served_version, view.scope)
        structured = {
            "status": "changed",
            "revision": snap.revision,
            "data": snap.data,
            "operations": ops,
            "operations_version": ops_version,
            "version": view.version,
            "served_version": served,
        }
        return _answer(structured, {SURFACE_META: await self._fresh(view, snap.revision)})

    def _served_version(self, scope: str) -> str | None:
        for app in self._rt.apps():
            if app["scope"] == scope:
                return str(app["version"])
        return None

    async def _fresh(self, view: View, revision: int) -> dict[str, Any]:
        """A refreshed view (another 24 hours) with the revision it was read at."""
        renewed = View(
            view.scope,
            view.app_session_id,
            view.conversation_id,
            view.version,
            self._rt.clock.now_ms() + VIEW_TTL_MS,
        )
        return {
            "view": mint(await self.key(), renewed),
            "revision": revision,
            "version": view.version,
            "scope": view.scope,
        }

    async def _action(self, view: View, args: Mapping[str, Any]) -> dict[str, Any]:
        if set(args) - {"view", "protocol", "client_id", "seq", "name", "params"}:
            return _invalid(
                f"{ACTION_TOOL} takes view, protocol, client_id, seq, name and params only"
            )
        surface = self._rt.surface(view.conversation_id, view.scope)
        name, params = args.get("name"), args.get("params", {})
        client_id, seq = args.get("client_id"), args.get("seq")

        def act() -> dict[str, Any]:
            outcome = surface.act(name, params, client_id=client_id, seq=seq)  # type: ignore[arg-type]
            return plain(outcome)

        try:
            outcome = await anyio.to_thread.run_sync(act)
        except LineupError as exc:
            return _error(exc.to_dict())
        meta = {SURFACE_META: await self._fresh(view, int(outcome.get("revision") or 0))}
        return _answer(dict(outcome), meta)
