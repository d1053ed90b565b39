"""Flaky tools: slow, hang, exit, garbage, oversized and stray answers, append-then-exit."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="flaky")


@tools.tool("flaky.echo", activation="app_ready")
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


@tools.tool("flaky.append", activation="app_ready")
async def append(ctx: ToolContext, item: str) -> int:
    """Append to a list in session data; returns the new revision."""
    snap = await ctx.session_data.get()
    items = [*(snap.data or {}).get("items", []), item]
    new = await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)
    return new.revision


@tools.tool("flaky.wait", activation="app_ready", timeout_s=30)
async def wait(ctx: ToolContext, path: str) -> str:
    """Stay in flight until `path` exists (the test decides when, without a deadline)."""
    while not os.path.exists(path):
        await asyncio.sleep(0.01)
    return "released"


@tools.tool("flaky.wait_append", activation="app_ready", timeout_s=30)
async def wait_append(ctx: ToolContext, path: str, item: str) -> int:
    """Stay in flight until `path` exists, then append to the session data."""
    while not os.path.exists(path):
        await asyncio.sleep(0.01)
    snap = await ctx.session_data.get()
    items = [*(snap.data or {}).get("items", []), item]
    new = await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)
    return new.revision


@tools.tool("flaky.hang", activation="app_ready", timeout_s=0.3)
async def hang(ctx: ToolContext) -> None:
    """Never answers."""
    await asyncio.sleep(3600)


@tools.tool("flaky.exit", activation="app_ready")
async def exit_(ctx: ToolContext) -> None:
    """Kills its own worker process."""
    os._exit(1)


@tools.tool("flaky.append_then_exit", activation="app_ready")
async def append_then_exit(ctx: ToolContext, item: str) -> None:
    """Writes a session-data change (held by its delivery), then dies before answering."""
    snap = await ctx.session_data.get()
    items = [*(snap.data or {}).get("items", []), item]
    await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)
    os._exit(1)


@tools.tool("flaky.garbage", activation="app_ready")
async def garbage(ctx: ToolContext) -> None:
    """Writes garbage to the bridge."""
    os.write(int(sys.argv[-1]), b"\x00\xffnot json at all\n")
    await asyncio.sleep(3600)


@tools.tool("flaky.huge", activation="app_ready")
async def huge(ctx: ToolContext) -> None:
    """Writes a bridge line larger than the runtime accepts (past the SDK's own check)."""
    os.write(int(sys.argv[-1]), b'{"t":"result","id":1,"ok":true,"result":"' + b"x" * (5 << 20))
    await asyncio.sleep(3600)


def _own_delivery(ctx: ToolContext) -> int:
    sd: Any = ctx.session_data
    return int(sd._delivery)


@tools.tool("flaky.malformed", activation="app_ready")
async def malformed(ctx: ToolContext) -> None:
    """Answers its own delivery with a result of the wrong shape."""
    line = json.dumps({"t": "result", "id": _own_delivery(ctx), "ok": "maybe"})
    os.write(int(sys.argv[-1]), line.encode() + b"\n")
    await asyncio.sleep(3600)


@tools.tool("flaky.unknown", activation="app_ready")
async def unknown(ctx: ToolContext) -> None:
    """Sends a message of a kind the bridge does not have, naming its own delivery."""
    line = json.dumps({"t": "take_over", "id": _own_delivery(ctx)})
    os.write(int(sys.argv[-1]), line.encode() + b"\n")
    await asyncio.sleep(3600)


@tools.tool("flaky.stray", activation="app_ready")
async def stray(ctx: ToolContext) -> None:
    """Answers a call it was never given."""
    os.write(int(sys.argv[-1]), b'{"t":"result","id":424242,"ok":true,"result":null}\n')
    await asyncio.sleep(3600)
