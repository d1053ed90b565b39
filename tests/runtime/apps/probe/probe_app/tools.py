"""Probe tools: echo, append, hang, crash, raise, bad results, forged capabilities."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from lineup_sdk import ToolContext, ToolError, define_agent_tools
from lineup_sdk.errors import LineupError

tools = define_agent_tools(app_scope="probe")

# Test switches travel in the bundle (a `switches.py` a test writes before building) or in
# the runtime's explicit `worker_env`: the sandbox passes nothing else of the environment.
try:
    from probe_app import switches  # type: ignore[import-not-found]
except ImportError:
    switches = None

if os.environ.get("LINEUP_SDK_COLLECT") == "1" and getattr(switches, "MISMATCH", False):

    @tools.tool("probe.only_in_manifest", activation="app_ready")
    async def only_in_manifest(ctx: ToolContext) -> None:
        """Declared at build time only (to provoke a method mismatch)."""


if os.environ.get("PROBE_POISON") == "1" and os.environ.get("LINEUP_SDK_COLLECT") != "1":
    raise RuntimeError("this worker cannot start")


@tools.tool("probe.echo", activation="app_ready")
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back (and print noise that must not reach the bridge)."""
    print("noise on stdout", text)
    return text


@tools.tool("probe.sync_echo", activation="app_ready")
def sync_echo(ctx: ToolContext, text: str) -> dict[str, Any]:
    """A sync handler reading session data from its worker thread."""
    snap = ctx.session_data.get_sync()
    return {"text": text, "revision": snap.revision}


@tools.tool("probe.append", activation="app_ready")
async def append(ctx: ToolContext, item: str) -> int:
    """Append to a list in session data; returns the new revision."""
    snap = await ctx.session_data.get()
    items = list((snap.data or {}).get("items", []))
    items.append(item)
    new = await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)
    return new.revision


@tools.tool("probe.write", activation="app_ready")
async def write(ctx: ToolContext, data: Any, expected_revision: int) -> int:
    """Replace session data with anything (to test the runtime's checks)."""
    new = await ctx.session_data.replace(data, expected_revision=expected_revision)
    return new.revision


@tools.tool("probe.read", activation="app_ready")
async def read(ctx: ToolContext) -> dict[str, Any]:
    """Read session data."""
    snap = await ctx.session_data.get()
    return {"data": snap.data, "revision": snap.revision}


@tools.tool("probe.peek", activation="activation_not_required")
async def peek(ctx: ToolContext) -> str:
    """Runs only on an already-running session."""
    return ctx.app_session_id[:4]


@tools.tool("probe.fg", activation="foreground_required")
async def fg(ctx: ToolContext) -> str:
    """Needs the Host's foreground confirmation."""
    return "foreground"


@tools.tool("probe.hang", activation="app_ready", timeout_s=0.5)
async def hang(ctx: ToolContext) -> None:
    """Never answers."""
    await asyncio.sleep(3600)


@tools.tool("probe.crash", activation="app_ready")
async def crash(ctx: ToolContext) -> None:
    """Kills its own worker process."""
    os._exit(1)


@tools.tool("probe.boom", activation="app_ready")
async def boom(ctx: ToolContext) -> None:
    """Raises an unexpected exception."""
    raise RuntimeError("secret internal detail")


@tools.tool("probe.fail", activation="app_ready")
async def fail(ctx: ToolContext, code: str) -> None:
    """Raises a business error with the given code."""
    raise ToolError(code, "failed on purpose")


@tools.tool("probe.bad_result", activation="app_ready")
async def bad_result(ctx: ToolContext) -> dict[str, int]:
    """Returns something that breaks its result schema."""
    return {"n": "not a number"}  # type: ignore[dict-item]


@tools.tool("probe.forge", activation="app_ready")
async def forge(ctx: ToolContext, cap: str) -> str:
    """Tries to read another session's data with a forged capability."""
    sd: Any = ctx.session_data
    forged = type(sd)(sd._bridge, cap, sd._delivery, sd._loop)
    try:
        await forged.get()
    except LineupError as exc:
        return exc.code
    return "allowed"


@tools.tool("probe.garbage", activation="app_ready")
async def garbage(ctx: ToolContext) -> None:
    """Writes garbage to the bridge."""
    os.write(int(sys.argv[-1]), b"this is not json\n")
    await asyncio.sleep(3600)


@tools.tool("probe.stray", activation="app_ready")
async def stray(ctx: ToolContext) -> None:
    """Answers a call it was never given."""
    os.write(int(sys.argv[-1]), b'{"t":"result","id":999999,"ok":true,"result":null}\n')
    await asyncio.sleep(3600)


@tools.tool("probe.huge", activation="app_ready")
async def huge(ctx: ToolContext) -> str:
    """Answers with an oversized bridge message."""
    return "x" * (5 * 1024 * 1024)
