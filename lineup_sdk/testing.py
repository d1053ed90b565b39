"""Call a MiniApp's tools and run its UI Actions in-process, as the runtime would, without
a worker or a bundle.

```python
from lineup_sdk.testing import ToolClient
from my_app.tools import tools
from my_app.actions import actions

client = ToolClient(tools, actions=actions)
added = client.call("todo.add", {"title": "milk"}, call_id="a1")
assert added.ok and added.result["count"] == 1
assert client.session_data.get_sync().revision == 1
assert client.call("todo.complete", {"item_id": "nope"}).code == "app.not_found"

ticked = client.act("todo.toggle", {"id": "a1"}, client_id="surface-1")
assert ticked.ok and ticked.action_id == "surface-1:1" and ticked.revision == 2
```

Params are checked against the tool's or action's input schema exactly as the build
derives it (closed: an unknown key or `"2"` for an integer is `invalid_params`), the
handler runs with a real `ToolContext` (or `ActionContext`) over in-memory session data,
the result is checked against the result schema (`handler_result_invalid`), and a
`ToolError` becomes `app.<code>`.

Every delivery is atomic, as in the runtime (SPEC 17): what a handler writes is held as
its pending snapshot and applied only when it returns a valid result. Inside the handler,
`get` reads the pending snapshot; `replace` checks `expected_revision` against it and
returns revision *base + 1* for the first write and every later one; the delivery then
commits one revision (base + 1) and one `session_data.changed` frame. A handler that
raises (a `ToolError` or anything else), or returns a result its schema refuses, changes
nothing. Deliveries of one client run one at a time, in the order they are awaited.

`act(name, params, client_id=..., seq=...)` numbers a client's actions 1, 2, 3… unless
`seq` is given; `action_id` is `"<client_id>:<seq>"`, and the outcome carries the session
data's revision after the action. The queue's own rules — replaying a seq, conflicts,
order, `action_pending` — and runtime-delivered tools (Pomodoro), activations and
timeouts are the runtime's: test them with `lineup_runtime_lite.testing`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_sdk._extract import _Extractor
from lineup_sdk._receive import Dispatcher
from lineup_sdk._registry import ActionRegistry, Declaration, ToolRegistry
from lineup_sdk.context import ActionContext, Snapshot, ToolContext, session_data_blob
from lineup_sdk.errors import LineupError

__all__ = ["ActionResult", "CallResult", "MemorySessionData", "ToolClient"]


def _canonical(data: Any) -> bytes:
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


class MemorySessionData:
    """In-memory session data with the runtime's rules: `get()` → `Snapshot(None, 0)` at
    first; `replace(data, expected_revision=n)` → revision n+1, or
    `session_data_revision_conflict`; a JSON object of at most 1 MiB
    (`session_data_invalid`, `session_data_too_large`); subscribers get the current
    snapshot, then every change."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str, Snapshot], None]] = []
        self._snap = Snapshot(None, 0)
        if data is not None:
            self.replace_sync(data, expected_revision=0)

    async def get(self) -> Snapshot:
        """Read the current snapshot."""
        return self.get_sync()

    async def replace(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        """Replace the whole object if the revision is still `expected_revision`."""
        return self.replace_sync(data, expected_revision=expected_revision)

    def get_sync(self) -> Snapshot:
        """`get()` for sync handlers and tests (a deep copy: the stored data never changes
        behind a handler's back)."""
        with self._lock:
            return Snapshot(copy.deepcopy(self._snap.data), self._snap.revision)

    def replace_sync(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        """`replace()` for sync handlers and tests.

        Raises:
            LineupError: `session_data_invalid`, `session_data_too_large`,
                `session_data_revision_conflict`.
        """
        blob = session_data_blob(data, expected_revision)  # the runtime's own rules
        with self._lock:
            if self._snap.revision != expected_revision:
                raise LineupError(
                    "session_data_revision_conflict",
                    f"session data is at revision {self._snap.revision}, not {expected_revision}",
                )
            self._snap = Snapshot(json.loads(blob), self._snap.revision + 1)
            snap, listeners = self._snap, list(self._listeners)
        for listener in listeners:
            listener("session_data.changed", Snapshot(copy.deepcopy(snap.data), snap.revision))
        return Snapshot(copy.deepcopy(snap.data), snap.revision)

    def _commit(self, data: dict[str, Any], base: int) -> Snapshot:
        """Apply one delivery's pending data on top of revision `base`: one revision, one
        frame (deliveries run one at a time, so `base` is still current)."""
        with self._lock:
            if self._snap.revision != base:  # a test wrote behind the delivery's back
                raise LineupError(
                    "session_data_revision_conflict",
                    f"session data moved to revision {self._snap.revision} during the delivery",
                )
            self._snap = Snapshot(copy.deepcopy(data), base + 1)
            snap, listeners = self._snap, list(self._listeners)
        for listener in listeners:
            listener("session_data.changed", Snapshot(copy.deepcopy(snap.data), snap.revision))
        return Snapshot(copy.deepcopy(snap.data), snap.revision)

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Register a listener; it gets the current snapshot first. Returns the function
        that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)
            snap = Snapshot(copy.deepcopy(self._snap.data), self._snap.revision)
        listener("session_data.snapshot", snap)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe


class _PendingSessionData:
    """`ctx.session_data` inside one delivery: reads and writes a pending snapshot over
    the committed one; nothing reaches `MemorySessionData` until the delivery commits."""

    def __init__(self, committed: MemorySessionData) -> None:
        self._committed = committed
        base = committed.get_sync()
        self.base = base.revision
        self._data = base.data
        self._revision = base.revision
        self.wrote = False
        self._lock = threading.Lock()

    async def get(self) -> Snapshot:
        return self.get_sync()

    async def replace(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        return self.replace_sync(data, expected_revision=expected_revision)

    def get_sync(self) -> Snapshot:
        with self._lock:
            return Snapshot(copy.deepcopy(self._data), self._revision)

    def replace_sync(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        blob = session_data_blob(data, expected_revision)  # the runtime's own rules
        with self._lock:
            if expected_revision != self._revision:
                raise LineupError(
                    "session_data_revision_conflict",
                    f"session data is at revision {self._revision}, not {expected_revision}",
                )
            self._data = json.loads(blob)
            self._revision = self.base + 1  # the pending snapshot is replaced in place
            self.wrote = True
            return Snapshot(copy.deepcopy(self._data), self._revision)

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        raise LineupError(
            "session_data_invalid", "handlers read with get(); the Surface subscribes"
        )

    def commit(self) -> int:
        """Apply what the delivery wrote (one revision, one frame); the revision after it."""
        if not self.wrote:
            return self._committed.get_sync().revision
        assert self._data is not None
        return self._committed._commit(self._data, self.base).revision


@dataclass(frozen=True)
class CallResult:
    """What the Agent would receive: `ok` with a JSON `result`, or an `error` object
    `{code, message, details?}`."""

    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def code(self) -> str | None:
        """The error code (`invalid_params`, `app.not_found`, ...), or None when ok."""
        return None if self.error is None else str(self.error["code"])


@dataclass(frozen=True)
class ActionResult:
    """What a Surface would receive for a UI Action: `ok` with the outcome's `action_id`,
    `result` and `revision` (the session data's revision after it), or an `error`
    `{code, message, details?}` (the data unchanged; `action_id` None for a rejection
    before acceptance, `invalid_params`, which uses no seq)."""

    ok: bool
    action_id: str | None
    result: Any = None
    revision: int | None = None
    error: dict[str, Any] | None = None

    @property
    def code(self) -> str | None:
        """The error code (`invalid_params`, `app.not_found`, ...), or None when ok."""
        return None if self.error is None else str(self.error["code"])


def _problems(schema: dict[str, Any], value: Any) -> list[dict[str, Any]]:
    from jsonschema import Draft202012Validator, FormatChecker

    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    out = []
    for err in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        path = "".join(
            "/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path
        )
        out.append({"path": path, "message": err.message})
    return out


class ToolClient:
    """Calls the tools (and runs the UI Actions) of one app the way the runtime delivers
    them, each delivery atomic.

    Args:
        registry: The app's `define_agent_tools(...)` registry.
        actions: The app's `define_ui_actions(...)` registry, to run its actions with
            `act` / `aact`.
        conversation_id: The conversation every call comes from.
        app_session_id: The App session the calls are delivered to.
        session_data: The session's data (default: empty `MemorySessionData`).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        actions: ActionRegistry | None = None,
        conversation_id: str = "c1",
        app_session_id: str = "test-session",
        session_data: MemorySessionData | None = None,
    ) -> None:
        self.registry = registry
        self.actions = actions
        self.conversation_id = conversation_id
        self.app_session_id = app_session_id
        self.session_data = session_data if session_data is not None else MemorySessionData()
        self._dispatcher = Dispatcher(registry, actions)
        self._specs: dict[tuple[str, str], dict[str, Any]] = {}
        self._count = 0
        self._seqs: dict[str, int] = {}
        self._serial = threading.Lock()

    def _derive(self, decl: Declaration, method: str) -> dict[str, Any]:
        extractor = _Extractor(Path.cwd())
        spec = (
            extractor.action(decl)
            if decl.origin == "action"
            else extractor.tool(self.registry, decl)
        )
        if spec is None or extractor.problems:
            first = extractor.problems[0] if extractor.problems else None
            raise LineupError(
                first["code"] if first else "handler_signature_mismatch",
                first["message"] if first else f"cannot derive the schemas of {method}",
            )
        return spec

    def spec(self, method: str) -> dict[str, Any]:
        """The tool's description and schemas as the build would put them in the manifest.

        Raises:
            LineupError: `unknown_method`; `usage_invalid` for a runtime-delivered tool;
                `handler_signature_mismatch` when its schemas cannot be derived.
        """
        if ("tool", method) in self._specs:
            return self._specs["tool", method]
        decl = self.registry.get(method)
        if decl is None:
            raise LineupError("unknown_method", f"{self.registry.app_scope} declares no {method!r}")
        if decl.delivery == "runtime":
            raise LineupError(
                "usage_invalid",
                f"{method} is delivered by the runtime; test it with lineup_runtime_lite.testing",
                exit_code=2,
            )
        spec = self._specs["tool", method] = self._derive(decl, method)
        return spec

    def action_spec(self, name: str) -> dict[str, Any]:
        """The UI Action's description, timeout and schemas as the build derives them.

        Raises:
            LineupError: `unknown_action` (no such action, or no `actions` registry given:
                a tool's name is not an action); `handler_signature_mismatch` when its
                schemas cannot be derived.
        """
        if ("action", name) in self._specs:
            return self._specs["action", name]
        decl = self.actions.get(name) if self.actions is not None else None
        if decl is None:
            raise LineupError(
                "unknown_action",
                f"{self.registry.app_scope} declares no UI Action {name!r}",
                hint="pass the app's define_ui_actions registry as ToolClient(..., actions=...)"
                if self.actions is None
                else None,
            )
        spec = self._specs["action", name] = self._derive(decl, name)
        return spec

    @staticmethod
    def _invalid(method: str, params: Any, spec: dict[str, Any]) -> dict[str, Any] | None:
        """The `invalid_params` error of `params`, or None when they match the schema."""
        problems = (
            [{"path": "", "message": "params must be a JSON object"}]
            if not isinstance(params, dict)
            else _problems(spec["input_schema"], params)
        )
        if not problems:
            return None
        return {
            "code": "invalid_params",
            "message": f"params of {method} do not match its input schema",
            "details": problems,
        }

    async def _deliver(
        self,
        method: str,
        params: dict[str, Any],
        spec: dict[str, Any],
        make_ctx: Callable[[_PendingSessionData], ToolContext | ActionContext],
        kind: str,
    ) -> tuple[bool, Any, dict[str, Any] | None, int]:
        """Run one delivery of valid `params` and commit it atomically: `(ok, result,
        error, revision after it)`."""
        # one delivery at a time per App session, as the runtime delivers them
        await asyncio.to_thread(self._serial.acquire)
        try:
            pending = _PendingSessionData(self.session_data)
            ctx = make_ctx(pending)
            outcome = await self._dispatcher.dispatch(method, copy.deepcopy(params), ctx, kind=kind)
            if not outcome.ok:
                return False, None, outcome.error, pending.base
            try:
                result = json.loads(_canonical(outcome.result))
            except (TypeError, ValueError) as exc:
                problems = [{"path": "", "message": f"the result is not JSON: {exc}"}]
            else:
                problems = _problems(spec["result_schema"], result)
            if problems:
                error = {
                    "code": "handler_result_invalid",
                    "message": f"the result of {method} does not match its result schema",
                    "details": problems,
                }
                return False, None, error, pending.base
            return True, result, None, pending.commit()
        finally:
            self._serial.release()

    async def acall(
        self, method: str, params: Any = None, *, call_id: str | None = None
    ) -> CallResult:
        """Call `method` with `params` (default `{}`) and return what the Agent would get."""
        spec = self.spec(method)
        params = {} if params is None else params
        invalid = self._invalid(method, params, spec)
        if invalid is not None:
            return CallResult(False, error=invalid)
        self._count += 1
        cid = call_id or f"call-{self._count}"

        def make_ctx(data: _PendingSessionData) -> ToolContext:
            return ToolContext(
                call_id=cid,
                app_scope=self.registry.app_scope,
                app_session_id=self.app_session_id,
                conversation_id=self.conversation_id,
                session_data=data,
            )

        ok, result, error, _ = await self._deliver(method, params, spec, make_ctx, "tool")
        return CallResult(True, result=result) if ok else CallResult(False, error=error)

    def call(self, method: str, params: Any = None, *, call_id: str | None = None) -> CallResult:
        """`acall()` from synchronous code (not inside a running event loop)."""
        return asyncio.run(self.acall(method, params, call_id=call_id))

    async def aact(
        self,
        name: str,
        params: Any = None,
        *,
        client_id: str = "test-client",
        seq: int | None = None,
    ) -> ActionResult:
        """Run UI Action `name` with `params` (default `{}`) as Surface client `client_id`
        asks for it, and return its outcome.

        Raises:
            LineupError: `unknown_action` (see `action_spec`).
        """
        spec = self.action_spec(name)
        params = {} if params is None else params
        invalid = self._invalid(name, params, spec)
        if invalid is not None:  # a rejection before acceptance: no action id, no seq used
            return ActionResult(False, None, error=invalid)
        if seq is None:
            seq = self._seqs.get(client_id, 0) + 1
        self._seqs[client_id] = max(seq, self._seqs.get(client_id, 0))
        action_id = f"{client_id}:{seq}"

        def make_ctx(data: _PendingSessionData) -> ActionContext:
            return ActionContext(
                action_id=action_id,
                client_id=client_id,
                app_scope=self.registry.app_scope,
                app_session_id=self.app_session_id,
                conversation_id=self.conversation_id,
                session_data=data,
            )

        ok, result, error, revision = await self._deliver(name, params, spec, make_ctx, "action")
        if ok:
            return ActionResult(True, action_id, result=result, revision=revision)
        return ActionResult(False, action_id, error=error)

    def act(
        self,
        name: str,
        params: Any = None,
        *,
        client_id: str = "test-client",
        seq: int | None = None,
    ) -> ActionResult:
        """`aact()` from synchronous code (not inside a running event loop)."""
        return asyncio.run(self.aact(name, params, client_id=client_id, seq=seq))
