"""Notes tools used by the runtime-neutral conformance fixtures.

Another Host replaying the fixtures implements these three tools the same way:
`notes.show` (foreground_required) returns the notes, `notes.add` (app_ready) appends one
and returns the new revision, `notes.count` (activation_not_required) counts them.
"""

from __future__ import annotations

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="notes")


@tools.tool("notes.show", activation="foreground_required")
async def show(ctx: ToolContext) -> list[str]:
    """Show the notes on screen and return them."""
    snap = await ctx.session_data.get()
    return list((snap.data or {}).get("notes", []))


@tools.tool("notes.add", activation="app_ready")
async def add(ctx: ToolContext, text: str) -> int:
    """Append a note; returns the session data revision it produced.

    Args:
        text: The note.
    """
    snap = await ctx.session_data.get()
    notes = [*(snap.data or {}).get("notes", []), text]
    new = await ctx.session_data.replace({"notes": notes}, expected_revision=snap.revision)
    return new.revision


@tools.tool("notes.count", activation="activation_not_required")
async def count(ctx: ToolContext) -> int:
    """Count the notes of an already running app."""
    snap = await ctx.session_data.get()
    return len((snap.data or {}).get("notes", []))
