"""An in-process worker at the worker port (`drivers.workers.WorkerPort`), the shape of
httpx's `MockTransport`: the pool asks the port for a worker, and this one answers each
delivery by calling the app's handler in this process through `lineup_sdk`'s dispatcher
(its session data read and replaced through the runtime's own session requests), or with
a scripted reply. No process, pipe or sandbox: the engine and its drivers run as they do
in production, on whatever store and clock the runtime was opened with.

```python
port = InProcessPort()
monkeypatch.setattr(lineup_runtime_lite.drivers.workers, "process_port", port)
```
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from lineup_runtime_lite.processes.worker import Worker, WorkerError
from lineup_sdk import _registry
from lineup_sdk._receive import Dispatcher
from lineup_sdk._registry import ActionRegistry, ToolRegistry
from lineup_sdk._worker import _SessionData
from lineup_sdk.context import ActionContext, ToolContext

__all__ = ["InProcessPort", "InProcessWorker"]

#: A scripted answer: the reply a delivery of `method` with `params` gets (`{"ok": True,
#: "result": ...}` or `{"ok": False, "error": {...}}`), or None to call the handler.
Script = Callable[[str, Any], dict[str, Any] | None]


#: Registries loaded, by entry and the digest of its app's files: `lineup_sdk` allows one
#: registry per module in a process, so the same app, installed again, reuses its own.
_LOADED: dict[tuple[str, str], tuple[ToolRegistry, ActionRegistry | None]] = {}


def _digest(app_dir: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(app_dir.rglob("*.py")):
        h.update(str(path.relative_to(app_dir)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def load_registry(app_dir: Path, entry: str) -> tuple[ToolRegistry, ActionRegistry | None]:
    """Import `entry` from `app_dir` as a worker does, then forget its modules (another
    app's entry of the same name imports afresh): its tool registry and the UI Action
    registry its modules define, if any (SPEC 17)."""
    key = (entry, _digest(app_dir))
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    top = entry.split(".")[0]
    before = set(sys.modules)
    sys.path.insert(0, str(app_dir))
    try:
        for live in (_registry._LIVE, _registry._LIVE_ACTIONS):
            for name in [n for n in live if n == top or n.startswith(top + ".")]:
                del live[name]  # another app's module of the same name
        module = importlib.import_module(entry)
        actions = [
            v
            for name in set(sys.modules) - before
            if name == top or name.startswith(top + ".")
            for v in vars(sys.modules[name]).values()
            if isinstance(v, ActionRegistry)
        ]
    finally:
        sys.path.remove(str(app_dir))
        for name in set(sys.modules) - before:
            if name == top or name.startswith(top + "."):
                del sys.modules[name]
    found = [v for v in vars(module).values() if isinstance(v, ToolRegistry)]
    assert len(found) == 1, f"{entry} must define exactly one registry"
    unique = list({id(a): a for a in actions}.values())
    assert len(unique) <= 1, f"{entry} must define at most one UI Action registry"
    _LOADED[key] = (found[0], unique[0] if unique else None)
    return _LOADED[key]


class _ProcessExit(BaseException):
    """A handler called `os._exit`: in a worker process that is a crash."""


def _exit(status: int) -> None:
    raise _ProcessExit(status)


_REAL_EXIT = os._exit
_exiting = [0]  # deliveries in flight with `os._exit` turned into `_ProcessExit`


@contextlib.contextmanager
def _exits_crash() -> Iterator[None]:
    """While any delivery runs here, `os._exit` raises `_ProcessExit` (put back after the
    last one, whatever order they end in)."""
    _exiting[0] += 1
    os._exit = _exit  # type: ignore[assignment]
    try:
        yield
    finally:
        _exiting[0] -= 1
        if not _exiting[0]:
            os._exit = _REAL_EXIT


class _Requests:
    """What the SDK's `ctx.session_data` sends on the bridge, handed straight to the
    runtime's session requests (the SDK's own `_SessionData` runs on top of it)."""

    def __init__(self, worker: InProcessWorker) -> None:
        self._worker = worker

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = await self._worker.on_session_request(
            cast(Worker, self._worker), msg
        )
        return reply


class InProcessWorker:
    """What the drivers use of a `Worker`, answered in this process."""

    def __init__(
        self,
        scope: str,
        version: str,
        app_dir: Path,
        entry: str,
        log_path: Path,
        on_session_request: Any,
        *,
        script: Script | None = None,
        **_options: Any,
    ) -> None:
        self.scope, self.version = scope, version
        self.app_dir, self.entry, self.log_path = app_dir, entry, log_path
        self.on_session_request = on_session_request
        self.script = script
        self.dead = False
        self.draining = False
        self.sandbox: dict[str, Any] | None = None
        self.methods: list[str] | None = None
        self.actions: list[str] = []
        self._dispatcher: Dispatcher | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Every delivery this worker was sent: `(method, params)`.
        self.deliveries: list[tuple[str, Any]] = []

    @property
    def busy(self) -> bool:
        return any(not f.done() for f in self._pending.values())

    async def start(self) -> list[str]:
        self._dispatcher = Dispatcher(*load_registry(self.app_dir, self.entry))
        self.methods = self._dispatcher.methods()
        self.actions = self._dispatcher.actions()
        return self.methods

    def send_delivery(
        self, method: str, params_json: str, ctx: dict[str, Any], *, kind: str = "tool"
    ) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        if self.dead:
            raise WorkerError("crashed", "the worker stopped")
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        params = json.loads(params_json)
        self.deliveries.append((method, params))
        task = asyncio.ensure_future(self._run(rid, method, params, ctx, fut, kind))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return rid, fut

    async def _run(
        self,
        rid: int,
        method: str,
        params: Any,
        ctx: dict[str, Any],
        fut: asyncio.Future[dict[str, Any]],
        kind: str = "tool",
    ) -> None:
        reply = self.script(method, params) if self.script is not None else None
        if reply is None:
            assert self._dispatcher is not None, "a delivery before start()"
            session_data = _SessionData(
                cast(Any, _Requests(self)), ctx["cap"], rid, asyncio.get_running_loop()
            )
            handler_ctx: ToolContext | ActionContext
            if kind == "action":
                handler_ctx = ActionContext(
                    action_id=ctx["action_id"],
                    client_id=ctx["client_id"],
                    app_scope=ctx["app_scope"],
                    app_session_id=ctx["app_session_id"],
                    conversation_id=ctx["conversation_id"],
                    session_data=session_data,
                )
            else:
                handler_ctx = ToolContext(
                    call_id=ctx["call_id"],
                    app_scope=ctx["app_scope"],
                    app_session_id=ctx["app_session_id"],
                    conversation_id=ctx["conversation_id"],
                    session_data=session_data,
                )
            # a handler that ends its process (`os._exit`) crashes this worker, not the test
            try:
                with _exits_crash():
                    out = await self._dispatcher.dispatch(method, params, handler_ctx, kind=kind)
            except _ProcessExit:
                await self.kill()
                return
            reply = {"ok": out.ok}
            if out.ok:
                reply["result"] = out.result
            else:
                reply["error"] = out.error
        if not fut.done():
            fut.set_result({"t": "result", "id": rid, **reply})

    def forget(self, rid: int) -> None:
        self._pending.pop(rid, None)

    def timed_out(self, rid: int) -> None:
        self.forget(rid)
        self.drain()

    def end_delivery(self, rid: int, message: str) -> None:
        fut = self._pending.get(rid)
        if fut is not None and not fut.done():
            fut.set_exception(WorkerError("protocol", message))
        self.forget(rid)

    def in_flight(self, rid: int) -> bool:
        fut = self._pending.get(rid)
        return fut is not None and not fut.done()

    def drain(self) -> None:
        self.draining = True

    async def kill(self) -> None:
        self.dead = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(WorkerError("crashed", "the worker was stopped"))
        for task in list(self._tasks):
            task.cancel()


class InProcessPort:
    """A `WorkerPort` whose workers answer in this process; `workers` are those it made."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script
        self.workers: list[InProcessWorker] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Worker:
        worker = InProcessWorker(*args, script=self.script, **kwargs)
        self.workers.append(worker)
        return cast(Worker, worker)
