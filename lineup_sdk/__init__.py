"""LineUp SDK: declare agent-callable MiniApp tools with `define_agent_tools`, and the
Surface's UI Actions with `define_ui_actions`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lineup_sdk._version import __version__

if TYPE_CHECKING:
    from lineup_sdk._registry import (
        ActionRegistry,
        ToolRegistry,
        define_agent_tools,
        define_ui_actions,
    )
    from lineup_sdk.catalog import CATALOG, RuntimeHandler
    from lineup_sdk.context import ActionContext, SessionData, Snapshot, ToolContext
    from lineup_sdk.errors import DeclarationError, LineupError, ToolError

__all__ = [  # noqa: RUF022 (plainly sorted: tests/build/test_layering.py)
    "ActionContext",
    "ActionRegistry",
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
    "define_ui_actions",
]

# Loaded on first use, so a tool that needs one submodule (the verify path needs only
# `errors`) does not pay for the registry and the context machinery.
_LAZY = {
    "CATALOG": "lineup_sdk.catalog",
    "ActionContext": "lineup_sdk.context",
    "ActionRegistry": "lineup_sdk._registry",
    "DeclarationError": "lineup_sdk.errors",
    "LineupError": "lineup_sdk.errors",
    "RuntimeHandler": "lineup_sdk.catalog",
    "SessionData": "lineup_sdk.context",
    "Snapshot": "lineup_sdk.context",
    "ToolContext": "lineup_sdk.context",
    "ToolError": "lineup_sdk.errors",
    "ToolRegistry": "lineup_sdk._registry",
    "define_agent_tools": "lineup_sdk._registry",
    "define_ui_actions": "lineup_sdk._registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lineup_sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
