"""The one door into the runtime's inside, for the runtime's own tests and benchmarks: the
engine behind a `Runtime` or `AsyncRuntime`, and the few internal names the tests pin.

No stability promise: anything here may change or go in any release. Applications, hosts
and MiniApp tests use the public paths (`lineup_runtime_lite`, `.testing`, `.scenario`,
`.suite`, `.serve`, `.web`) instead. The suite reaches nothing private any other way
(`tests/test_test_layout.py`: no `._engine` or `._core` and no `_`-module import under
`tests/` or `benchmarks/`), so a change inside the runtime that the tests follow touches
this file, and only it, on the test side.

The internal names load on first use (`serve` needs the `mcp` extra, `web` `websockets`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lineup_runtime_lite.api.async_runtime import AsyncRuntime
from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.api.runtime import Runtime

if TYPE_CHECKING:
    from lineup_runtime_lite.api.async_faces import _AsyncHostPort as AsyncHostPort
    from lineup_runtime_lite.api.runtime import _HostPort as HostPort
    from lineup_runtime_lite.drivers.install import _check_dependencies as check_dependencies
    from lineup_runtime_lite.serve import _mcpapps as mcpapps
    from lineup_runtime_lite.serve._limits import raise_descriptor_limit
    from lineup_runtime_lite.serve._mapping import (
        RESULT_TOOL,
        closest,
        other_spelling,
        output_schema,
        pending_result,
        progress_text,
        result_tool_entry,
        tool_name,
    )
    from lineup_runtime_lite.serve._resources import MIME_TYPE
    from lineup_runtime_lite.serve._resume import RETRY_MS
    from lineup_runtime_lite.serve._transports import MAX_LINE
    from lineup_runtime_lite.serve._views import VIEW_TTL_MS
    from lineup_runtime_lite.store.schema import _V4_INDEXES as V4_INDEXES
    from lineup_runtime_lite.store.schema import _V5_INDEXES as V5_INDEXES
    from lineup_runtime_lite.store.sqlite import _FULL_CHECK_ENV as FULL_CHECK_ENV
    from lineup_runtime_lite.validation.checks import _plain_check as plain_check
    from lineup_runtime_lite.web._devhost import TIMELINE_PREVIEW_CHARS, TIMELINE_RESULT_BYTES
    from lineup_runtime_lite.web._server import bind_localhost

__all__ = [
    "FULL_CHECK_ENV",
    "MAX_LINE",
    "MIME_TYPE",
    "RESULT_TOOL",
    "RETRY_MS",
    "TIMELINE_PREVIEW_CHARS",
    "TIMELINE_RESULT_BYTES",
    "V4_INDEXES",
    "V5_INDEXES",
    "VIEW_TTL_MS",
    "AsyncHostPort",
    "HostPort",
    "bind_localhost",
    "check_dependencies",
    "closest",
    "engine_of",
    "mcpapps",
    "other_spelling",
    "output_schema",
    "pending_result",
    "plain_check",
    "progress_text",
    "raise_descriptor_limit",
    "result_tool_entry",
    "tool_name",
]

#: Each internal name: `(module under lineup_runtime_lite, attribute)`; no attribute names
#: the module itself (a test patches one of its constants).
_INSIDE: dict[str, tuple[str, str | None]] = {
    "AsyncHostPort": ("api.async_faces", "_AsyncHostPort"),
    "FULL_CHECK_ENV": ("store.sqlite", "_FULL_CHECK_ENV"),
    "HostPort": ("api.runtime", "_HostPort"),
    "MAX_LINE": ("serve._transports", "MAX_LINE"),
    "MIME_TYPE": ("serve._resources", "MIME_TYPE"),
    "RESULT_TOOL": ("serve._mapping", "RESULT_TOOL"),
    "RETRY_MS": ("serve._resume", "RETRY_MS"),
    "TIMELINE_PREVIEW_CHARS": ("web._devhost", "TIMELINE_PREVIEW_CHARS"),
    "TIMELINE_RESULT_BYTES": ("web._devhost", "TIMELINE_RESULT_BYTES"),
    "V4_INDEXES": ("store.schema", "_V4_INDEXES"),
    "V5_INDEXES": ("store.schema", "_V5_INDEXES"),
    "VIEW_TTL_MS": ("serve._views", "VIEW_TTL_MS"),
    "bind_localhost": ("web._server", "bind_localhost"),
    "check_dependencies": ("drivers.install", "_check_dependencies"),
    "closest": ("serve._mapping", "closest"),
    "mcpapps": ("serve._mcpapps", None),
    "other_spelling": ("serve._mapping", "other_spelling"),
    "output_schema": ("serve._mapping", "output_schema"),
    "pending_result": ("serve._mapping", "pending_result"),
    "plain_check": ("validation.checks", "_plain_check"),
    "progress_text": ("serve._mapping", "progress_text"),
    "raise_descriptor_limit": ("serve._limits", "raise_descriptor_limit"),
    "result_tool_entry": ("serve._mapping", "result_tool_entry"),
    "tool_name": ("serve._mapping", "tool_name"),
}


def engine_of(runtime: Runtime | AsyncRuntime) -> Engine:
    """The engine a runtime runs on: its facts, store, drivers and workers."""
    art = runtime._art if isinstance(runtime, Runtime) else runtime
    return art._engine


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _INSIDE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    found = importlib.import_module(f"lineup_runtime_lite.{module}")
    return found if attribute is None else getattr(found, attribute)
