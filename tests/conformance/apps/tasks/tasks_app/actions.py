"""Tasks UI Actions (SPEC 17): `tasks.create` appends a task (its id is the action_id),
`tasks.tick` toggles one (`app.not_found` for an unknown id, data unchanged), `tasks.break`
appends one and then its worker dies."""

from __future__ import annotations

import os

from pydantic import BaseModel

from lineup_sdk import ActionContext, ToolError, define_ui_actions

actions = define_ui_actions(app_scope="tasks")


class Ticked(BaseModel):
    """A task's state after a tick."""

    id: str
    done: bool


async def _append(ctx: ActionContext, title: str) -> int:
    snap = await ctx.session_data.get()
    tasks = [
        *(snap.data or {}).get("tasks", []),
        {"id": ctx.action_id, "title": title, "done": False},
    ]
    await ctx.session_data.replace({"tasks": tasks}, expected_revision=snap.revision)
    return len(tasks)


@actions.action("tasks.create")
async def create(ctx: ActionContext, title: str) -> int:
    """Add a task from the Surface; returns how many there are.

    Args:
        title: The task.
    """
    return await _append(ctx, title)


@actions.action("tasks.tick")
async def tick(ctx: ActionContext, id: str) -> Ticked:
    """Tick or untick a task.

    Args:
        id: The task's id.
    """
    snap = await ctx.session_data.get()
    tasks = [dict(t) for t in (snap.data or {}).get("tasks", [])]
    for task in tasks:
        if task["id"] == id:
            task["done"] = not task["done"]
            await ctx.session_data.replace({"tasks": tasks}, expected_revision=snap.revision)
            return Ticked(id=id, done=task["done"])
    raise ToolError("not_found", f"no task {id}")


@actions.action("tasks.break")
async def break_(ctx: ActionContext, title: str) -> None:
    """Add a task, then die before answering (nothing of it may stay).

    Args:
        title: The task it adds first.
    """
    await _append(ctx, title)
    os._exit(1)
