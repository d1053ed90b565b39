"""Bulk tools: a large typed array to validate, and a cheap echo beside it."""

from __future__ import annotations

import os
import time

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="bulk")

if os.environ.get("BULK_HANG_AT_START") == "1" and os.environ.get("LINEUP_SDK_COLLECT") != "1":
    time.sleep(3600)  # a worker that never reports its methods


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
