"""The board's Agent tools; its UI Actions live in `board_app.actions`, imported here."""

from __future__ import annotations

from pydantic import BaseModel, Field

from lineup_sdk import ToolContext, define_agent_tools

from . import actions as actions  # the UI Action registry, found by the build

tools = define_agent_tools(app_scope="board")


class Added(BaseModel):
    """What adding a card returns."""

    id: str = Field(description="The new card's id.")
    count: int = Field(description="How many cards the board holds now.")


@tools.tool("board.add", activation="app_ready")
async def add(ctx: ToolContext, title: str = Field(min_length=1, max_length=80)) -> Added:
    """Add a card to this conversation's board.

    Args:
        title: The card's title.
    """
    snap = await ctx.session_data.get()
    cards = list((snap.data or {}).get("cards", []))
    cards.append({"id": ctx.call_id, "title": title, "done": False})
    await ctx.session_data.replace({"cards": cards}, expected_revision=snap.revision)
    return Added(id=ctx.call_id, count=len(cards))
