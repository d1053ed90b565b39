"""The queue app's UI Actions: what its Surface may ask for."""

from __future__ import annotations

import asyncio
import os

from lineup_sdk import ActionContext, ToolError, define_ui_actions

actions = define_ui_actions(app_scope="queue")

# Test switches travel in the bundle (a `switches.py` a test writes before building).
try:
    from queue_app import switches  # type: ignore[import-not-found]
except ImportError:
    switches = None

if os.environ.get("LINEUP_SDK_COLLECT") == "1" and getattr(switches, "MISMATCH", False):

    @actions.action("queue.only_in_manifest")
    async def only_in_manifest(ctx: ActionContext) -> None:
        """Declared at build time only (to provoke a method mismatch on the actions)."""


async def _append(ctx: ActionContext, item: str) -> int:
    snap = await ctx.session_data.get()
    items = list((snap.data or {}).get("items", []))
    items.append(item)
    await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)
    return len(items)


@actions.action("queue.push")
async def push(ctx: ActionContext, item: str) -> dict[str, object]:
    """Append an item to the list.

    Args:
        item: What to append.
    """
    count = await _append(ctx, item)
    return {"count": count, "action_id": ctx.action_id, "client_id": ctx.client_id}


@actions.action("queue.peek")
async def peek(ctx: ActionContext) -> int:
    """Read the list's length; writes nothing."""
    snap = await ctx.session_data.get()
    return len((snap.data or {}).get("items", []))


@actions.action("queue.refuse")
async def refuse(ctx: ActionContext, item: str) -> None:
    """Append, then refuse (a business error: nothing of it may stay).

    Args:
        item: What it appends before refusing.
    """
    await _append(ctx, item)
    raise ToolError("refused", f"not {item}")


@actions.action("queue.crash")
async def crash(ctx: ActionContext, item: str) -> None:
    """Append, then kill its own worker (nothing of it may stay).

    Args:
        item: What it appends before the crash.
    """
    await _append(ctx, item)
    os._exit(1)


@actions.action("queue.hang", timeout_s=0.5)
async def hang(ctx: ActionContext) -> None:
    """Never answers."""
    await asyncio.sleep(3600)


@actions.action("queue.bad")
async def bad(ctx: ActionContext) -> int:
    """Answers something its result schema refuses."""
    return "not a number"  # type: ignore[return-value]
