"""`lineup dev`'s `/mcp` serves what `lineup serve --http` does for MCP Apps (SPEC 18.2), so
an author can point a host at the dev runtime: linked tools, the app-only tools and the
document for a client that declares the extension; today's tools for one that does not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.web.dev_host_kit import _run

UI = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


async def _look(url: str, token: str, declared: bool) -> tuple[dict[str, Any], str]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write, extensions=UI if declared else None) as session,
    ):
        await session.initialize()
        tools = {t.name: (t.meta or {}) for t in (await session.list_tools()).tools}
        text = ""
        uri = (tools.get("todo-add") or {}).get("ui", {}).get("resourceUri")
        if uri:
            read_back = await session.read_resource(uri)
            text = getattr(read_back.contents[0], "text", "")
        return tools, text


def test_dev_mcp_serves_the_surface_as_an_mcp_app(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    urls, token = dev.server.urls, dev.server.host.host_token
    tools, document = _run(_look, urls.mcp_url, token, True)
    assert tools["todo-add"]["ui"]["resourceUri"].startswith("ui://lineup/todo/")
    assert tools["lineup-surface-sync"]["ui"]["visibility"] == ["app"]
    assert "<html" in document.lower()
    plain, _ = _run(_look, urls.mcp_url, token, False)
    assert "lineup-surface-sync" not in plain
    assert all("ui" not in meta for meta in plain.values())
