"""One tool per format the runtime's validator claims, and two `pattern` tools (one a
backtracking trap for a naive regex engine); each answers its value as a string."""

from __future__ import annotations

import uuid
from datetime import date, datetime, time
from typing import Annotated

from pydantic import Field

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="formats")


@tools.tool("formats.date_time", activation="app_ready")
async def date_time(ctx: ToolContext, value: datetime) -> str:
    """A `date-time`."""
    return value.isoformat()


@tools.tool("formats.date", activation="app_ready")
async def date_(ctx: ToolContext, value: date) -> str:
    """A `date`."""
    return value.isoformat()


@tools.tool("formats.time", activation="app_ready")
async def time_(ctx: ToolContext, value: time) -> str:
    """A `time`."""
    return value.isoformat()


@tools.tool("formats.uuid", activation="app_ready")
async def uuid_(ctx: ToolContext, value: uuid.UUID) -> str:
    """A `uuid`."""
    return str(value)


@tools.tool("formats.email", activation="app_ready")
async def email(
    ctx: ToolContext, value: Annotated[str, Field(json_schema_extra={"format": "email"})]
) -> str:
    """An `email` (the format pydantic's EmailStr emits)."""
    return value


@tools.tool("formats.code", activation="app_ready")
async def code(ctx: ToolContext, value: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d{2}$")]) -> str:
    """A `pattern`."""
    return value


@tools.tool("formats.trap", activation="app_ready")
async def trap(ctx: ToolContext, value: Annotated[str, Field(pattern=r"^(a+)+$")]) -> str:
    """A `pattern` that backtracks exponentially in a naive engine."""
    return value
