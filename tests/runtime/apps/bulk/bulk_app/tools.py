"""Bulk tools: a large typed array to validate, and a cheap echo beside it."""

from __future__ import annotations

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="bulk")


@tools.tool("bulk.total", activation="app_ready")
async def total(ctx: ToolContext, numbers: list[int]) -> int:
    """Add up the numbers."""
    return sum(numbers)


@tools.tool("bulk.echo", activation="app_ready")
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


@tools.tool("bulk.peek", activation="activation_not_required")
async def peek(ctx: ToolContext) -> str:
    """Answered only on a running session (cheap to reject: app_not_running)."""
    return "running"
