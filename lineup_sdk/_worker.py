"""The MiniApp worker process: import the bundle's entry, then serve the JSON-lines bridge.

Started by the sandbox launcher (`lineup_sdk.sandbox.launch ... lineup_sdk._worker ENTRY
READ_FD WRITE_FD`) once the sandbox is in place and the app folder is on `sys.path`. The
bridge (`lineup_sdk.bridge`) runs on the two private pipe fds, never stdout, so a handler's
`print()` lands in the worker log. The worker exits when the runtime's end of the pipe
closes, so a killed runtime leaves no orphan.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from lineup_sdk._receive import Dispatcher
from lineup_sdk._registry import ActionRegistry, ToolRegistry, live_action_registries
from lineup_sdk.bridge import MAX_MESSAGE, connect_lines
from lineup_sdk.context import ActionContext, Snapshot, ToolContext
from lineup_sdk.errors import LineupError

#: Threads for sync handlers; when every one is stuck past its timeout the runtime
#: recycles the worker (SPEC 8, worker health).
HANDLER_THREADS = 8


class _Bridge:
    def __init__(self, writer: asyncio.WriteTransport) -> None:
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}

    def send(self, msg: dict[str, Any]) -> None:
        """Write one message.

        Raises:
            ValueError: not JSON, or over the bridge's size limit (nothing was written).
            TypeError: not JSON.
        """
        data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        raw = data.encode("utf-8") + b"\n"
        if len(raw) > MAX_MESSAGE:
            raise ValueError(f"{len(raw)} bytes, over the bridge limit of {MAX_MESSAGE}")
        self._writer.write(raw)

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            self.send({**msg, "id": rid})
            return await fut
        finally:
            self._pending.pop(rid, None)

    def answer(self, msg: dict[str, Any]) -> None:
        fut = self._pending.get(msg.get("id"))  # type: ignore[arg-type]
        if fut is not None and not fut.done():
            fut.set_result(msg)


class _SessionData:
    """`ctx.session_data` over the bridge, bound to one session's capability."""

    def __init__(
        self, bridge: _Bridge, cap: str, delivery: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._bridge, self._cap, self._delivery, self._loop = bridge, cap, delivery, loop

    async def _req(self, op: str, **extra: Any) -> Snapshot:
        msg = {"t": "sd", "d": self._delivery, "cap": self._cap, "op": op, **extra}
        reply = await self._bridge.request(msg)
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise LineupError(
                str(err.get("code", "worker_protocol_error")), str(err.get("message", ""))
            )
        return Snapshot(reply.get("data"), int(reply["revision"]))

    async def get(self) -> Snapshot:
        return await self._req("get")

    async def replace(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        if not isinstance(data, dict):
            raise LineupError("session_data_invalid", "session data must be a JSON object")
        return await self._req("replace", data=data, expected_revision=expected_revision)

    def get_sync(self) -> Snapshot:
        return asyncio.run_coroutine_threadsafe(self.get(), self._loop).result()

    def replace_sync(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        coro = self.replace(data, expected_revision=expected_revision)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        raise LineupError(
            "session_data_invalid", "handlers read with get(); the Surface subscribes"
        )


def _find_registry(module: Any) -> ToolRegistry:
    found = [v for v in vars(module).values() if isinstance(v, ToolRegistry)]
    if len(found) != 1:
        raise RuntimeError(f"the entry must define exactly one registry, found {len(found)}")
    return found[0]


def _find_actions(module: Any, scope: str) -> ActionRegistry | None:
    """The app's UI Action registry: the entry module's, else the one its imports
    defined (as the build finds it), else None."""
    found = [v for v in vars(module).values() if isinstance(v, ActionRegistry)]
    if not found:
        found = live_action_registries(scope)
    if len(found) > 1:
        raise RuntimeError(
            f"the app must define at most one UI Action registry, found {len(found)}"
        )
    return found[0] if found else None


def load(entry: str) -> Dispatcher:
    """Import the entry and find its registry and UI Actions (author code runs here).

    Raises:
        BaseException: whatever the import raised, or RuntimeError for an entry without
            exactly one registry.
    """
    module = importlib.import_module(entry)
    registry = _find_registry(module)
    return Dispatcher(registry, _find_actions(module, registry.app_scope))


def hello(dispatcher: Dispatcher) -> dict[str, Any]:
    """What the worker serves: tools and UI Actions separately (the runtime compares each
    with the manifest, SPEC 17), its pid and its handler threads."""
    return {
        "t": "hello",
        "methods": dispatcher.methods(),
        "actions": dispatcher.actions(),
        "pid": os.getpid(),
        "threads": HANDLER_THREADS,
    }


async def _serve(entry: str, rfd: int, wfd: int, sandbox: dict[str, Any]) -> int:
    """The cold path: report the sandbox, import the entry, then serve."""
    return await serve(None, rfd, wfd, sandbox, entry=entry)


async def serve(
    dispatcher: Dispatcher | None,
    rfd: int,
    wfd: int,
    sandbox: dict[str, Any] | None,
    *,
    entry: str = "",
    gated: bool = False,
) -> int:
    """Serve the bridge on `rfd`/`wfd`: the sandbox report first when there is one (the
    cold path: before any author code runs, so it cannot rewrite it), then the entry's
    import unless `dispatcher` is given (a worker forked from an image has it), the hello
    (`gated`: once the runtime's `go` line comes), and deliveries until the runtime
    closes the pipe."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="handler")
    )
    ended: asyncio.Future[int] = loop.create_future()
    inbox = _Inbox(ended)
    await connect_lines(loop, lambda: inbox, rfd)
    transport, _ = await loop.connect_write_pipe(
        asyncio.Protocol, os.fdopen(wfd, "wb", buffering=0)
    )
    bridge = _Bridge(transport)
    if sandbox is not None:
        bridge.send({"t": "sandbox", "report": sandbox})
        if sandbox.get("refused"):
            bridge.send(
                {"t": "fatal", "code": "sandbox_unavailable", "message": sandbox["refused"]}
            )
            await asyncio.sleep(0)
            return 5
    if dispatcher is None:
        try:
            dispatcher = load(entry)
        except BaseException as exc:  # report any import failure, then stop
            logging.getLogger("lineup.worker").exception("cannot import %s", entry)
            bridge.send({"t": "fatal", "message": f"{type(exc).__name__}: {exc}"})
            await asyncio.sleep(0)
            return 3
    served = dispatcher
    if not gated:
        bridge.send(hello(served))
    tasks: set[asyncio.Task[None]] = set()
    # sync deliveries in flight: id -> monotonic time after which the handler is stuck
    overdue_at: dict[int, float] = {}

    async def run(msg: dict[str, Any]) -> None:
        c = msg["ctx"]
        # a delivery without `kind` is a tool call; `kind: action` a UI Action (SPEC 17);
        # any other kind finds no handler and is answered `handler_failed`
        kind = msg.get("kind", "tool")
        session_data = _SessionData(bridge, c["cap"], msg["id"], loop)
        ctx: ToolContext | ActionContext
        if kind == "action":
            ctx = ActionContext(
                action_id=c["action_id"],
                client_id=c["client_id"],
                app_scope=c["app_scope"],
                app_session_id=c["app_session_id"],
                conversation_id=c["conversation_id"],
                session_data=session_data,
            )
        else:
            ctx = ToolContext(
                call_id=c.get("call_id", ""),
                app_scope=c["app_scope"],
                app_session_id=c["app_session_id"],
                conversation_id=c["conversation_id"],
                session_data=session_data,
            )
        if served.is_sync(msg["method"], kind):
            overdue_at[msg["id"]] = time.monotonic() + float(c.get("timeout_s", 30))
        try:
            out = await served.dispatch(msg["method"], msg["params"], ctx, kind=kind)
        finally:
            overdue_at.pop(msg["id"], None)
        reply: dict[str, Any] = {"t": "result", "id": msg["id"], "ok": out.ok}
        if out.ok:
            reply["result"] = out.result
        else:
            reply["error"] = out.error
        try:
            bridge.send(reply)
        except (TypeError, ValueError) as exc:
            bridge.send(
                {
                    "t": "result",
                    "id": msg["id"],
                    "ok": False,
                    "error": {
                        "code": "handler_result_invalid",
                        "message": f"the result cannot be sent: {exc}",
                    },
                }
            )

    def on_line(line: bytes) -> None:
        try:
            msg = json.loads(line)
            kind = msg.get("t")
        except (ValueError, RecursionError, AttributeError):
            inbox.end(4)  # the runtime never sends this: stop rather than guess
            return
        if kind == "deliver":
            task = asyncio.create_task(run(msg))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif kind == "sd_reply":
            bridge.answer(msg)
        elif kind == "ping":
            now = time.monotonic()
            stuck = sum(1 for t in overdue_at.values() if t < now)
            bridge.send({"t": "pong", "id": msg["id"], "stuck": stuck})

    def on_go(line: bytes) -> None:
        try:
            go = json.loads(line).get("t") == "go"
        except (ValueError, RecursionError, AttributeError):
            go = False
        if not go:
            inbox.end(4)
            return
        inbox.on_line = on_line
        bridge.send(hello(served))

    inbox.on_line = on_go if gated else on_line
    inbox._flush_early()
    return await ended


class _Inbox(asyncio.Protocol):
    """The runtime → worker pipe: each line handled as it arrives (no reader task in
    between); the end of the pipe ends the worker (0), an oversized line too (4)."""

    def __init__(self, ended: asyncio.Future[int]) -> None:
        self._ended = ended
        self._buffer = bytearray()
        self.on_line: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []

    def end(self, code: int) -> None:
        if not self._ended.done():
            self._ended.set_result(code)

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        start = 0
        while not self._ended.done():
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = bytes(buf[start : end + 1])
            start = end + 1
            if self.on_line is None:
                self._early.append(line)  # before the entry imported: kept for later
            else:
                self._flush_early()
                self.on_line(line)
        del buf[:start]
        if len(buf) > MAX_MESSAGE:
            self.end(4)

    def _flush_early(self) -> None:
        assert self.on_line is not None
        while self._early and not self._ended.done():
            self.on_line(self._early.pop(0))

    def eof_received(self) -> bool | None:
        if self.on_line is not None:
            self._flush_early()
        self.end(0)  # the runtime closed the pipe: exit, leaving no orphan
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.end(0)


def main(argv: list[str], sandbox: dict[str, Any]) -> None:
    """Worker entry point, called by the sandbox launcher."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    entry, rfd, wfd = argv[0], int(argv[1]), int(argv[2])
    code = asyncio.run(_serve(entry, rfd, wfd, sandbox))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
