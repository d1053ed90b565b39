"""Tasks tools used by the runtime-neutral UI Action fixtures (SPEC 17).

Another Host replaying the fixtures implements them the same way. Session data is
`{"tasks": [{"id", "title", "done"}]}`. Tools: `tasks.show` (foreground_required) returns
the titles, `tasks.add` (app_ready) appends a task (its id is the call_id) and returns the
revision, `tasks.crash` (app_ready) appends one and then its worker dies. The UI Actions
are in `tasks_app.actions`.
"""

from __future__ import annotations

import os

from lineup_sdk import ToolContext, define_agent_tools

from . import actions as actions  # the UI Action registry, found by the build

tools = define_agent_tools(app_scope="tasks")


@tools.tool("tasks.show", activation="foreground_required")
async def show(ctx: ToolContext) -> list[str]:
    """Show the tasks on screen and return their titles."""
    snap = await ctx.session_data.get()
    return [t["title"] for t in (snap.data or {}).get("tasks", [])]


@tools.tool("tasks.add", activation="app_ready")
async def add(ctx: ToolContext, title: str) -> int:
    """Add a task; returns the session data revision it produced.

    Args:
        title: The task.
    """
    snap = await ctx.session_data.get()
    tasks = [
        *(snap.data or {}).get("tasks", []),
        {"id": ctx.call_id, "title": title, "done": False},
    ]
    new = await ctx.session_data.replace({"tasks": tasks}, expected_revision=snap.revision)
    return new.revision


@tools.tool("tasks.crash", activation="app_ready")
async def crash(ctx: ToolContext, title: str) -> None:
    """Add a task, then die before answering (nothing of it may stay).

    Args:
        title: The task it adds first.
    """
    snap = await ctx.session_data.get()
    tasks = [
        *(snap.data or {}).get("tasks", []),
        {"id": ctx.call_id, "title": title, "done": False},
    ]
    await ctx.session_data.replace({"tasks": tasks}, expected_revision=snap.revision)
    os._exit(1)
