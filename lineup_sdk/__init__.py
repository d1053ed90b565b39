"""LineUp SDK: declare agent-callable MiniApp tools with `define_agent_tools`."""

from lineup_sdk._registry import ToolRegistry, define_agent_tools
from lineup_sdk._version import __version__
from lineup_sdk.catalog import CATALOG, RuntimeHandler
from lineup_sdk.context import SessionData, Snapshot, ToolContext
from lineup_sdk.errors import DeclarationError, LineupError, ToolError

__all__ = [
    "CATALOG",
    "DeclarationError",
    "LineupError",
    "RuntimeHandler",
    "SessionData",
    "Snapshot",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "__version__",
    "define_agent_tools",
]
