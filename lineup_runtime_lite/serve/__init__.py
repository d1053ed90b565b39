"""`lineup serve`: the Agent Inventory of a `Runtime` as a Model Context Protocol server
(SPEC 10). Needs the optional `mcp` extra: `pip install ".[mcp]"` in a checkout, or the
wheel with `[mcp]`."""

from __future__ import annotations

from lineup_sdk import __version__
from lineup_sdk.errors import LineupError

try:
    import mcp  # noqa: F401
except ModuleNotFoundError:
    raise LineupError(
        "usage_invalid",
        "lineup serve needs the MCP SDK, which is not installed",
        hint=f'install the mcp extra: pip install ".[mcp]" in a LineUp checkout, or '
        f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[mcp]" beside the wheel',
        exit_code=2,
    ) from None

from lineup_runtime_lite.serve._apps import Installable, install_targets
from lineup_runtime_lite.serve._bridge import Bridge, ServeOptions
from lineup_runtime_lite.serve._limits import HttpLimits
from lineup_runtime_lite.serve._mapping import McpTool, call_result, catalog, error_text
from lineup_runtime_lite.serve._transports import (
    REMOTE_WARNING,
    check_bind,
    check_host_name,
    http_app,
    is_loopback,
    serve_http,
    serve_stdio,
)

__all__ = [
    "REMOTE_WARNING",
    "Bridge",
    "HttpLimits",
    "Installable",
    "McpTool",
    "ServeOptions",
    "call_result",
    "catalog",
    "check_bind",
    "check_host_name",
    "error_text",
    "http_app",
    "install_targets",
    "is_loopback",
    "serve_http",
    "serve_stdio",
]
