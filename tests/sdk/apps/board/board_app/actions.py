"""The board's UI Actions: what its Surface may ask for."""

from __future__ import annotations

from pydantic import BaseModel, Field

from lineup_sdk import ActionContext, ToolError, define_ui_actions

actions = define_ui_actions(app_scope="board")


class Toggled(BaseModel):
    """What toggling a card returns."""

    id: str = Field(description="The card's id.")
    done: bool = Field(description="Whether the card is done now.")


@actions.action("board.toggle", timeout_s=5)
async def toggle(ctx: ActionContext, id: str) -> Toggled:
    """Tick or untick one card.

    Args:
        id: The card to toggle.
    """
    snap = await ctx.session_data.get()
    cards = list((snap.data or {}).get("cards", []))
    for card in cards:
        if card["id"] == id:
            card["done"] = not card["done"]
            card["by"] = ctx.action_id
            await ctx.session_data.replace({"cards": cards}, expected_revision=snap.revision)
            return Toggled(id=id, done=card["done"])
    raise ToolError("not_found", f"no card {id}")


@actions.action("board.clear_done", description="Remove every card that is done.")
def clear_done(ctx: ActionContext) -> None:
    snap = ctx.session_data.get_sync()
    cards = [c for c in (snap.data or {}).get("cards", []) if not c["done"]]
    ctx.session_data.replace_sync({"cards": cards}, expected_revision=snap.revision)
