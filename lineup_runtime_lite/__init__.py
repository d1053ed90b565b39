"""LineUp reference runtime: install verified bundles and route Agent calls.

`Runtime` (and its asynchronous twin `AsyncRuntime`) with their outbox and Surface handles,
the clocks, the Host simulator, and the worker isolation modes `Runtime.open` takes. The
other public paths: `testing`, `scenario`, `suite`, `databases` (a `--db` value), and the
faces of `sim` (the replay driver), `serve` (MCP) and `web` (the dev Host)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineup_runtime_lite.api.async_runtime import (
        DEFAULT_ISOLATION,
        ISOLATIONS,
        AsyncMarks,
        AsyncOutbox,
        AsyncRuntime,
        AsyncSurface,
        check_isolation,
    )
    from lineup_runtime_lite.api.clock import Clock, RealClock, VirtualClock
    from lineup_runtime_lite.api.runtime import Marks, Outbox, Runtime, Surface
    from lineup_runtime_lite.host.simulator import HostSimulator

__all__ = [  # noqa: RUF022 (plainly sorted: tests/build/test_layering.py)
    "AsyncMarks",
    "AsyncOutbox",
    "AsyncRuntime",
    "AsyncSurface",
    "Clock",
    "DEFAULT_ISOLATION",
    "HostSimulator",
    "ISOLATIONS",
    "Marks",
    "Outbox",
    "RealClock",
    "Runtime",
    "Surface",
    "VirtualClock",
    "check_isolation",
]

# Loaded on first use, so importing one inner module (`lineup_runtime_lite.core`, the pure
# transitions) does not pay for the whole runtime: the store, sqlite3, the drivers.
_LAZY = {
    "AsyncMarks": "lineup_runtime_lite.api.async_runtime",
    "AsyncOutbox": "lineup_runtime_lite.api.async_runtime",
    "AsyncRuntime": "lineup_runtime_lite.api.async_runtime",
    "AsyncSurface": "lineup_runtime_lite.api.async_runtime",
    "Clock": "lineup_runtime_lite.api.clock",
    "DEFAULT_ISOLATION": "lineup_runtime_lite.api.async_runtime",
    "HostSimulator": "lineup_runtime_lite.host.simulator",
    "ISOLATIONS": "lineup_runtime_lite.api.async_runtime",
    "Marks": "lineup_runtime_lite.api.runtime",
    "Outbox": "lineup_runtime_lite.api.runtime",
    "RealClock": "lineup_runtime_lite.api.clock",
    "Runtime": "lineup_runtime_lite.api.runtime",
    "Surface": "lineup_runtime_lite.api.runtime",
    "VirtualClock": "lineup_runtime_lite.api.clock",
    "check_isolation": "lineup_runtime_lite.api.async_runtime",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lineup_runtime_lite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
