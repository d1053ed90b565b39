"""The naming rules for app scopes and method names (cheap to import: the verify path
checks every manifest's method names with them)."""

from __future__ import annotations

import re

__all__ = [
    "RESERVED_SCOPES",
    "RESULT_TOOL",
    "SEGMENT",
    "mcp_tool_name",
    "method_name_problem",
    "scope_problem",
]

#: Scopes no MiniApp may take: `lineup` names the toolchain's own tools (SPEC 13.2).
RESERVED_SCOPES = frozenset({"lineup"})

#: The toolchain's own MCP tool that reads a call's stored final (scope `lineup`), named so
#: under both tool-name styles.
RESULT_TOOL = "lineup-result"

SEGMENT = re.compile(r"[a-z][a-z0-9_]*\Z")
_SEGMENT = SEGMENT


def method_name_problem(method: str, app_scope: str) -> tuple[str, str] | None:
    """`(code, message)` if `method` breaks the naming rule or leaves the scope, else None."""
    parts = method.split(".") if isinstance(method, str) and len(method) <= 200 else []
    if len(parts) < 2 or not all(_SEGMENT.match(p) for p in parts):
        return (
            "invalid_method_name",
            f"method {method!r} must be lowercase `[a-z][a-z0-9_]*` segments joined by dots, "
            "starting with the app scope (at most 200 characters)",
        )
    if parts[0] != app_scope:
        return (
            "method_outside_scope",
            f"method {method!r} is outside app scope {app_scope!r}",
        )
    return None


def scope_problem(app_scope: str) -> str | None:
    """A message if `app_scope` is not a valid scope name."""
    if not isinstance(app_scope, str) or not _SEGMENT.match(app_scope):
        return f"app_scope {app_scope!r} must match [a-z][a-z0-9_]*"
    return None


def mcp_tool_name(method: str, style: str = "dashed") -> str:
    """The MCP name `lineup serve` gives a method: with `.` → `-` (`dashed`, the default:
    every name then matches `^[a-zA-Z0-9_-]{1,64}$`, as Claude Desktop and
    OpenAI-compatible clients ask) or as is (`dotted`). Shared by the server and
    `lineup docs`, so the page names tools as they are served."""
    return method.replace(".", "-") if style == "dashed" else method
