"""A raw JSON-RPC client on the 2026-07-28 protocol for the MCP tasks extension tests of
`lineup serve`: every request carries its envelope in `_meta`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.shared.memory import create_client_server_memory_streams

from lineup_runtime_lite.serve import Bridge
from tests.runtime.serve_kit import RawClient

TASKS = "io.modelcontextprotocol/tasks"


class ModernClient:
    """JSON-RPC on 2026-07-28: every request carries the envelope in its `_meta`; `tasks`
    says whether that request declares the tasks extension."""

    def __init__(self, raw: RawClient) -> None:
        self.raw = raw

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, tasks: bool = True
    ) -> dict[str, Any]:
        caps: dict[str, Any] = {"extensions": {TASKS: {}}} if tasks else {}
        params = dict(params or {})
        params["_meta"] = {
            **params.get("_meta", {}),
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "0"},
        }
        return await self.raw.request(method, params)

    async def tool_name(self, method: str) -> str:
        """The listed name of a method, whichever `--tool-names` spelling is the default."""
        tools = (await self.request("tools/list"))["result"]["tools"]
        for t in tools:
            if t["name"] in (method, method.replace(".", "-")):
                return str(t["name"])
        raise AssertionError(f"{method} is not listed: {[t['name'] for t in tools]}")


@asynccontextmanager
async def modern_session(bridge: Bridge) -> AsyncIterator[ModernClient]:
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(bridge.run, *server_streams)
        yield ModernClient(RawClient(*client_streams))
        tg.cancel_scope.cancel()
