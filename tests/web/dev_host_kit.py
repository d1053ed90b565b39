"""What the browser tests of `lineup dev` share: an async MCP client run in a thread of its
own beside sync Playwright, and one `tools/call` over the dev runtime's `/mcp`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    """An async client in a thread of its own (sync Playwright owns this thread's loop)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, fn, *args).result(timeout=60)


async def _mcp_call(url: str, token: str, name: str, args: dict[str, Any]) -> Any:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await session.call_tool(name, args)
