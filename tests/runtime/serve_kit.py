"""Helpers for `lineup serve` tests: the bridge over in-memory streams or in-process HTTP,
driven by the real `mcp.ClientSession`, and a raw JSON-RPC client for MCP tasks (the SDK's
client validates every `tools/call` answer as a `CallToolResult`, so it cannot create one)."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp.types as mt
from mcp import ClientSession
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.serve import Bridge, HttpLimits, ServeOptions, serve_http

#: Quick looks and heartbeats, so tests see repeated progress without long waits.
#: Fast polling; dotted names so the mapping tests read as the manifest (dashed is tested
#: on its own and is what `lineup serve` uses by default).
FAST = ServeOptions(tool_names="dotted", heartbeat_s=0.05, poll_s=0.01)
TOKEN = "test-token-0123456789"


def call_meta(items: dict[str, str]) -> mt.RequestParamsMeta:
    """A request's `_meta` with LineUp's keys (`io.lineup/call_id`, ...): the SDK types it as an
    open TypedDict (`extra_items`), which type checkers do not read yet."""
    return cast(mt.RequestParamsMeta, items)


def open_runtime(db: Path | str, trust: Any, bundles: list[Path]) -> tuple[Runtime, VirtualClock]:
    """A runtime on a virtual clock with the Host simulator on `auto`, apps installed."""
    clock = VirtualClock()
    rt = Runtime.open(db, trust=trust, clock=clock, host=HostSimulator(policy="auto"))
    for bundle in bundles:
        rt.install(bundle)
    return rt, clock


@asynccontextmanager
async def memory_session(bridge: Bridge, *, modern: bool = False) -> AsyncIterator[ClientSession]:
    """A `ClientSession` connected to `bridge` over in-memory streams: initialized on
    2025-11-25, or (`modern`) discovered on the stateless 2026-07-28."""
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(bridge.run, *server_streams)
        async with ClientSession(*client_streams) as session:
            await (session.discover() if modern else session.initialize())
            yield session
        tg.cancel_scope.cancel()


class HttpServer:
    """`serve_http` on a free loopback port in a thread; `stop()` ends it."""

    def __init__(self, bridge: Bridge, limits: HttpLimits | None = None) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._stop = threading.Event()
        self.error: BaseException | None = None

        def ready(url: str) -> None:
            self.url = url
            self._ready.set()

        def run() -> None:
            try:
                serve_http(
                    bridge, "127.0.0.1", 0, TOKEN, on_ready=ready, stop=self._stop, limits=limits
                )
            except BaseException as exc:  # surfaced by start()
                self.error = exc
                self._ready.set()

        self._thread = threading.Thread(target=run, name="serve-http", daemon=True)

    def start(self) -> HttpServer:
        self._thread.start()
        assert self._ready.wait(30), "the HTTP server did not start"
        if self.error is not None:
            raise self.error
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()


@asynccontextmanager
async def http_session(url: str, token: str = TOKEN) -> AsyncIterator[ClientSession]:
    """A `ClientSession` over streamable HTTP with the bearer token, initialized."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
    )
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class RawClient:
    """JSON-RPC by hand over a bridge's in-memory streams (protocol 2025-11-25)."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read, self._write = read, write
        self._next = 0
        self.notifications: list[dict[str, Any]] = []

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request; the whole response (`result` or `error`)."""
        self._next += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            body["params"] = params
        await self._write.send(SessionMessage(mt.jsonrpc_message_adapter.validate_python(body)))
        while True:
            item = await self._read.receive()
            assert not isinstance(item, Exception), item
            out: dict[str, Any] = item.message.model_dump(by_alias=True, exclude_none=True)
            if out.get("id") == self._next:
                return out
            self.notifications.append(out)

    async def notify(self, method: str) -> None:
        body = {"jsonrpc": "2.0", "method": method}
        await self._write.send(SessionMessage(mt.jsonrpc_message_adapter.validate_python(body)))


@asynccontextmanager
async def raw_session(
    bridge: Bridge, *, extensions: dict[str, Any] | None = None
) -> AsyncIterator[RawClient]:
    """A hand-driven JSON-RPC client, after the 2025-11-25 handshake (declaring
    `extensions` in its capabilities when given)."""
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(bridge.run, *server_streams)
        raw = RawClient(*client_streams)
        init = await raw.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"extensions": extensions} if extensions is not None else {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        assert init["result"]["protocolVersion"] == "2025-11-25"
        await raw.notify("notifications/initialized")
        yield raw
        tg.cancel_scope.cancel()


async def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait (on real time, for an event — never for a deadline) until `check()` holds."""
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.01)


async def advance(clock: VirtualClock, ms: int) -> None:
    """Move the virtual clock without blocking the event loop that serves MCP."""
    await anyio.to_thread.run_sync(clock.advance, ms)


def address(url: str) -> tuple[str, int]:
    """`(host, port)` of an `http://host:port/...` URL or origin."""
    hostport = url.split("//", 1)[1].split("/", 1)[0]
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


def socket_closed(s: socket.socket) -> bool:
    """Whether the server closed `s` (EOF or reset), reading what it sent; never blocks."""
    s.setblocking(False)
    try:
        data = s.recv(65536)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b"" or socket_closed(s)


class Progress:
    """A progress callback that keeps every notification."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))

    @property
    def messages(self) -> list[str]:
        return [m or "" for _, _, m in self.seen]

    @property
    def stages(self) -> list[str]:
        """The receipts relayed, without the repeated "still waiting" notifications."""
        return [m for m in self.messages if not m.startswith(("waiting: ", "focusing: "))]
