"""The queue app's Agent tools; its UI Actions live in `queue_app.actions`, imported here."""

from __future__ import annotations

from typing import Any

from lineup_sdk import ToolContext, define_agent_tools

from . import actions as actions  # the UI Action registry, found by the build

tools = define_agent_tools(app_scope="queue")


@tools.tool("queue.add", activation="app_ready")
async def add(ctx: ToolContext, item: str) -> int:
    """Append an item to the list; returns the revision its write makes.

    Args:
        item: What to append.
    """
    snap = await ctx.session_data.get()
    items = list((snap.data or {}).get("items", []))
    items.append(item)
    new = await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)
    return new.revision


@tools.tool("queue.read", activation="app_ready")
async def read(ctx: ToolContext) -> dict[str, Any]:
    """The list and its revision."""
    snap = await ctx.session_data.get()
    return {"data": snap.data, "revision": snap.revision}


@tools.tool("queue.open", activation="foreground_required")
async def open_(ctx: ToolContext) -> str:
    """Needs the Host's foreground confirmation (a test holds the activation starting)."""
    return "open"
